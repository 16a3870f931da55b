"""A model with decoder context, served (issue 48): the context blocks of reordering.v1.

A real svm with neighbour features, trained on the embedded corpus, behind a real server on
a loopback port. The server answers it with each pair's own scores, what each pair adds as
a neighbour and the sentence edges, only to a client that asks for context blocks; adding
a pair's block to its neighbour's and taking the softmax gives exactly what the model
says next to that neighbour. A model without context answers as before, asked either way.
"""

from __future__ import annotations

from pathlib import Path

import grpc
import numpy as np
import pytest

from serverkit import model_path, running_server
from server.api import pb
from training.api import extract_store, train_model
from training.features.neighbour import BACKWARD, FORWARD, pair_boundary_words
from training.modelfile.links import softmax_blocks
from training.modelfile.model import load_model
from training.modelfile.request import arrays_from_strings, batch_from_request_arrays
from training.store.examples import ExampleStore

TYPE = "wbe-msd-bidirectional-fe"
LINES = 600


@pytest.fixture(scope="module")
def store(embedded_dir, tmp_path_factory) -> ExampleStore:
    d = tmp_path_factory.mktemp("context-corpus")
    for name in ("train.ja", "train.en", "train.align"):
        head = (embedded_dir / name).read_text(encoding="utf-8").splitlines(keepends=True)[:LINES]
        (d / name).write_text("".join(head), encoding="utf-8")
    extract_store(d / "train.ja", d / "train.en", d / "train.align", d / "store", models=["wbe-msd"])
    return ExampleStore.open(d / "store")


@pytest.fixture(scope="module")
def models(store, tmp_path_factory) -> Path:
    """A repository with svm S6,neighbour ("ctx") and svm S6 ("plain"), trained for real."""
    root = tmp_path_factory.mktemp("models")
    for name, features in (("ctx", "S6,neighbour"), ("plain", "S6")):
        path = model_path(root, name, 1)
        path.parent.mkdir(parents=True)
        train_model(store.path, family="svm", moses_type=TYPE, out=path, features=features, threshold=1,
                    heldout_fraction=0.0, calibration_fraction=0.1)
    return root


def _sentence(store: ExampleStore, k: int) -> tuple[list[str], list]:
    """Sentence k of the store and its extracted phrase pairs, as a client sends them."""
    s = store.sentences
    src = [store.src_vocab[i] for i in s["src_ids"][s["src_offsets"][k]:s["src_offsets"][k + 1]]]
    tgt = [store.tgt_vocab[i] for i in s["tgt_ids"][s["tgt_offsets"][k]:s["tgt_offsets"][k + 1]]]
    links = s["align"][s["align_offsets"][k]:s["align_offsets"][k + 1]]
    chunk = next(c for c in store.iter_chunks() if k in c.sentence)
    pairs = []
    rows = np.flatnonzero(chunk.sentence == k)
    for r in rows:
        a, b, c, d = (int(chunk.src_start[r]), int(chunk.src_end[r]), int(chunk.tgt_start[r]), int(chunk.tgt_end[r]))
        points = sorted((int(i) - a, int(j) - c) for i, j in links if a <= i < b and c <= j < d)
        pairs.append((a, b, tgt[c:d], points))
    return src, pairs


def _blocks(response: pb.ScoreResponse) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    m = len(response.outputs)
    return (np.array(response.scores, dtype=np.float32).reshape(-1, m),
            np.array(response.neighbour, dtype=np.float32).reshape(-1, m),
            np.array(response.boundary, dtype=np.float32))


def test_get_model_says_which_model_has_context(models):
    with running_server(models) as srv:
        assert srv.stub.GetModel(pb.GetModelRequest(model="ctx")).context
        assert not srv.stub.GetModel(pb.GetModelRequest(model="plain")).context


def test_context_model_refuses_a_client_that_does_not_combine_blocks(models, store):
    src, pairs = _sentence(store, 3)
    with running_server(models) as srv:
        with pytest.raises(grpc.RpcError) as err:
            srv.stub.Score(pb.ScoreRequest(model="ctx", **arrays_from_strings(src, pairs)))
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "context_blocks" in err.value.details()


def test_blocks_combine_into_the_model_next_to_its_neighbour(models, store):
    """For every pair c of a sentence and every pair p ending just where c starts (on the
    target side), softmax(scores[c] + neighbour[p]) over the backward block is what the
    model gives c next to p's boundary words, and likewise forward; the first phrase takes
    the boundary block."""
    model = load_model(model_path(models, "ctx", 1))
    K = len(model.classes)
    checked = 0
    with running_server(models) as srv:
        for k in (3, 10, 42):
            src, pairs = _sentence(store, k)
            response = srv.stub.Score(pb.ScoreRequest(model="ctx", context_blocks=True,
                                                      **arrays_from_strings(src, pairs)))
            assert not response.probabilities
            own, neighbour, boundary = _blocks(response)
            batch = batch_from_request_arrays(**arrays_from_strings(src, pairs))
            local = model.context_blocks(batch)
            assert np.array_equal(own, local[0]) and np.array_equal(neighbour, local[1])
            assert np.array_equal(boundary, local[2])
            words = {d: pair_boundary_words(batch, d) for d in (BACKWARD, FORWARD)}
            for c in range(len(pairs)):
                for p in range(len(pairs)):   # p placed just before c
                    before = tuple(w[[p]] for w in words[BACKWARD])   # p as c's previous phrase
                    after = tuple(w[[c]] for w in words[FORWARD])     # c as p's next phrase
                    want_c = model.predict_proba_next_to(_one(batch, c), {"backward": before, "forward": after})[0]
                    want_p = model.predict_proba_next_to(_one(batch, p), {"backward": before, "forward": after})[0]
                    got_c = softmax_blocks((own[c, :K] + neighbour[p, :K])[None, :].copy(), K)[0]
                    got_p = softmax_blocks((own[p, K:] + neighbour[c, K:])[None, :].copy(), K)[0]
                    assert np.allclose(got_c, want_c[:K], atol=1e-6) and np.allclose(got_p, want_p[K:], atol=1e-6)
                    checked += 1
            first = softmax_blocks((own[:, :K] + boundary[None, :K]).copy(), K)
            assert np.allclose(first.sum(axis=1), 1.0)
    assert checked > 100


def _one(batch, c):
    from training.features.batch import pair_slice

    return pair_slice(batch, c, c + 1)


def test_model_without_context_answers_as_before_asked_either_way(models, store):
    src, pairs = _sentence(store, 5)
    arrays = arrays_from_strings(src, pairs)
    with running_server(models) as srv:
        plain = srv.stub.Score(pb.ScoreRequest(model="plain", **arrays))
        asked = srv.stub.Score(pb.ScoreRequest(model="plain", context_blocks=True, **arrays))
    assert plain.SerializeToString() == asked.SerializeToString()
    assert len(plain.probabilities) == len(pairs) * len(plain.outputs) and not plain.scores
