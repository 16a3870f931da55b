"""What a hostile client gets from the scoring server, second round (issue 46).

Specification, each case against a real server on a loopback port:
- calls that send their headers and never their message, on every method (Score,
  GetModel, ListModels, Health/Check, Health/Watch, reflection), hold no thread: with 16
  of each open on a server of one scoring thread, Score, GetModel and Check answer as
  usual; each idle call is ended after --receive-timeout-seconds with DEADLINE_EXCEEDED
  naming the flag, counted and logged (a reflection stream: after its last message);
- health shares Score's admission: while Score would be refused for --max-concurrent-rpcs,
  Check is refused too, never SERVING;
- the stock services parse in the guard: bytes that are not the request message are
  INVALID_ARGUMENT naming the message and field, logged and counted like our own RPCs;
  Health/List answers every name's status;
- a client's strings are cut before they are echoed or logged, and the message says so: a
  3.9-million-character model name gets NOT_FOUND (not a metadata-size error), and so do
  a long health service name; reflection's echo of a long symbol is cut too;
- refusals left out of the log by its rate limit are reported once the flood stops;
- a TLS key that is garbage or belongs to another certificate is refused at start-up
  naming --tls-key and why, not as a busy address;
- a junk `model.*` file is refused by its first bytes, never read whole.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
import time
import tracemalloc

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2

from serverkit import (expected_scores, model_path, probabilities, running_server, score_request, self_signed_cert,
                       subprocess_env, write_test_model)
from server.api import SERVICE_NAME, pb
from server.app import ScoringServer, ServeOptions
from server.logs import LOGGER_NAME
from training.errors import InputError
from training.modelfile.request import arrays_from_strings

HEALTH = "/grpc.health.v1.Health"
REFLECTION = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
IDLE_METHODS = [f"/{SERVICE_NAME}/Score", f"/{SERVICE_NAME}/GetModel", f"/{SERVICE_NAME}/ListModels",
                f"{HEALTH}/Check", f"{HEALTH}/Watch", REFLECTION]
SQUARE = [(i, j) for i in range(7) for j in range(7)]


def _answered(srv, method: str, code: str) -> float:
    return srv.server.metrics.registry.get_sample_value(
        "moses_reorder_requests_total", {"method": method, "code": code}) or 0


def _refusal(call, payload, **kwargs) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as info:
        result = call(payload, **kwargs)
        for _ in result if hasattr(result, "__iter__") and not isinstance(result, bytes) else ():
            pass  # a streaming answer: its status comes at the end
    return info.value.code(), info.value.details()


def _hold_idle(channel: grpc.Channel, path: str, n: int, release: threading.Event) -> list:
    """n calls of `path` that send their headers and then nothing until `release`."""
    def nothing():
        release.wait()
        return
        yield  # a request stream without a message

    return [channel.stream_stream(path).__call__(nothing(), timeout=120) for _ in range(n)]


def _wait_for(condition, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)


def _refused_lines(caplog) -> list[dict]:
    return [r.fields for r in caplog.records if r.getMessage() == "request_refused"]


def test_idle_calls_on_every_method_hold_no_thread(repo_root, corpus_keys, test_sentences):
    path = write_test_model(model_path(repo_root, "m", 1), corpus_keys)
    release = threading.Event()
    with running_server(repo_root, threads=1, receive_timeout_seconds=120) as srv:
        idle_channel = grpc.insecure_channel(srv.address)
        held = [call for method in IDLE_METHODS for call in _hold_idle(idle_channel, method, 16, release)]
        try:
            _wait_for(lambda: sum(srv.server.metrics.registry.get_sample_value(
                "moses_reorder_received_total", {"method": m}) or 0 for m in ("Score", "ServerReflectionInfo")) >= 32)
            for sentence in test_sentences[:3]:
                response = srv.stub.Score(score_request(sentence, "m"), timeout=10)
                np.testing.assert_array_equal(probabilities(response), expected_scores(path, sentence))
            assert srv.stub.GetModel(pb.GetModelRequest(model="m"), timeout=10).version == 1
            health = health_pb2_grpc.HealthStub(srv.channel)
            assert health.Check(health_pb2.HealthCheckRequest(service="m"), timeout=10).status == \
                health_pb2.HealthCheckResponse.SERVING
            assert not any(call.done() for call in held)  # the idle calls are still open
        finally:
            for call in held:
                call.cancel()
            release.set()
            idle_channel.close()


def test_a_call_that_sends_nothing_is_ended_after_the_receive_timeout(repo_root, corpus_keys, caplog):
    write_test_model(model_path(repo_root, "m", 1), corpus_keys)
    caplog.set_level(logging.WARNING, logger=LOGGER_NAME)
    release = threading.Event()
    with running_server(repo_root, receive_timeout_seconds=0.5) as srv:
        idle = _hold_idle(srv.channel, f"/{SERVICE_NAME}/Score", 1, release)[0]
        with pytest.raises(grpc.RpcError) as info:
            next(idle)
        assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert "no request message within 0.5 s of the call's start (--receive-timeout-seconds)" \
            in info.value.details()
        _wait_for(lambda: _answered(srv, "Score", "DEADLINE_EXCEEDED") == 1)

        # a reflection stream: answered, then ended when its client goes quiet
        def one_then_quiet():
            yield reflection_pb2.ServerReflectionRequest(list_services="").SerializeToString()
            release.wait()

        stream = srv.channel.stream_stream(REFLECTION)(one_then_quiet(), timeout=60)
        listed = reflection_pb2.ServerReflectionResponse.FromString(next(stream))
        assert SERVICE_NAME in {s.name for s in listed.list_services_response.service}
        with pytest.raises(grpc.RpcError) as info:
            next(stream)
        assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert "of the previous message" in info.value.details()
        release.set()
    assert {(f["method"], f["code"]) for f in _refused_lines(caplog)} == \
        {("Score", "DEADLINE_EXCEEDED"), ("ServerReflectionInfo", "DEADLINE_EXCEEDED")}


def test_health_is_refused_while_score_would_be(repo_root, corpus_keys):
    write_test_model(model_path(repo_root, "s8", 1), corpus_keys, features="S8")
    pairs = [(i % 23, i % 23 + 7, [f"t{j}" for j in range(7)], SQUARE) for i in range(40_000)]
    slow = pb.ScoreRequest(model="s8", **arrays_from_strings([f"w{i}" for i in range(30)], pairs))  # ~50M keys
    with running_server(repo_root, threads=1, max_concurrent_rpcs=1, max_keys=10 ** 9, cache_size=0,
                        max_message_mb=64) as srv:
        health = health_pb2_grpc.HealthStub(srv.channel)
        running = srv.stub.Score.future(slow, timeout=120)
        # admitted, not just arrived: a call is counted as received before its message
        # (here tens of MB) has been read, and it takes its admission slot only then
        _wait_for(lambda: srv.server.guard.admission.active == 1)
        code, details = _refusal(health.Check, health_pb2.HealthCheckRequest(service=""), timeout=30)
        assert not running.done(), "the Score finished before the check: nothing was shown"
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "--max-concurrent-rpcs 1" in details
        code, _ = _refusal(srv.stub.Score, score_request_of_one_pair("s8"), timeout=30)
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED  # the same answer Score gets
        running.cancel()
        _wait_for(lambda: srv.server.guard.admission.active == 0)
        assert health.Check(health_pb2.HealthCheckRequest(service=""), timeout=30).status == \
            health_pb2.HealthCheckResponse.SERVING


def score_request_of_one_pair(model: str) -> pb.ScoreRequest:
    return pb.ScoreRequest(model=model, **arrays_from_strings(["a", "b"], [(0, 1, ["x"], [(0, 0)])]))


@pytest.mark.parametrize("method, path, raw, named", [
    ("Health/Check", f"{HEALTH}/Check", b"\xff\xff\xff", "HealthCheckRequest: byte 0: truncated or overlong"),
    ("Health/Check", f"{HEALTH}/Check", b"\x0a\x02\xff\xfe", "HealthCheckRequest: byte 0: field service (1): not valid UTF-8"),
    ("Health/List", f"{HEALTH}/List", b"\x0f", "HealthListRequest: byte 0: unknown field 1: invalid wire type 7"),
    ("Health/Watch", f"{HEALTH}/Watch", b"\x0a\x05ab", "HealthCheckRequest: byte 0: field service (1): length 5 runs"),
    ("ServerReflectionInfo", REFLECTION, b"\x0a\x02\xff\xfe",
     "ServerReflectionRequest: byte 0: field host (1): not valid UTF-8"),
])
def test_stock_services_refuse_malformed_bytes_with_invalid_argument(repo_root, corpus_keys, caplog, method, path,
                                                                     raw, named):
    write_test_model(model_path(repo_root, "m", 1), corpus_keys)
    caplog.set_level(logging.WARNING, logger=LOGGER_NAME)
    with running_server(repo_root) as srv:
        if method == "ServerReflectionInfo":
            code, details = _refusal(srv.channel.stream_stream(path), iter([raw]), timeout=30)
        elif method == "Health/Watch":
            code, details = _refusal(srv.channel.unary_stream(path), raw, timeout=30)
        else:
            code, details = _refusal(srv.channel.unary_unary(path), raw, timeout=30)
        assert code == grpc.StatusCode.INVALID_ARGUMENT
        assert details.startswith("request: not a valid ") and named in details, details
        assert _answered(srv, method, "INVALID_ARGUMENT") == 1
        assert srv.stub.GetModel(pb.GetModelRequest(model="m")).version == 1  # and it serves on
    assert _refused_lines(caplog) == [{"method": method, "code": "INVALID_ARGUMENT", "why": details}]


def test_health_list_answers_every_name(repo_root, corpus_keys):
    write_test_model(model_path(repo_root, "a", 1), corpus_keys)
    (repo_root / "b" / "1").mkdir(parents=True)  # a name without a loadable version
    (repo_root / "b" / "1" / "model.mrw").write_bytes(b"not a model")
    with running_server(repo_root) as srv:
        listed = health_pb2_grpc.HealthStub(srv.channel).List(health_pb2.HealthListRequest(), timeout=10)
        serving, not_serving = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING
        assert {name: s.status for name, s in listed.statuses.items()} == {
            "": serving, SERVICE_NAME: serving, "a": serving, "b": not_serving}


def test_client_strings_are_cut_before_they_are_echoed_or_logged(repo_root, corpus_keys, caplog):
    write_test_model(model_path(repo_root, "m", 1), corpus_keys)
    caplog.set_level(logging.WARNING, logger=LOGGER_NAME)
    name = "q" * 3_900_000  # the issue's
    with running_server(repo_root) as srv:
        for call, request in ((srv.stub.GetModel, pb.GetModelRequest(model=name)),
                              (srv.stub.Score, score_request_of_one_pair(name))):
            code, details = _refusal(call, request, timeout=60)
            assert code == grpc.StatusCode.NOT_FOUND, details
            assert "(3,900,000 characters, cut to the first 100)" in details and len(details) < 400, details[:500]
        health = health_pb2_grpc.HealthStub(srv.channel)
        code, details = _refusal(health.Check, health_pb2.HealthCheckRequest(service=name), timeout=60)
        assert code == grpc.StatusCode.NOT_FOUND and "characters, cut" in details and len(details) < 400

        symbol = "reordering." + "x" * 50_000
        answers = list(srv.channel.stream_stream(REFLECTION)(iter(
            [reflection_pb2.ServerReflectionRequest(file_containing_symbol=symbol).SerializeToString()]), timeout=60))
        answer = reflection_pb2.ServerReflectionResponse.FromString(answers[0])
        assert answer.error_response.error_code == grpc.StatusCode.NOT_FOUND.value[0]
        echoed = answer.original_request.file_containing_symbol
        assert "(50,011 characters, cut to the first 100)" in echoed and len(echoed) < 300
    refused = _refused_lines(caplog)
    assert len(refused) == 3 and all(len(json.dumps(f)) < 1000 for f in refused), [len(json.dumps(f)) for f in refused]


def test_refusals_left_out_of_the_log_are_reported_when_the_flood_stops(repo_root, corpus_keys, caplog):
    write_test_model(model_path(repo_root, "m", 1), corpus_keys)
    caplog.set_level(logging.WARNING, logger=LOGGER_NAME)
    with running_server(repo_root) as srv:
        # two lines a second (not 10), so that the last second of the flood surely leaves
        # refusals out however slowly this machine answers them
        srv.server.refusals.per_second = 2
        get_model = srv.channel.unary_unary(f"/{SERVICE_NAME}/GetModel")
        calls = [get_model.future(b"\xff\xff\xff", timeout=60) for _ in range(100)]
        for call in calls:
            assert call.exception().code() == grpc.StatusCode.INVALID_ARGUMENT
        _wait_for(lambda: any(r.getMessage() == "request_refusals_suppressed" for r in caplog.records), 10)
    lines = [r.fields for r in caplog.records if r.getMessage() in ("request_refused", "request_refusals_suppressed")]
    logged = sum(1 for r in caplog.records if r.getMessage() == "request_refused")
    assert logged < 100
    assert logged + sum(f.get("suppressed", 0) for f in lines) == 100  # every refusal is in the log, counted


@pytest.fixture
def other_key(tmp_path):
    return self_signed_cert(tmp_path / "other")[1]


@pytest.mark.parametrize("key_kind, reason", [
    ("garbage", "not a PEM private key"),
    ("another certificate's key", "does not belong to the certificate"),
    ("the certificate itself", "not a PEM private key"),
])
def test_a_bad_tls_key_is_refused_at_start_up_naming_the_flag_and_why(repo_root, corpus_keys, tmp_path, other_key,
                                                                      key_kind, reason):
    write_test_model(model_path(repo_root, "m", 1), corpus_keys)
    cert, _ = self_signed_cert(tmp_path / "tls")
    key = {"garbage": tmp_path / "garbage.key", "another certificate's key": other_key,
           "the certificate itself": cert}[key_kind]
    (tmp_path / "garbage.key").write_bytes(b"-----BEGIN NOTHING-----\nxyz\n")
    server = ScoringServer(ServeOptions(models=repo_root, port=0, poll_seconds=0, tls_cert=cert, tls_key=key))
    with pytest.raises(InputError) as info:
        server.start()
    assert "(--tls-key)" in str(info.value) and reason in str(info.value) and str(key) in str(info.value)
    assert "address in use" not in str(info.value)


def test_the_serve_command_exits_3_for_a_mismatched_tls_key(repo_root, corpus_keys, tmp_path, other_key):
    write_test_model(model_path(repo_root, "m", 1), corpus_keys)
    cert, _ = self_signed_cert(tmp_path / "tls")
    proc = subprocess.run([sys.executable, "-m", "training.cli", "serve", "--models", str(repo_root), "--port", "0",
                           "--workers", "2", "--tls-cert", str(cert), "--tls-key", str(other_key)],
                          capture_output=True, text=True, env=subprocess_env(), timeout=120)
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert "does not belong to the certificate" in proc.stderr and "--tls-key" in proc.stderr
    assert "address in use" not in proc.stderr


def test_a_junk_model_file_is_refused_by_its_first_bytes(repo_root, corpus_keys):
    write_test_model(model_path(repo_root, "m", 1), corpus_keys)
    junk = model_path(repo_root, "junk", 1)
    junk.parent.mkdir(parents=True)
    with open(junk, "wb") as f:  # 1 GiB, sparse: costs no disk
        f.truncate(1 << 30)
    tracemalloc.start()
    try:
        with running_server(repo_root) as srv:
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            info = srv.stub.GetModel(pb.GetModelRequest(model="junk"), timeout=30)
            assert info.status[0].state == "FAILED"
            assert "not a moses-reorder weight file (wrong magic bytes)" in info.status[0].message
            assert srv.stub.GetModel(pb.GetModelRequest(model="m"), timeout=30).version == 1
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, f"start-up allocated {peak / 2**20:.0f} MiB with a 1 GiB junk file present"
