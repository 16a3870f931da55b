"""What a client, a load balancer or the network sees of a server (issue 15).

Specification: overall health ("" and the service name) is SERVING only while at least
one model has a loaded version, and follows loads and removals; an unknown health name
is NOT_FOUND with a reason. Clients never get server paths or the names of other
models: errors and GetModel carry a generic reason, the log keeps the details. The
server and its /metrics listen on loopback unless told otherwise, /metrics on the
same address as gRPC (or --metrics-host); with --tls-cert/--tls-key it speaks TLS
and a client that trusts the certificate gets the same answers.
"""

from __future__ import annotations

import json
import shutil
import urllib.request

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from serverkit import (expected_scores, free_port, listening_address, model_path, probabilities, running_server,
                       score_request, self_signed_cert, write_test_model)
from server.api import SERVICE_NAME, pb, pb_grpc
from server.app import ScoringServer, ServeOptions

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def _status(channel, service: str):
    return health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=service)).status


def test_overall_health_says_not_serving_until_a_model_loads_and_after_the_last_goes(repo_root, corpus_keys):
    (repo_root / "not-a-model").mkdir()  # a wrong directory: nothing loadable
    with running_server(repo_root, enable_admin=True) as srv:
        for name in ("", SERVICE_NAME):
            assert _status(srv.channel, name) == NOT_SERVING
        write_test_model(model_path(repo_root, "m", 1), corpus_keys)
        srv.stub.Reload(pb.ReloadRequest())
        for name in ("", SERVICE_NAME, "m"):
            assert _status(srv.channel, name) == SERVING
        shutil.rmtree(repo_root / "m")
        srv.stub.Reload(pb.ReloadRequest())
        for name in ("", SERVICE_NAME, "m"):
            assert _status(srv.channel, name) == NOT_SERVING
        from server import healthcheck  # the container's HEALTHCHECK says the same

        assert healthcheck.main(["--address", srv.address]) == 1


def test_health_of_an_unknown_name_is_not_found_with_a_reason(repo_root, corpus_keys):
    write_test_model(model_path(repo_root, "m", 1), corpus_keys)
    with running_server(repo_root) as srv:
        with pytest.raises(grpc.RpcError) as info:
            _status(srv.channel, "nope")
        assert info.value.code() == grpc.StatusCode.NOT_FOUND
        assert "nope" in info.value.details()


def test_clients_get_no_server_paths_and_no_other_model_names(repo_root, corpus_keys, test_sentences, caplog):
    from training.modelfile.model import write_model

    write_test_model(model_path(repo_root, "secret-model", 1), corpus_keys)
    write_model(model_path(repo_root, "trained", 1), family="maxent", moses_type="wbe-msd-backward-fe",
                keys=corpus_keys, weights=np.zeros((corpus_keys.shape[0], 3), np.float32),
                bias=np.zeros(3, np.float32), features="S7", threshold=0,
                metadata={"training": {"store": "/srv/private/ja-en/store"}})  # what `train` records
    broken = model_path(repo_root, "broken", 1)
    broken.parent.mkdir(parents=True)
    broken.write_bytes(b"not a model")
    with running_server(repo_root, enable_admin=True) as srv:
        said = []

        def error(call, request):
            with pytest.raises(grpc.RpcError) as info:
                call(request)
            said.append(info.value.details())
            return info.value.code()

        assert error(srv.stub.Score, score_request(test_sentences[0], "nope")) == grpc.StatusCode.NOT_FOUND
        assert error(srv.stub.GetModel, pb.GetModelRequest(model="nope")) == grpc.StatusCode.NOT_FOUND
        assert error(srv.stub.Reload, pb.ReloadRequest(model="nope")) == grpc.StatusCode.NOT_FOUND
        assert error(srv.stub.Score, score_request(test_sentences[0], "broken")) == \
            grpc.StatusCode.FAILED_PRECONDITION
        info = srv.stub.GetModel(pb.GetModelRequest(model="broken"))
        said += [s.message for s in info.status]
        assert "not a moses-reorder weight file" in said[-1]  # the reason, without the path
        trained = srv.stub.GetModel(pb.GetModelRequest(model="trained"))
        assert json.loads(trained.metadata_json)["training"]["store"] == "store"
        said.append(trained.metadata_json)
        for text in said:
            assert str(repo_root) not in text and "secret-model" not in text and "/srv/" not in text, text
    logged = " ".join(json.dumps(getattr(r, "fields", {}), default=str) for r in caplog.records)
    assert str(broken) in logged  # the server's log keeps the path


def test_host_defaults_to_loopback_and_metrics_follow_it(repo_root, corpus_keys):
    write_test_model(model_path(repo_root, "m", 1), corpus_keys)
    assert ServeOptions(models=repo_root).host == "127.0.0.1"
    metrics_port = free_port()
    server = ScoringServer(ServeOptions(models=repo_root, port=0, poll_seconds=0, metrics_port=metrics_port))
    port = server.start()
    try:
        assert listening_address(port) == "127.0.0.1"
        assert listening_address(metrics_port) == "127.0.0.1"
        text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
        assert "moses_reorder_loaded_versions" in text
    finally:
        server.stop(0)


def test_tls_serves_the_same_answers_to_a_client_that_trusts_the_certificate(repo_root, corpus_keys,
                                                                           test_sentences, tmp_path):
    path = write_test_model(model_path(repo_root, "m", 1), corpus_keys)
    cert, key = self_signed_cert(tmp_path / "tls")
    server = ScoringServer(ServeOptions(models=repo_root, port=0, poll_seconds=0, tls_cert=cert, tls_key=key))
    port = server.start()
    try:
        credentials = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        with grpc.secure_channel(f"localhost:{port}", credentials) as channel:
            response = pb_grpc.ReorderingScorerStub(channel).Score(score_request(test_sentences[0], "m"), timeout=30)
            np.testing.assert_array_equal(probabilities(response), expected_scores(path, test_sentences[0]))
            assert _status(channel, "") == SERVING
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:  # plaintext gets nowhere
            with pytest.raises(grpc.RpcError) as info:
                pb_grpc.ReorderingScorerStub(channel).GetModel(pb.GetModelRequest(model="m"), timeout=5)
            assert info.value.code() == grpc.StatusCode.UNAVAILABLE
        from server import healthcheck  # the health probe speaks TLS too

        assert healthcheck.main(["--address", f"localhost:{port}", "--tls-ca", str(cert)]) == 0
    finally:
        server.stop(0)
