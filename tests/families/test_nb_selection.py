"""Normalised mutual information (Bayesian paper eqs. 14-16) and selection inside `train`."""

from __future__ import annotations

import math

import numpy as np
import pytest

from training.cli import main as cli_main
from training.errors import InputError
from training.modelfile.model import load_model
from training.features.selection import Selection, feature_nmi
from training.store.examples import ExampleStore
from training.api.train import SentenceSplit
from training.features.matrix import build_matrix

K = 3


def reference_nmi(column: np.ndarray, y: np.ndarray) -> float:
    """One feature, written from the definitions with Python loops over the 2 x K table."""
    n = len(y)
    present = column > 0
    h = lambda ps: -sum(p * math.log(p) for p in ps if p > 0)  # noqa: E731  eq. 14
    p_y = [float(np.sum(y == k)) / n for k in range(K)]
    p_x = [float(np.sum(~present)) / n, float(np.sum(present)) / n]
    mi = 0.0
    for x in (0, 1):
        for k in range(K):
            p_xy = float(np.sum((present == bool(x)) & (y == k))) / n
            if p_xy > 0:
                mi += p_xy * math.log(p_xy / (p_x[x] * p_y[k]))        # eq. 15
    denom = min(h(p_x), h(p_y))
    return mi / denom if denom > 0 else 0.0                           # eq. 16


def test_nmi_matches_per_feature_reference(real_Xy):
    X, y = real_Xy
    nmi = feature_nmi(X, y, K)
    assert nmi.shape == (X.shape[1],) and np.all((nmi >= 0) & (nmi <= 1))
    dense = X.toarray()
    rng = np.random.default_rng(0)
    columns = np.concatenate([np.argsort(nmi)[-5:], rng.choice(X.shape[1], 25, replace=False)])
    for j in columns:
        assert nmi[j] == pytest.approx(reference_nmi(dense[:, j], y), rel=1e-9, abs=1e-12)


def test_a_feature_that_is_the_class_has_nmi_one(real_Xy):
    X, y = real_Xy
    is_swap = (y == 1).astype(np.float32)[:, None]
    import scipy.sparse as sp

    nmi = feature_nmi(sp.hstack([X, sp.csr_matrix(is_swap)]).tocsr(), y, K)
    assert nmi[-1] == pytest.approx(1.0)  # H(X) < H(Y): I(X;Y) = H(X), normalised to 1


def test_selection_rules():
    nmi = np.array([0.1, 0.5, 0.5, 0.0, 0.9])
    assert Selection.parse("top-k:2").mask(nmi).tolist() == [False, True, False, False, True]  # tie: lower index
    assert Selection.parse("0.6").mask(nmi).tolist() == [False, True, True, False, True]
    assert Selection.parse("fraction:0.2").mask(nmi).sum() == 1
    assert Selection.parse("threshold:0.5").mask(nmi).tolist() == [False, True, True, False, True]
    for bad in ("0", "1.5", "top-k:0", "half", "top-k:x"):
        with pytest.raises(InputError, match="select-nmi"):
            Selection.parse(bad)


def test_train_keeps_the_top_half_by_nmi(small_store, tmp_path):
    out = tmp_path / "half.mrw"
    assert cli_main(["train", "--family", "nb-map", "--features", "S7", "--type", "wbe-msd-backward-fe",
                     "--store", str(small_store), "--out", str(out), "--threshold", "1",
                     "--select-nmi", "0.5", "--quiet"]) == 0
    model = load_model(out)
    store = ExampleStore.open(small_store)
    split = SentenceSplit.make(store.n_sentences, 0.1, 0.05)
    matrix = build_matrix(store, "S7", 1, split.fit)
    fit = np.flatnonzero(split.fit[store.sentence_of_examples()])
    y = store.load_labels("wbe-msd/prev").astype(np.int64)[fit]
    nmi = feature_nmi(matrix.X[fit], y, K)
    want = matrix.keys[Selection.parse("0.5").mask(nmi)]
    np.testing.assert_array_equal(model.keys, want)
    assert model.n_features == round(0.5 * matrix.keys.size)
    sel = model.metadata["training"]["selection"]
    assert sel == {"rule": "fraction:0.5", "kept": model.n_features, "of": int(matrix.keys.size),
                   "min_kept_nmi": pytest.approx(float(np.sort(nmi)[::-1][model.n_features - 1]))}
