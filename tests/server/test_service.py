"""The scoring service against a real gRPC server on a loopback port.

Specification: Score answers exactly what the model file says for a sentence's phrase
pairs, under the model's Moses type; pinned versions stay answerable while loaded;
malformed requests get the status code that names the problem and the server keeps
serving; GetModel/ListModels/Reload report the repository's state; the result cache
answers repeated requests byte for byte; health and reflection work with stock stubs.
"""

from __future__ import annotations

import json
import shutil
import urllib.request

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from serverkit import (expected_scores, free_port, model_path, probabilities, running_server, score_request,
                       tiled_request, write_test_model)
from server.api import SERVICE_NAME, pb


def _code(call, *args, **kwargs) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as info:
        call(*args, **kwargs)
    return info.value.code(), info.value.details()


def test_score_answers_what_the_model_file_says(repo_root, corpus_keys, test_sentences):
    path = write_test_model(model_path(repo_root, "hier", 1), corpus_keys)
    with running_server(repo_root) as srv:
        for sentence in test_sentences[:5]:
            response = srv.stub.Score(score_request(sentence, "hier"))
            assert response.model == "hier" and response.version == 1
            assert list(response.outputs) == ["backward.mono", "backward.swap", "backward.disc",
                                              "forward.mono", "forward.swap", "forward.disc"]
            got = probabilities(response)
            assert got.shape == (len(sentence.pairs), 6)
            np.testing.assert_array_equal(got, expected_scores(path, sentence))
            np.testing.assert_allclose(got.reshape(-1, 2, 3).sum(axis=2), 1.0, rtol=1e-5)


@pytest.mark.parametrize("moses_type", ["wbe-msd-backward-fe", "phrase-mslr-bidirectional-fe",
                                        "hier-monotonicity-forward-fe", "wbe-leftright-bidirectional-fe"])
def test_every_moses_type_is_served_in_its_column_order(repo_root, corpus_keys, test_sentences, moses_type):
    from training.moses.types import MosesType

    path = write_test_model(model_path(repo_root, "m", 1), corpus_keys, moses_type=moses_type)
    with running_server(repo_root) as srv:
        response = srv.stub.Score(score_request(test_sentences[0], "m"))
        assert tuple(response.outputs) == MosesType.parse(moses_type).outputs
        np.testing.assert_array_equal(probabilities(response), expected_scores(path, test_sentences[0]))
        info = srv.stub.GetModel(pb.GetModelRequest(model="m"))
        assert info.moses_type == moses_type
        assert tuple(info.classes) == MosesType.parse(moses_type).classes
        assert tuple(info.directions) == MosesType.parse(moses_type).directions


def test_pinned_versions_and_keep_latest_two(repo_root, corpus_keys, test_sentences):
    paths = {v: write_test_model(model_path(repo_root, "m", v), corpus_keys, seed=v) for v in (1, 2, 3)}
    sentence = test_sentences[1]
    with running_server(repo_root) as srv:
        info = srv.stub.GetModel(pb.GetModelRequest(model="m"))
        assert list(info.loaded_versions) == [2, 3] and info.version == 3
        assert {s.version: s.state for s in info.status} == {1: "UNLOADED", 2: "LOADED", 3: "LOADED"}
        for version in (2, 3):
            response = srv.stub.Score(score_request(sentence, "m", version=version))
            assert response.version == version
            np.testing.assert_array_equal(probabilities(response), expected_scores(paths[version], sentence))
        newest = srv.stub.Score(score_request(sentence, "m"))
        assert newest.version == 3
        code, details = _code(srv.stub.Score, score_request(sentence, "m", version=1))
        assert code == grpc.StatusCode.FAILED_PRECONDITION and "version 1" in details
        code, _ = _code(srv.stub.Score, score_request(sentence, "m", version=9))
        assert code == grpc.StatusCode.FAILED_PRECONDITION
        assert srv.stub.GetModel(pb.GetModelRequest(model="m", version=2)).version == 2


def _mutated(request: pb.ScoreRequest, **fields) -> pb.ScoreRequest:
    bad = pb.ScoreRequest()
    bad.CopyFrom(request)
    for name, values in fields.items():
        bad.ClearField(name)
        getattr(bad, name).extend(values)
    return bad


