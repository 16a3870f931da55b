"""What one request may cost the server (issue 15).

Specification: with a feature set that crosses alignment points (ANOVA d=2: S8, S9) a
pair's keys grow with the square of its points, so a small request could ask for
gigabytes. The server refuses, before extracting anything, a pair with more than
--max-align-points points (duplicates count) and a request whose pairs expand to more
than --max-keys keys, with RESOURCE_EXHAUSTED naming the field and the flag, and keeps
serving. A legal but long request is scored in slices: when its client gives up, the
server stops at the next slice (DEADLINE_EXCEEDED, nothing counted as scored) instead of
finishing work nobody waits for. The result cache holds at most --cache-mb of answers,
measured on real 190,000-pair answers.
"""

from __future__ import annotations

import time

import grpc
import numpy as np
import pytest

from serverkit import (expected_scores, model_path, probabilities, running_server, score_request, tiled_request,
                       write_test_model)
from server.api import pb, pb_grpc
from training.modelfile.request import arrays_from_strings

SQUARE = [(i, j) for i in range(7) for j in range(7)]  # every point of a 7 x 7 phrase pair: 49


def quadratic_request(model: str, n_pairs: int, points=SQUARE) -> pb.ScoreRequest:
    """A sentence of 30 words and n_pairs pairs of 7-word phrases, each with `points`."""
    source = [f"w{i}" for i in range(30)]
    target = [f"t{i}" for i in range(7)]
    pairs = [(i % 23, i % 23 + 7, target, points) for i in range(n_pairs)]
    return pb.ScoreRequest(model=model, **arrays_from_strings(source, pairs))


def _refused(stub, request) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as info:
        stub.Score(request, timeout=60)
    return info.value.code(), info.value.details()


def test_too_many_alignment_points_in_one_pair_are_refused_before_any_work(repo_root, corpus_keys, test_sentences):
    write_test_model(model_path(repo_root, "s8", 1), corpus_keys, features="S8")
    with running_server(repo_root, max_message_mb=64) as srv:
        # 3,000 distinct points in one pair (a 60 x 50 phrase pair): ~4.5 million keys
        wide = [(i, j) for i in range(60) for j in range(50)]
        request = pb.ScoreRequest(model="s8", **arrays_from_strings(
            [f"w{i}" for i in range(60)], [(0, 60, [f"t{j}" for j in range(50)], wide)]))
        code, details = _refused(srv.stub, request)
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "align_offsets" in details and "pair 0" in details and "--max-align-points" in details
        # 100,000 copies of one point (the MemoryError) are as many points
        dup = pb.ScoreRequest(model="s8", **arrays_from_strings(["a", "b"], [(0, 1, ["x"], [(0, 0)] * 100_000)]))
        code, details = _refused(srv.stub, dup)
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "100000 alignment points" in details
        # the largest real pair shape (7 x 7, all 49 points) is served, and so is everything else
        assert len(srv.stub.Score(quadratic_request("s8", 3)).probabilities) == 3 * 6
        assert srv.stub.Score(score_request(test_sentences[0], "s8")).version == 1


def test_a_request_expanding_to_too_many_keys_is_refused(repo_root, corpus_keys):
    write_test_model(model_path(repo_root, "s8", 1), corpus_keys, features="S8")
    write_test_model(model_path(repo_root, "s7", 1), corpus_keys, features="S7")
    # S8: 49 points + 2 context words = 51 base features -> 51 * 50 / 2 = 1275 keys a pair
    with running_server(repo_root, max_keys=100 * 1275) as srv:
        assert len(srv.stub.Score(quadratic_request("s8", 100)).probabilities) == 100 * 6
        code, details = _refused(srv.stub, quadratic_request("s8", 101))
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "span_start" in details and "128775 feature keys" in details and "--max-keys" in details
        # the same pairs under a linear feature set (S7: 51 keys a pair) are well within it
        assert len(srv.stub.Score(quadratic_request("s7", 101)).probabilities) == 101 * 6


def test_scoring_stops_when_the_client_gives_up(repo_root, corpus_keys):
    write_test_model(model_path(repo_root, "s8", 1), corpus_keys, features="S8")
    # 60,000 legal pairs of 49 points: ~76 million keys, seconds of work even on a fast machine
    # (12,000 pairs scored in under a second on a fast CI machine)
    request = quadratic_request("s8", 60_000)
    with running_server(repo_root, max_keys=10 ** 9, max_message_mb=64, cache_size=0, threads=1) as srv:
        registry = srv.server.metrics.registry

        def answered(code: str) -> float:
            return registry.get_sample_value("moses_reorder_requests_total", {"method": "Score", "code": code}) or 0

        with pytest.raises(grpc.RpcError) as info:
            srv.stub.Score(request, timeout=0.5)
        assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        deadline = time.monotonic() + 120
        while answered("DEADLINE_EXCEEDED") + answered("OK") == 0:  # the handler ends, one way or the other
            assert time.monotonic() < deadline, "the server never finished the abandoned request"
            time.sleep(0.05)
        assert answered("DEADLINE_EXCEEDED") == 1 and answered("OK") == 0  # it stopped, did not finish
        assert (registry.get_sample_value("moses_reorder_pairs_total", {"model": "s8"}) or 0) == 0
        assert len(srv.stub.Score(quadratic_request("s8", 2)).probabilities) == 2 * 6  # and serves on


def test_sliced_scoring_answers_exactly_what_one_pass_does(repo_root, corpus_keys, test_sentences):
    from server.service import ScoreLimits

    path = write_test_model(model_path(repo_root, "s9", 1), corpus_keys, features="S9")
    request = tiled_request(score_request(test_sentences[1], "s9"), 40)
    with running_server(repo_root, max_message_mb=64) as srv:
        srv.server.service.limits = ScoreLimits(max_pairs=10 ** 6, max_align_points=64, max_keys=10 ** 9,
                                                max_source_tokens=4096, slice_keys=97)  # many small slices
        got = probabilities(srv.stub.Score(request))
    from training.modelfile.model import load_model
    from training.modelfile.request import batch_from_request_arrays
    from server.service import arrays_from_message

    whole = load_model(path).predict_proba(batch_from_request_arrays(**arrays_from_message(request)))
    np.testing.assert_array_equal(got, whole)
    np.testing.assert_array_equal(got[:len(test_sentences[1].pairs)], expected_scores(path, test_sentences[1]))


def test_the_cache_is_bounded_in_bytes_with_real_large_answers(repo_root, corpus_keys, test_sentences):
    write_test_model(model_path(repo_root, "m", 1), corpus_keys)
    with running_server(repo_root, max_message_mb=64, cache_mb=20) as srv:
        cache = srv.server.service.cache
        sizes = []
        channel = grpc.insecure_channel(srv.address, options=[("grpc.max_receive_message_length", 64 << 20)])
        stub = pb_grpc.ReorderingScorerStub(channel)
        for sentence in test_sentences[:5]:  # five distinct ~190,000-pair requests: ~4.4 MiB answers each
            big = tiled_request(score_request(sentence, "m"), 190_000 // len(sentence.pairs))
            response = stub.Score(big)
            sizes.append(len(response.SerializeToString()))
            assert cache.nbytes <= 20 * 1024 * 1024
        assert min(sizes) > 4 * 1024 * 1024
        assert len(cache) == 4  # 20 MiB hold four of them, whatever --cache-size (1024) allows
        registry = srv.server.metrics.registry
        assert registry.get_sample_value("moses_reorder_cache_bytes") == cache.nbytes
        channel.close()
