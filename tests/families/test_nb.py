"""Naive Bayes (Bayesian paper eqs. 10-13) on real ja-en S7 rows, against slow references."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import gammaln
from sklearn.naive_bayes import MultinomialNB

from training.cli import main as cli_main
from training.errors import InputError
from training.families.naive_bayes import (
    MultinomialNBBayes,
    MultinomialNBMap,
    dirichlet_log_likelihood,
)
from training.modelfile.model import load_model
from training.store.examples import ExampleStore
from training.api.train import SentenceSplit
from training.features.matrix import build_matrix

K = 3


def slow_map_log_prob(X: sp.csr_matrix, y: np.ndarray, alpha: float) -> np.ndarray:
    """Eq. 10 written out: q_km = (alpha - 1 + sum_n phi_m) / (M (alpha - 1) + sum_n sum_m' phi_m')."""
    dense = X.toarray().astype(np.float64)
    M = dense.shape[1]
    q = np.empty((K, M))
    for k in range(K):
        rows = dense[y == k]
        per_feature = rows.sum(axis=0)
        q[k] = (alpha - 1 + per_feature) / (M * (alpha - 1) + per_feature.sum())
    return np.log(q)


def test_map_estimate_equals_equation_10(real_Xy):
    X, y = real_Xy
    nb = MultinomialNBMap(alpha=1.5, n_classes=K).fit(X, y)
    np.testing.assert_allclose(nb.feature_log_prob_, slow_map_log_prob(X, y, 1.5), rtol=1e-12)
    prior = np.bincount(y, minlength=K) / len(y)
    np.testing.assert_allclose(nb.class_log_prior_, np.log(prior), rtol=1e-12)


@pytest.mark.parametrize("alpha", [1.5, 2.0, 11.0])
def test_map_equals_sklearn_multinomial_nb_with_alpha_minus_one(real_Xy, alpha):
    # sklearn smooths with (c + a) / (C + M a): the paper's MAP with alpha = a + 1.
    X, y = real_Xy
    ours = MultinomialNBMap(alpha=alpha, n_classes=K, temperature_scaling=False).fit(X, y)
    ref = MultinomialNB(alpha=alpha - 1.0).fit(X, y)
    np.testing.assert_allclose(ours.predict_proba(X), ref.predict_proba(X), atol=1e-10)


def test_one_pass_streaming_equals_fit(real_Xy):
    X, y = real_Xy
    half = X.shape[0] // 2
    streamed = MultinomialNBBayes(n_classes=K).partial_fit(X[:half], y[:half]).partial_fit(X[half:], y[half:])
    whole = MultinomialNBBayes(n_classes=K).fit(X, y)
    np.testing.assert_array_equal(streamed.feature_count_, whole.feature_count_)
    np.testing.assert_allclose(streamed.predict_proba(X[:50]), whole.predict_proba(X[:50]), rtol=1e-12)


def direct_eq11(x: np.ndarray, alpha_post: np.ndarray) -> np.ndarray:
    """ln of eq. 11 without C, one row, straight from the formula over all M features:
    ln Gamma(sum_m a_km) + sum_m ln Gamma(a_km + x_m) - sum_m ln Gamma(a_km) - ln Gamma(sum_m (a_km + x_m))."""
    out = np.empty(alpha_post.shape[1])
    for k in range(alpha_post.shape[1]):
        a = alpha_post[:, k]
        out[k] = (gammaln(a.sum()) + gammaln(a + x).sum() - gammaln(a).sum() - gammaln((a + x).sum()))
    return out


def test_bayesian_predictive_against_direct_gammaln_formula(real_Xy):
    X, y = real_Xy
    nb = MultinomialNBBayes(alpha=1.0, n_classes=K).fit(X, y)
    np.testing.assert_allclose(nb.alpha_post_, nb.feature_count_.T + 1.0)   # eq. 13
    # Counts, not only binary rows: double some rows so values of 2 occur.
    rows = sp.vstack([X[:20], X[20:40] * 2.0, sp.csr_matrix((1, X.shape[1]))]).tocsr()
    got = dirichlet_log_likelihood(rows, nb.alpha_post_, nb.alpha_sum_)
    for i in range(rows.shape[0]):
        want = direct_eq11(rows[i].toarray().ravel(), nb.alpha_post_)
        np.testing.assert_allclose(got[i], want, rtol=1e-9, atol=1e-6)


def test_map_and_bayes_reject_bad_alpha(real_Xy):
    X, y = real_Xy
    with pytest.raises(InputError, match="alpha must be a number > 1"):
        MultinomialNBMap(alpha=1.0).fit(X, y)
    with pytest.raises(InputError, match="alpha must be a number > 0"):
        MultinomialNBBayes(alpha=0.0).fit(X, y)


@pytest.mark.parametrize("family", ["nb-map", "nb-bayes"])
def test_served_model_scores_like_the_trained_family(small_store, tmp_path, family):
    """Through `train` and the weight file: the softmax link (nb-map) and the dirichlet
    link (nb-bayes) give the probabilities of the in-process classifiers."""
    out = tmp_path / "nb.mrw"
    assert cli_main(["train", "--family", family, "--features", "S7", "--type", "wbe-msd-bidirectional-fe",
                     "--store", str(small_store), "--out", str(out), "--threshold", "1", "--quiet"]) == 0
    model = load_model(out)
    assert model.link_name == ("dirichlet" if family == "nb-bayes" else "softmax")
    store = ExampleStore.open(small_store)
    split = SentenceSplit.make(store.n_sentences, 0.1, 0.05)
    matrix = build_matrix(store, "S7", 1, split.fit)
    sentence = store.sentence_of_examples()
    fit, cal = np.flatnonzero(split.fit[sentence]), np.flatnonzero(split.calibrate[sentence])
    chunk = next(store.iter_chunks())
    served = model.predict_proba(chunk.batch)
    cls = MultinomialNBBayes if family == "nb-bayes" else MultinomialNBMap
    for d, column in enumerate(("wbe-msd/prev", "wbe-msd/next")):
        y = store.load_labels(column).astype(np.int64)
        nb = cls(n_classes=K).fit(matrix.X[fit], y[fit]).calibrate(matrix.X[cal], y[cal])
        assert nb.temperature_ != 1.0  # calibration happened and was folded into the file
        want = nb.predict_proba(matrix.X[chunk.examples])
        np.testing.assert_allclose(served[:, 3 * d:3 * d + 3], want, atol=2e-5)
