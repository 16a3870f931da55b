"""Hot swap under load: new versions replace old ones while clients keep scoring.

Specification: while 4 client threads score real sentences without pause, versions 2
and 3 are dropped into the repository and picked up (admin Reload and polling both run),
so version 1 is unloaded while requests may still be running on it. No request may fail,
and every answer must be exactly one version's scores for that sentence, the version the
response names.
"""

from __future__ import annotations

import logging
import threading
import time

import numpy as np

from serverkit import expected_scores, model_path, probabilities, running_server, score_request, write_test_model
from server.api import pb
from server.logs import get_logger


def test_swap_under_concurrent_load(repo_root, corpus_keys, test_sentences):
    sentences = test_sentences[:8]
    paths = {1: write_test_model(model_path(repo_root, "m", 1), corpus_keys, seed=11)}
    requests = [score_request(s, "m") for s in sentences]
    with running_server(repo_root, enable_admin=True, poll_seconds=0.05, cache_size=0, threads=8) as srv:
        answers: list[tuple[int, int, np.ndarray]] = []
        failures: list[Exception] = []
        stop = threading.Event()
        lock = threading.Lock()

        def client(offset: int) -> None:
            i = offset
            while not stop.is_set():
                k = i % len(requests)
                try:
                    response = srv.stub.Score(requests[k], timeout=30)
                    with lock:
                        answers.append((k, response.version, probabilities(response)))
                except Exception as exc:  # any failure is a test failure, collected for the message
                    with lock:
                        failures.append(exc)
                i += 1

        threads = [threading.Thread(target=client, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        try:
            for version in (2, 3):
                time.sleep(0.3)
                paths[version] = write_test_model(model_path(repo_root, "m", version), corpus_keys, seed=10 + version)
                if version == 2:
                    srv.stub.Reload(pb.ReloadRequest(model="m"))  # version 3 is left to the poller
                deadline = time.monotonic() + 20
                while True:
                    with lock:
                        seen = any(v == version for _, v, _ in answers[-50:])
                    if seen:
                        break
                    assert time.monotonic() < deadline, f"version {version} never served"
                    time.sleep(0.02)
            time.sleep(0.3)
        finally:
            stop.set()
            for t in threads:
                t.join()

    assert not failures, failures[:3]
    expected = {v: [expected_scores(p, s) for s in sentences] for v, p in paths.items()}
    versions_seen = [v for _, v, _ in answers]
    assert set(versions_seen) == {1, 2, 3}
    for k, version, got in answers:
        np.testing.assert_array_equal(got, expected[version][k])
    # A swap is atomic: once one answer came from a new version, only the other 3 threads'
    # requests already in flight can still answer from an older one, one each (a slow thread's
    # stale answer may be appended after several fresh ones, so count, not position).
    for version in (2, 3):
        first = versions_seen.index(version)
        assert sum(v < version for v in versions_seen[first + 1:]) <= 3, versions_seen[first:first + 40]


def test_the_log_never_announces_a_version_requests_cannot_see(repo_root, corpus_keys):
    """Operators and scripts act on the `version_loaded` line (a deploy waits for it, then
    checks): when it is written, requests must already be answered by that version."""
    write_test_model(model_path(repo_root, "m", 1), corpus_keys)
    with running_server(repo_root, enable_admin=True) as srv:
        seen: list[tuple[int, int]] = []  # (version announced, version GetModel answered then)

        class AskOnAnnounce(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                if record.getMessage() == "version_loaded":
                    announced = record.fields["version"]
                    seen.append((announced, srv.stub.GetModel(pb.GetModelRequest(model="m"), timeout=10).version))

        logger, handler = get_logger(), AskOnAnnounce()
        level = logger.level
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        try:
            write_test_model(model_path(repo_root, "m", 2), corpus_keys, seed=2)
            srv.stub.Reload(pb.ReloadRequest(model="m"), timeout=30)
        finally:
            logger.removeHandler(handler)
            logger.setLevel(level)
    assert seen == [(2, 2)]
