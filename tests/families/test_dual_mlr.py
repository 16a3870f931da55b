"""Dual MLR by shrinking EG reaches the optimum of the primal problem (eq. 6)."""

from __future__ import annotations

import numpy as np
import pytest

from training.families.dual_mlr import DualMLR
from training.families.maxent import MaxEnt, primal_objective
from training.families.solvers.shrinking import ConvergenceWarning


def stacked(model) -> np.ndarray:
    """[F+1, K] weights with the bias row (bias feature value 1)."""
    return np.vstack([model.coef_, model.intercept_]).astype(np.float64)


@pytest.mark.parametrize("C", [0.1, 1.0])
def test_reaches_the_primal_optimum_found_by_lbfgs(real_Xy, C):
    X, y = real_Xy
    primal = MaxEnt(C=C, solver="lbfgs", tol=1e-10, max_passes=2000).fit(X, y)
    dual = DualMLR(C=C, eps=0.01, seed=2).fit(X, y)
    assert dual.converged_
    ours = primal_objective(X, y, stacked(dual), C, 1.0)
    assert abs(ours - primal.objective_) <= 1e-3 * primal.objective_
    # Strong duality (min P = -min D) up to the tolerance, and weak duality exactly.
    assert -dual.dual_objective_ <= primal.objective_ + 1e-6
    assert abs(-dual.dual_objective_ - primal.objective_) <= 1e-3 * primal.objective_
    assert np.mean(dual.predict(X) == primal.predict(X)) > 0.99


def test_tighter_eps_means_a_smaller_duality_gap(real_Xy):
    X, y = real_Xy
    gaps = []
    for eps in (1.0, 0.1, 0.01):
        m = DualMLR(C=1.0, eps=eps).fit(X, y)
        gaps.append(primal_objective(X, y, stacked(m), 1.0, 1.0) + m.dual_objective_)
    assert all(g >= -1e-6 for g in gaps)
    assert gaps[0] > gaps[1] > gaps[2]


def test_shrinking_and_determinism(real_Xy):
    X, y = real_Xy
    a = DualMLR(C=1.0, eps=0.1, seed=5).fit(X, y)
    b = DualMLR(C=1.0, eps=0.1, seed=5).fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    actives = [h["active"] for h in a.history_]
    assert actives[0] == 1.0 and min(actives) < 0.5
    objectives = [h["objective"] for h in a.history_]
    assert all(x >= y - 1e-9 for x, y in zip(objectives, objectives[1:]))  # every EG step descends
    probs = a.predict_proba(X[:50])
    np.testing.assert_allclose(probs.sum(axis=1), 1.0)


def test_convergence_reaches_the_fit_summary(real_Xy):
    X, y = real_Xy
    with pytest.warns(ConvergenceWarning, match=r"dual-mlr: stopped after max_passes=2 passes"):
        capped = DualMLR(C=1.0, eps=0.01, max_passes=2).fit(X, y).fit_summary()
    assert capped["converged"] is False and capped["max_violation"] >= 0.01
    full = DualMLR(C=1.0, eps=0.1).fit(X, y).fit_summary()
    assert full["converged"] is True and full["max_violation"] < 0.1
