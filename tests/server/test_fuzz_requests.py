"""Fuzzed requests to every RPC: every answer is a deliberate status, never INTERNAL, never a crash.

Specification: whatever arrays a client sends (random lengths, offsets, spans, token
indices, alignment points, random bytes as the token table, bytes that are not a
protobuf at all, a good request with one byte changed), the server answers OK with one
row per pair, INVALID_ARGUMENT with a message naming a ScoreRequest field, or the
status of a lookup or limit (NOT_FOUND, FAILED_PRECONDITION, RESOURCE_EXHAUSTED); and it
keeps answering a good request afterwards. GetModel, ListModels and Reload get random
bytes and good requests with one byte changed (issue 31): each answer is OK, INVALID_ARGUMENT
naming the request message, NOT_FOUND or FAILED_PRECONDITION, and with admin off Reload
is PERMISSION_DENIED whatever its bytes.
"""

from __future__ import annotations

import grpc
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from serverkit import model_path, running_server, score_request, write_test_model
from server.api import SERVICE_NAME, pb
from training.modelfile.request import ARRAY_FIELDS

small = st.lists(st.integers(0, 12), max_size=12)
edge = st.lists(st.sampled_from([0, 1, 2, 3, 2**31 - 1, 2**32 - 1]), max_size=6)
FIELD_NAMES = ("model", "version", "token_bytes", *ARRAY_FIELDS)


@st.composite
def requests(draw):
    fields = {name: draw(st.one_of(small, edge)) for name in ARRAY_FIELDS}
    return pb.ScoreRequest(model="m", version=draw(st.sampled_from([0, 0, 1, 2**63])),
                           token_bytes=draw(st.binary(max_size=24)), **fields)


def test_fuzzed_requests_get_deliberate_answers(repo_root, corpus_keys, test_sentences):
    write_test_model(model_path(repo_root, "m", 1), corpus_keys)
    good = score_request(test_sentences[0], "m")
    with running_server(repo_root, max_pairs=64) as srv:
        raw = srv.channel.unary_unary(f"/{SERVICE_NAME}/Score")

        def check(call, payload) -> None:
            try:
                response = call(payload, timeout=30)
            except grpc.RpcError as exc:
                assert exc.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION,
                                      grpc.StatusCode.NOT_FOUND,
                                      grpc.StatusCode.RESOURCE_EXHAUSTED), (exc.code(), exc.details())
                if exc.code() == grpc.StatusCode.INVALID_ARGUMENT:
                    assert any(name in exc.details() for name in FIELD_NAMES + ("ScoreRequest",)), exc.details()
                return
            if isinstance(response, bytes):
                response = pb.ScoreResponse.FromString(response)
            n_pairs = len(payload.span_start) if isinstance(payload, pb.ScoreRequest) else None
            probs = np.array(response.probabilities).reshape(-1, len(response.outputs))
            if n_pairs is not None:
                assert probs.shape[0] == n_pairs
            assert np.all(np.isfinite(probs)) and np.allclose(probs.reshape(-1, 2, 3).sum(axis=2), 1, atol=1e-4)

        @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
        @given(requests())
        def arrays(request):
            check(srv.stub.Score, request)

        @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
        @given(st.binary(max_size=64))
        def garbage(data):
            check(raw, data)

        @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
        @given(st.integers(0, 10_000), st.integers(0, 255))
        def flipped(position, value):  # one byte of a good request changed
            data = bytearray(good.SerializeToString())
            data[position % len(data)] = value
            check(raw, bytes(data))

        arrays()
        garbage()
        flipped()
        assert srv.stub.Score(good).version == 1


OTHER_RPCS = {"GetModel": pb.GetModelRequest(model="m", version=1), "ListModels": pb.ListModelsRequest(),
              "Reload": pb.ReloadRequest(model="m")}


def test_fuzzed_bytes_to_the_other_rpcs_get_deliberate_answers(repo_root, corpus_keys):
    write_test_model(model_path(repo_root, "m", 1), corpus_keys)
    for admin in (True, False):
        with running_server(repo_root, enable_admin=admin) as srv:
            registry = srv.server.metrics.registry

            def check(method: str, payload: bytes) -> None:
                try:
                    srv.channel.unary_unary(f"/{SERVICE_NAME}/{method}")(payload, timeout=30)
                except grpc.RpcError as exc:
                    if method == "Reload" and not admin:
                        assert exc.code() == grpc.StatusCode.PERMISSION_DENIED, (exc.code(), exc.details())
                        return
                    assert exc.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND,
                                          grpc.StatusCode.FAILED_PRECONDITION), (exc.code(), exc.details())
                    if exc.code() == grpc.StatusCode.INVALID_ARGUMENT:
                        assert f"not a valid {method}Request" in exc.details() or "model" in exc.details(), \
                            exc.details()

            @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
            @given(st.sampled_from(sorted(OTHER_RPCS)), st.binary(max_size=48))
            def garbage(method, data):
                check(method, data)

            @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
            @given(st.sampled_from(sorted(OTHER_RPCS)), st.integers(0, 100), st.integers(0, 255))
            def flipped(method, position, value):
                data = bytearray(OTHER_RPCS[method].SerializeToString() or b"\x00")
                data[position % len(data)] = value
                check(method, bytes(data))

            garbage()
            flipped()
            for method in OTHER_RPCS:
                assert (registry.get_sample_value("moses_reorder_requests_total",
                                                  {"method": method, "code": "INTERNAL"}) or 0) == 0
            assert srv.stub.GetModel(pb.GetModelRequest(model="m")).version == 1
