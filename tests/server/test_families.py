"""Every registered model family, trained by the real trainer, is served exactly.

Specification: for each family in training.families.FAMILIES, `moses-reorder train` on
an example store extracted (`moses-reorder extract`) from the first 300 sentences of
ja-en train writes a model file; one server serves all of them side by side, each under
its own name, and answers every test sentence with exactly the probabilities that
loading the same file locally gives. A family added to FAMILIES is covered automatically.
"""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from corpus_slice import write_corpus_slice
from serverkit import expected_scores, model_path, probabilities, running_server, score_request, subprocess_env

from training.families import FAMILIES

MOSES_TYPE = "hier-msd-bidirectional-fe"
N_SENTENCES = 200


def _cli(*args: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "training.cli", *args], capture_output=True, text=True,
                          env=subprocess_env(), timeout=600)
    assert proc.returncode == 0, f"moses-reorder {' '.join(args)}: {proc.stderr[-3000:]}"


@pytest.fixture(scope="module")
def trained_repo(tmp_path_factory, ja_en_dir) -> Path:
    work = tmp_path_factory.mktemp("families")
    write_corpus_slice(ja_en_dir, N_SENTENCES, work)
    store = work / "store"
    _cli("extract", "--src", str(work / "train.ja"), "--tgt", str(work / "train.en"),
         "--align", str(work / "train.align"), "--out", str(store), "--model", "hier-msd", "--quiet")
    root = work / "models"
    for family in sorted(FAMILIES):
        out = model_path(root, family, 1)
        out.parent.mkdir(parents=True)
        cls = FAMILIES[family]
        features = getattr(cls, "default_features", None) or "S7"
        quick = ["--max-passes", "3"] if "max_passes" in inspect.signature(cls.__init__).parameters else []
        _cli("train", "--family", family, "--features", features, "--type", MOSES_TYPE, "--store", str(store),
             "--out", str(out), "--threshold", "1", *quick, "--quiet")
    return root


@pytest.fixture(scope="module")
def family_server(trained_repo):
    with running_server(trained_repo) as srv:
        yield srv


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_trained_family_is_served_exactly(family, family_server, trained_repo, test_sentences):
    from server.api import pb

    info = family_server.stub.GetModel(pb.GetModelRequest(model=family))
    assert info.family == family and info.moses_type == MOSES_TYPE and list(info.loaded_versions) == [1]
    path = model_path(trained_repo, family, 1)
    for sentence in test_sentences[:5]:
        response = family_server.stub.Score(score_request(sentence, family))
        got = probabilities(response)
        np.testing.assert_array_equal(got, expected_scores(path, sentence))
        np.testing.assert_allclose(got.reshape(-1, 2, 3).sum(axis=2), 1.0, rtol=1e-5)
