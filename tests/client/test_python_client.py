"""server/client.py against the real scoring server on loopback ports.

The servers are the real ScoringServer (tests/server/serverkit.py's running_server, port 0)
over a real model repository: model files written by the real writer over the feature
keys of ja-en sentences, two versions with different weights. Expected probabilities
come from loading the same files and scoring locally, as the server's own tests do.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))
from serverkit import (expected_scores, free_port, keys_of, model_path, running_server,  # noqa: E402
                      sentences, write_test_model)

from server.client import (DeadlineExceeded, InvalidRequest, ModelNotFound, ScoringClient,  # noqa: E402
                           ScoringError, Unavailable, VersionNotLoaded, resolve_target)
from training.moses.types import MosesType  # noqa: E402

NAME = "ja-en"
TYPE = "hier-msd-bidirectional-fe"


@pytest.fixture(scope="module")
def batch(ja_en_dir):
    return sentences(ja_en_dir, "train", 40)[:12] + sentences(ja_en_dir, "test", 6)


@pytest.fixture(scope="module")
def keys(ja_en_dir):
    return keys_of(sentences(ja_en_dir, "train", 40))


def repository(root: Path, keys: np.ndarray, seeds: dict[int, int]) -> dict[int, Path]:
    """ROOT/ja-en/<version>/model.mrw for each version, weights seeded per version."""
    return {v: write_test_model(model_path(root, NAME, v), keys, moses_type=TYPE, seed=s) for v, s in seeds.items()}


@pytest.fixture(scope="module")
def served(tmp_path_factory, keys):
    root = tmp_path_factory.mktemp("client-repo")
    paths = repository(root, keys, {1: 1, 2: 2})
    with running_server(root) as running:
        yield running.address, paths


def test_score_returns_the_model_files_probabilities_and_the_served_version(served, batch):
    address, paths = served
    with ScoringClient(address, model=NAME) as client:
        for sentence in batch:
            scores = client.score(sentence.source, sentence.pairs)
            assert scores.model == NAME and scores.version == 2  # the newest loaded
            assert scores.outputs == tuple(MosesType.parse(TYPE).outputs)
            assert scores.probabilities.dtype == np.float32
            assert scores.probabilities.shape == (len(sentence.pairs), 6)
            np.testing.assert_allclose(scores.probabilities, expected_scores(paths[2], sentence), atol=1e-6)


def test_pinning_a_version(served, batch):
    address, paths = served
    sentence = batch[0]
    with ScoringClient(address, model=NAME) as client:
        assert client.pin() == 2 and client.version == 2
        assert client.pin(1) == 1
        scores = client.score(sentence.source, sentence.pairs)
        assert scores.version == 1
        np.testing.assert_allclose(scores.probabilities, expected_scores(paths[1], sentence), atol=1e-6)
        # a per-call version overrides the pinned one
        assert client.score(sentence.source, sentence.pairs, version=2).version == 2
        with pytest.raises(VersionNotLoaded) as exc:
            client.pin(7)
        assert exc.value.code.name == "FAILED_PRECONDITION" and "7" in str(exc.value)
    with ScoringClient(address, model=NAME, version=9) as client:
        with pytest.raises(VersionNotLoaded):
            client.score(sentence.source, sentence.pairs)


def test_grpc_errors_are_clear_exceptions(served, batch):
    address, _ = served
    sentence = batch[0]
    with ScoringClient(address) as client:
        with pytest.raises(ModelNotFound) as exc:
            client.score(sentence.source, sentence.pairs, model="no-such-model")
        message = str(exc.value)
        assert "NOT_FOUND" in message and "no-such-model" in message and address in message
        n = len(sentence.source)
        with pytest.raises(InvalidRequest) as exc:  # a span past the sentence's end
            client.score(sentence.source, [(0, n + 3, ["x"], [(0, 0)])], model=NAME)
        assert "span_end" in str(exc.value) and isinstance(exc.value, ScoringError)
        with pytest.raises(ValueError, match="no model name"):
            client.score(sentence.source, sentence.pairs)


def test_a_server_that_is_down_fails_within_the_deadline(batch):
    sentence = batch[0]
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    start = time.perf_counter()
    with ScoringClient(address, model=NAME, timeout=2.0) as client:
        with pytest.raises((Unavailable, DeadlineExceeded)) as exc:
            client.score(sentence.source, sentence.pairs)
    assert time.perf_counter() - start < 4.0
    assert address in str(exc.value)


def test_a_deadline_too_short_for_the_call(served, batch):
    """A deadline of 1 ns has passed before the call leaves the client, on any machine (one of
    100 us was met on a fast one, and the test failed)."""
    address, _ = served
    sentence = batch[0]
    with ScoringClient(address, model=NAME) as client:
        with pytest.raises(DeadlineExceeded) as exc:
            client.score(sentence.source, sentence.pairs * 200, timeout=1e-9)
        assert exc.value.code.name == "DEADLINE_EXCEEDED"
        assert client.score(sentence.source, sentence.pairs).version == 2  # the channel still works


def test_round_robin_spreads_calls_over_every_address(tmp_path, keys, batch):
    """Two servers that answer differently (same name, other weights): per-RPC balancing
    must reach both, and each answer must be one of theirs."""
    sentence = batch[0]
    a = repository(tmp_path / "a", keys, {1: 11})[1]
    b = repository(tmp_path / "b", keys, {1: 12})[1]
    expected = [expected_scores(a, sentence), expected_scores(b, sentence)]
    with running_server(tmp_path / "a") as first, running_server(tmp_path / "b") as second:
        seen = set()
        with ScoringClient([first.address, second.address], model=NAME) as client:
            assert client.target == f"ipv4:{first.address},{second.address}"
            for _ in range(20):
                probs = client.score(sentence.source, sentence.pairs).probabilities
                which = [i for i, e in enumerate(expected) if np.allclose(probs, e, atol=1e-6)]
                assert len(which) == 1
                seen.add(which[0])
        assert seen == {0, 1}


def test_address_lists():
    assert resolve_target("127.0.0.1:50051") == "127.0.0.1:50051"
    assert resolve_target("dns:///scorer:50051") == "dns:///scorer:50051"
    assert resolve_target("ipv4:127.0.0.1:1,127.0.0.1:2") == "ipv4:127.0.0.1:1,127.0.0.1:2"
    assert resolve_target("10.0.0.1:50051, 10.0.0.2:50051") == "ipv4:10.0.0.1:50051,10.0.0.2:50051"
    assert resolve_target(["[::1]:1", "[::1]:2"]) == "ipv6:[::1]:1,[::1]:2"
    with pytest.raises(ValueError, match="not a numeric ipv4:port.*dns:///"):
        resolve_target("scorer-a:50051,scorer-b:50051")
    with pytest.raises(ValueError, match="empty"):
        resolve_target("127.0.0.1:1,")
    with pytest.raises(ValueError, match="version"):
        ScoringClient("127.0.0.1:1", version=-1)


def test_the_serving_guides_snippet_runs_as_written_against_the_readmes_server(tmp_path, keys):
    """docs/serving.md's Python block, against one server as README step 2 starts it (issue 47:
    it named two servers and printed nothing). Only the port is the test's own."""
    import os
    import re
    import subprocess

    from serverkit import subprocess_env

    guide = (Path(__file__).resolve().parents[2] / "docs" / "serving.md").read_text(encoding="utf-8")
    [snippet] = re.findall(r"^```python\n(.*?)^```", guide, re.M | re.S)
    readme_address = "127.0.0.1:50051"  # README step 2: `serve --models work/demo/models --port 50051`
    assert f'ScoringClient("{readme_address}", model="tanaka-3k-svm"' in snippet
    write_test_model(model_path(tmp_path, "tanaka-3k-svm", 1), keys, moses_type=TYPE)
    with running_server(tmp_path) as running:
        code = snippet.replace(readme_address, running.address)
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                              env=subprocess_env(), cwd=os.getcwd())
    assert done.returncode == 0, done.stderr[-2000:]
    first, *rest = done.stdout.splitlines()
    assert first.startswith("1 (")  # the pinned version and the output names
    rows = np.array([[float(x) for x in row.split()] for row in re.findall(r"\[([^\[\]]+)\]", " ".join(rest))])
    assert rows.shape == (2, 6)
    assert np.allclose(rows.reshape(2, 2, 3).sum(axis=2), 1.0, atol=1e-3)