def test_malformed_requests_get_named_errors_and_the_server_stays_up(repo_root, corpus_keys, test_sentences):
    write_test_model(model_path(repo_root, "m", 1), corpus_keys)
    sentence = test_sentences[2]
    good = score_request(sentence, "m")
    n_src = len(sentence.source)
    n_pairs = len(good.span_start)
    with running_server(repo_root, max_pairs=1000, max_message_mb=1) as srv:
        cases = {
            "span_end": _mutated(good, span_end=[n_src + 5] * n_pairs),              # span past the sentence
            "span_start": _mutated(good, span_start=list(good.span_end)),             # empty spans
            "target_offsets": _mutated(good, target_offsets=list(good.target_offsets)[::-1]),  # not monotone
            "align_offsets": _mutated(good, align_offsets=list(good.align_offsets)[:-1]),      # one short
            "token_offsets": _mutated(good, token_offsets=[0, 10 ** 6]),             # past the token bytes
            "align_source": _mutated(good, align_source=[40] * len(good.align_source)),        # outside phrase
        }
        for field, request in cases.items():
            code, details = _code(srv.stub.Score, request)
            assert code == grpc.StatusCode.INVALID_ARGUMENT, (field, code, details)
            assert field in details, (field, details)
        code, details = _code(srv.stub.Score, score_request(sentence, "nope"))
        assert code == grpc.StatusCode.NOT_FOUND and "nope" in details
        code, details = _code(srv.stub.Score, pb.ScoreRequest())
        assert code == grpc.StatusCode.INVALID_ARGUMENT and "model" in details
        # over --max-pairs: refused before any work
        big = _mutated(good, span_start=[0] * 1001, span_end=[1] * 1001)
        code, details = _code(srv.stub.Score, big)
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "max-pairs" in details
        # over the message size limit (1 MiB)
        huge = pb.ScoreRequest(model="m", token_bytes=b"x" * (2 * 1024 * 1024))
        code, _ = _code(srv.stub.Score, huge)
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
        # not a protobuf at all
        raw = srv.channel.unary_unary(f"/{SERVICE_NAME}/Score")
        code, details = _code(raw, b"\xff\xff\xff\xff")
        assert code == grpc.StatusCode.INVALID_ARGUMENT and "ScoreRequest" in details
        # still serving
        assert srv.stub.Score(good).version == 1


