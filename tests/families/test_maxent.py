"""Primal MaxEnt: exact gradient, L-BFGS optimum, OWL-QN sparsity, streaming SGD."""

from __future__ import annotations

import numpy as np
from scipy.optimize import check_grad

from training.families.maxent import MaxEnt, nll_and_grad, primal_objective


def test_gradient_matches_finite_differences(real_Xy):
    X, y = real_Xy
    X, y = X[:300], y[:300]
    rng = np.random.default_rng(0)
    shape = (X.shape[1] + 1, 3)
    w0 = rng.normal(scale=0.3, size=shape).ravel()
    err = check_grad(lambda w: nll_and_grad(X, y, w.reshape(shape), 1.0)[0],
                     lambda w: nll_and_grad(X, y, w.reshape(shape), 1.0)[1].ravel(), w0)
    assert err < 1e-4 * max(1.0, np.linalg.norm(nll_and_grad(X, y, w0.reshape(shape), 1.0)[1]))


def test_owlqn_descends_and_sparsifies(real_Xy):
    X, y = real_Xy
    zero = primal_objective(X, y, np.zeros((X.shape[1] + 1, 3)), 1.0, 1.0, "l1")
    strong = MaxEnt(C=0.05, solver="owlqn", max_passes=300).fit(X, y)
    weak = MaxEnt(C=1.0, solver="owlqn", max_passes=300).fit(X, y)
    objectives = [h["objective"] for h in weak.history_]
    assert all(a >= b - 1e-9 for a, b in zip(objectives, objectives[1:]))
    assert weak.objective_ < zero
    nz_strong = strong.fit_summary()["nonzero_features"]
    nz_weak = weak.fit_summary()["nonzero_features"]
    assert nz_strong < nz_weak < X.shape[1]
    assert nz_strong < 0.5 * X.shape[1]
    # L1 with a large C fits the training data about as well as L2.
    l2 = MaxEnt(C=1.0).fit(X, y)
    assert np.mean(weak.predict(X) == y) > np.mean(l2.predict(X) == y) - 0.02


def test_sgd_streams_towards_the_lbfgs_optimum(real_Xy):
    X, y = real_Xy
    exact = MaxEnt(C=1.0, tol=1e-9, max_passes=1000).fit(X, y)
    sgd = MaxEnt(C=1.0, solver="sgd", max_passes=10, batch_size=16, learning_rate=2.0, seed=3).fit(X, y)
    assert sgd.objective_ < 1.05 * exact.objective_
    streamed = MaxEnt(C=1.0, solver="sgd", batch_size=16, learning_rate=2.0, seed=3, n_classes=3)
    half = X.shape[0] // 2
    for _ in range(5):
        streamed.partial_fit(X[:half], y[:half]).partial_fit(X[half:], y[half:])
    W = np.vstack([streamed.coef_, streamed.intercept_]).astype(np.float64)
    assert primal_objective(X, y, W, 1.0, 1.0) < 1.15 * exact.objective_
