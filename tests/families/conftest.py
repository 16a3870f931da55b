"""Fixtures for the trainer tests: a small real ja-en example store and its feature matrix.

Solvers are checked on real reordering data (the first sentences of ja-en, Moses-exact
labels, real S7 features), small enough that liblinear and scipy find the reference
optimum in well under a second.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from corpus_slice import write_corpus_slice

from training.cli import main as cli_main
from training.features.spec import FeatureSpec
from training.features.templates import extract_keys
from training.store.examples import ExampleStore

SENTENCES = 200


@pytest.fixture(scope="session")
def small_store(ja_en_dir: Path, tmp_path_factory) -> Path:
    """Store of the first SENTENCES pairs of ja-en with wbe-msd and hier-msd labels."""
    out = tmp_path_factory.mktemp("store-small")
    paths = write_corpus_slice(ja_en_dir, SENTENCES, out)
    store = out / "store"
    code = cli_main(["extract", "--src", str(paths["ja"]), "--tgt", str(paths["en"]), "--align",
                     str(paths["align"]), "--out", str(store), "--model", "wbe-msd", "--model",
                     "hier-msd", "--quiet"])
    assert code == 0
    return store


@pytest.fixture(scope="session")
def real_Xy(small_store: Path) -> tuple[sp.csr_matrix, np.ndarray]:
    """S7 features seen at least twice, binary CSR, and wbe-msd backward labels."""
    store = ExampleStore.open(small_store)
    spec = FeatureSpec.parse("S7")
    indptrs, keys = [], []
    for chunk in store.iter_chunks():
        ptr, k = extract_keys(chunk.batch, spec)
        indptrs.append(ptr)
        keys.append(k)
    assert len(indptrs) == 1
    indptr, keys = indptrs[0], keys[0]
    uniq, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
    kept = counts >= 2
    column = np.cumsum(kept) - 1
    rows = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    mask = kept[inverse]
    X = sp.csr_matrix((np.ones(mask.sum(), np.float32), (rows[mask], column[inverse[mask]])),
                      shape=(len(indptr) - 1, int(kept.sum())))
    y = store.load_labels("wbe-msd/prev").astype(np.int64)
    return X, y


@pytest.fixture
def state_files(monkeypatch) -> list:
    """Every FileState (per-example state in a file beside a mapped matrix) the solvers
    create during the test, in order: whether a solve streamed its state or kept it in
    memory."""
    from training.families.solvers import state

    files: list = []
    real_state = state.FileState

    def recording(*args, **kwargs):
        files.append(real_state(*args, **kwargs))
        return files[-1]

    monkeypatch.setattr(state, "FileState", recording)
    return files