def test_a_deadline_the_server_cannot_meet(repo_root, corpus_keys, test_sentences):
    write_test_model(model_path(repo_root, "m", 1), corpus_keys)
    good = score_request(test_sentences[2], "m")
    huge = tiled_request(good, 100_000 // len(good.span_start))  # ~0.1 s of work
    with running_server(repo_root, max_message_mb=64) as srv:
        code, _ = _code(srv.stub.Score, huge, timeout=0.01)
        assert code == grpc.StatusCode.DEADLINE_EXCEEDED
        assert srv.stub.Score(good).version == 1  # and the server carries on


def test_list_models_and_admin_reload(repo_root, corpus_keys, test_sentences):
    write_test_model(model_path(repo_root, "a", 1), corpus_keys)
    write_test_model(model_path(repo_root, "b", 1), corpus_keys, moses_type="wbe-msd-backward-fe")
    with running_server(repo_root) as srv:
        listed = srv.stub.ListModels(pb.ListModelsRequest())
        assert [(m.name, m.moses_type) for m in listed.models] == [
            ("a", "hier-msd-bidirectional-fe"), ("b", "wbe-msd-backward-fe")]
        meta = json.loads(listed.models[0].metadata_json)
        assert meta["family"] == listed.models[0].family and meta["moses_type"] == "hier-msd-bidirectional-fe"
        code, _ = _code(srv.stub.Reload, pb.ReloadRequest())
        assert code == grpc.StatusCode.PERMISSION_DENIED
    path2 = write_test_model(model_path(repo_root, "a", 2), corpus_keys, seed=2)
    with running_server(repo_root, enable_admin=True) as srv:
        assert srv.stub.GetModel(pb.GetModelRequest(model="a")).version == 2
        path3 = write_test_model(model_path(repo_root, "a", 3), corpus_keys, seed=3)
        reloaded = srv.stub.Reload(pb.ReloadRequest(model="a"))
        assert [list(m.loaded_versions) for m in reloaded.models] == [[2, 3]]
        response = srv.stub.Score(score_request(test_sentences[0], "a"))
        assert response.version == 3
        np.testing.assert_array_equal(probabilities(response), expected_scores(path3, test_sentences[0]))
        assert path2.exists()
        code, _ = _code(srv.stub.Reload, pb.ReloadRequest(model="missing"))
        assert code == grpc.StatusCode.NOT_FOUND
        # a model directory removed while serving is unloaded by the next scan
        shutil.rmtree(repo_root / "b")
        assert [m.name for m in srv.stub.Reload(pb.ReloadRequest()).models] == ["a"]
        assert [m.name for m in srv.stub.ListModels(pb.ListModelsRequest()).models] == ["a"]
        code, _ = _code(srv.stub.Score, score_request(test_sentences[0], "b"))
        assert code == grpc.StatusCode.NOT_FOUND
        health = health_pb2_grpc.HealthStub(srv.channel)
        assert health.Check(health_pb2.HealthCheckRequest(service="b")).status == \
            health_pb2.HealthCheckResponse.NOT_SERVING


def test_corrupt_version_keeps_the_old_one_serving(repo_root, corpus_keys, test_sentences):
    good = write_test_model(model_path(repo_root, "m", 1), corpus_keys, seed=1)
    sentence = test_sentences[3]
    with running_server(repo_root, enable_admin=True) as srv:
        bad = model_path(repo_root, "m", 2)
        bad.parent.mkdir()
        bad.write_bytes(good.read_bytes()[: good.stat().st_size // 2])  # truncated copy
        info = srv.stub.Reload(pb.ReloadRequest(model="m")).models[0]
        assert list(info.loaded_versions) == [1] and info.version == 1
        status = {s.version: s for s in info.status}
        assert status[2].state == "FAILED" and "truncated" in status[2].message
        assert str(repo_root) not in status[2].message  # clients never see server paths
        response = srv.stub.Score(score_request(sentence, "m"))
        assert response.version == 1
        np.testing.assert_array_equal(probabilities(response), expected_scores(good, sentence))
        code, details = _code(srv.stub.Score, score_request(sentence, "m", version=2))
        assert code == grpc.StatusCode.FAILED_PRECONDITION and "FAILED" in details
        # a schema change under a served name is refused as well
        other = write_test_model(model_path(repo_root, "m", 3), corpus_keys, moses_type="wbe-mslr-bidirectional-fe")
        info = srv.stub.Reload(pb.ReloadRequest(model="m")).models[0]
        status = {s.version: s for s in info.status}
        assert status[3].state == "FAILED" and "schema" in status[3].message
        assert info.moses_type == "hier-msd-bidirectional-fe" and list(info.loaded_versions) == [1]
        # replacing the broken file with a good one is picked up (the file changed)
        other.unlink()
        model_path(repo_root, "m", 3).parent.rmdir()
        fixed = write_test_model(model_path(repo_root, "m", 2), corpus_keys, seed=2)
        info = srv.stub.Reload(pb.ReloadRequest(model="m")).models[0]
        assert list(info.loaded_versions) == [1, 2]
        np.testing.assert_array_equal(probabilities(srv.stub.Score(score_request(sentence, "m"))),
                                      expected_scores(fixed, sentence))


def test_polling_picks_up_new_versions(repo_root, corpus_keys, test_sentences):
    import time

    write_test_model(model_path(repo_root, "m", 1), corpus_keys, seed=1)
    with running_server(repo_root, poll_seconds=0.1) as srv:
        write_test_model(model_path(repo_root, "m", 2), corpus_keys, seed=2)
        deadline = time.monotonic() + 20
        while srv.stub.GetModel(pb.GetModelRequest(model="m")).version != 2:
            assert time.monotonic() < deadline, "poller never loaded version 2"
            time.sleep(0.05)
        assert srv.stub.Score(score_request(test_sentences[0], "m")).version == 2


def test_result_cache_answers_repeats_byte_for_byte_and_never_across_versions(repo_root, corpus_keys,
                                                                              test_sentences):
    write_test_model(model_path(repo_root, "m", 1), corpus_keys, seed=1)
    metrics_port = free_port()
    sentence = test_sentences[4]
    with running_server(repo_root, cache_size=8, metrics_port=metrics_port, enable_admin=True) as srv:
        raw = srv.channel.unary_unary(f"/{SERVICE_NAME}/Score")
        body = score_request(sentence, "m").SerializeToString()
        first, second = raw(body), raw(body)
        assert first == second
        assert pb.ScoreResponse.FromString(first).version == 1
        pinned = score_request(sentence, "m", version=1).SerializeToString()
        assert pb.ScoreResponse.FromString(raw(pinned)).version == 1  # another request: a miss
        v2 = write_test_model(model_path(repo_root, "m", 2), corpus_keys, seed=2)
        srv.stub.Reload(pb.ReloadRequest(model="m"))
        third = pb.ScoreResponse.FromString(raw(body))  # same bytes, but version 2 serves it now
        assert third.version == 2
        np.testing.assert_array_equal(probabilities(third), expected_scores(v2, sentence))
        assert raw(pinned) == raw(pinned) and pb.ScoreResponse.FromString(raw(pinned)).version == 1
        text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
        values = {line.split(" ")[0]: float(line.split(" ")[1]) for line in text.splitlines()
                  if line and not line.startswith("#")}
        assert values["moses_reorder_cache_hits_total"] == 4.0   # second, 3 x pinned after its first
        assert values["moses_reorder_cache_misses_total"] == 3.0  # first, pinned, third
        assert values['moses_reorder_requests_total{code="OK",method="Score"}'] == 7.0
        assert values['moses_reorder_pairs_total{model="m"}'] == 7 * len(sentence.pairs)
        assert values['moses_reorder_loaded_versions{model="m"}'] == 2.0
        assert values['moses_reorder_newest_version{model="m"}'] == 2.0
        assert values['moses_reorder_request_seconds_count{method="Score"}'] == 7.0


def test_health_and_reflection_with_stock_stubs(repo_root, corpus_keys):
    write_test_model(model_path(repo_root, "m", 1), corpus_keys)
    broken = model_path(repo_root, "broken", 1)
    broken.parent.mkdir(parents=True)
    broken.write_bytes(b"not a model")
    with running_server(repo_root) as srv:
        health = health_pb2_grpc.HealthStub(srv.channel)
        check = lambda service: health.Check(health_pb2.HealthCheckRequest(service=service)).status  # noqa: E731
        assert check("") == health_pb2.HealthCheckResponse.SERVING
        assert check(SERVICE_NAME) == health_pb2.HealthCheckResponse.SERVING
        assert check("m") == health_pb2.HealthCheckResponse.SERVING
        assert check("broken") == health_pb2.HealthCheckResponse.NOT_SERVING
        code, _ = _code(health.Check, health_pb2.HealthCheckRequest(service="unknown"))
        assert code == grpc.StatusCode.NOT_FOUND
        # a name whose only version is broken: known, not serving, and says why
        code, details = _code(srv.stub.Score, pb.ScoreRequest(model="broken"))
        assert code == grpc.StatusCode.FAILED_PRECONDITION and "not a moses-reorder weight file" in details
        info = srv.stub.GetModel(pb.GetModelRequest(model="broken"))
        assert list(info.loaded_versions) == [] and info.status[0].state == "FAILED"
        # the container's HEALTHCHECK probe (docker/Dockerfile) says the same
        from server import healthcheck

        assert healthcheck.main(["--address", srv.address]) == 0
        assert healthcheck.main(["--address", srv.address, "--service", "m"]) == 0
        assert healthcheck.main(["--address", srv.address, "--service", "broken"]) == 1
        assert healthcheck.main(["--address", f"127.0.0.1:{free_port()}", "--timeout", "1"]) == 1

        stub = reflection_pb2_grpc.ServerReflectionStub(srv.channel)
        answers = list(stub.ServerReflectionInfo(iter([
            reflection_pb2.ServerReflectionRequest(list_services=""),
            reflection_pb2.ServerReflectionRequest(file_containing_symbol=SERVICE_NAME),
        ])))
        services = {s.name for s in answers[0].list_services_response.service}
        assert {SERVICE_NAME, "grpc.health.v1.Health"} <= services
        from google.protobuf import descriptor_pb2

        file_proto = descriptor_pb2.FileDescriptorProto.FromString(
            answers[1].file_descriptor_response.file_descriptor_proto[0])
        assert file_proto.package == "reordering.v1"
        assert [m.name for m in file_proto.service[0].method] == ["Score", "GetModel", "ListModels", "Reload"]
