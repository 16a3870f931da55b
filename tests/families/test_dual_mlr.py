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


def test_exact_block_meets_its_kkt_conditions_and_descends():
    """log alpha_k + A (alpha_k - a_k) - s_k is one value for every class (A = C ||x||^2 = 1)."""
    from training.families.dual_mlr import _exact_block

    a = np.array([0.999, 1e-200, 0.001 - 1e-200])
    la = np.log(a)
    s = np.array([0.0, 8.0, -3.0])
    grad = la - s
    out = np.empty(3)
    _exact_block(la, grad, grad.min(), grad.max(), s, a, 1.0, out, np.empty(3))
    new = np.exp(out)
    assert new.sum() == pytest.approx(1.0, abs=1e-12)
    kkt = out + (new - a) - s
    assert np.ptp(kkt) < 1e-9
    d = new - a
    change = np.sum(new * out) - np.sum(a * la) - d @ s + 0.5 * d @ d
    assert change < -1.0  # the class at 1e-200 that should hold most of the mass gets it


def test_a_class_hundreds_of_nats_off_moves_in_one_visit():
    """The 44M-example stall in miniature: a class whose alpha is e^-255 but whose score
    asks for e^-16 under a large curvature A. EG's one step size, set by the other
    classes, moves it ~0.02 nats a visit; the exact block moves it at once."""
    la = [np.log(0.84), -255.0, np.log(0.16)]
    s0 = [3.34, -9.52, 6.18]
    # a heavy row: x = e_0 scaled so that A = C ||x||^2 = 7000 as in the stalled example
    from training.families.dual_mlr import _mlr_pass

    results = {}
    for step in ("eg", "exact"):
        w = np.zeros((2, 3))
        scale = np.sqrt(7000.0)
        w[0] = np.array(s0) / scale
        log_alpha = np.array([la])
        objective = np.zeros(1)
        for _ in range(5):
            _, violation, _ = _mlr_pass(np.array([0, 1], np.int64), np.array([0], np.int32),
                                        np.array([scale]), 0.0, 1.0, w, log_alpha,
                                        np.array([0], np.int64), 1, 1e-9, 30, 1, objective,
                                        step == "exact", 2.0)
        results[step] = violation
    assert results["eg"] > 100.0
    assert results["exact"] < 1e-6


def test_a_large_C_start_does_not_stall(real_Xy):
    """C = 1000 makes eq. 15's start as far off as 44M examples make it at C = 1 (w in the
    thousands): EG stays at a largest violation of hundreds of nats, the exact block
    brings it to a few."""
    X, y = real_Xy
    import warnings

    last = {}
    for step in ("eg", "exact"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            last[step] = DualMLR(C=1000.0, eps=0.1, max_passes=300, step=step).fit(X, y).max_violation_
    assert last["eg"] > 100.0
    assert last["exact"] < 30.0


def test_a_problem_within_the_memory_budget_keeps_its_state_in_memory(real_Xy, tmp_path, monkeypatch,
                                                                       state_files):
    """Issue 30: the per-example state read and written with every chunk made the dual
    MLR 1.9x slower on a 45k-pair corpus. A mapped matrix (as `train` gets it) whose rows
    and log alpha fit the budget's share is copied in and solved resident: no state file.
    A budget it does not fit streams it with the state in a file beside the matrix, as
    at scale, and both reach the same optimum."""
    from mapped_matrix import mapped_csr

    from training.families.solvers import rows

    X, y = real_Xy
    files = state_files
    mapped = mapped_csr(X, tmp_path)
    resident = DualMLR(C=1.0, eps=0.01, seed=4).fit(mapped, y.astype(np.int8))
    assert not files and resident.converged_
    monkeypatch.setattr(rows, "RESIDENT_SHARE", 0.0)
    streamed = DualMLR(C=1.0, eps=0.01, seed=4).fit(mapped, y.astype(np.int8))
    assert files and all(f._file.closed for f in files) and streamed.converged_
    assert abs(resident.dual_objective_ - streamed.dual_objective_) <= 1e-4 * abs(streamed.dual_objective_)
    assert np.mean(resident.predict(X) == streamed.predict(X)) > 0.99


def test_the_shrinking_tolerance_cools_below_eps_and_the_stopping_test_stays_eps(real_Xy):
    """Issue 30: cooling only down to eps reactivated everything for a full pass each time
    a shrunk example drifted back above eps (11 full passes at the final tolerance on
    ja-en S6). Shrinking down to eps / 4 leaves fewer to drift back; convergence is still
    certified by a full pass with every v_i < eps."""
    X, y = real_Xy
    runs = {}
    for below in (1.0, 0.25):
        m = DualMLR(C=1.0, eps=0.1, shrink_below=below, seed=0).fit(X, y)
        assert m.converged_ and m.max_violation_ < 0.1
        assert min(h["tol"] for h in m.history_) == pytest.approx(0.1 * below)
        runs[below] = m
    full = {b: sum(h["active"] == 1.0 for h in m.history_) for b, m in runs.items()}
    assert full[0.25] < full[1.0]
    assert abs(runs[0.25].dual_objective_ - runs[1.0].dual_objective_) <= 1e-4 * abs(runs[1.0].dual_objective_)


def test_a_streamed_fit_copies_its_active_rows_out_at_its_own_lower_fraction(real_Xy, tmp_path, monkeypatch,
                                                                           state_files):
    """Issue 30: a streamed run's peak is its largest compact copy, and each phase's first
    copy lands just below the fraction at which copies are made. The dual MLR cools to
    eps / 4, so it has more phases than the SVM and sampled a larger first copy at the
    SVM's 0.25 (1.09x issue 13's peak at 16M and 52M). Its own compact_below bounds every
    copy; a higher one makes copies this one does not, and both reach the same optimum."""
    from mapped_matrix import mapped_csr
    from test_svm import record_compactions

    from training.families.solvers import rows

    X, y = real_Xy
    mapped = mapped_csr(X, tmp_path)
    monkeypatch.setattr(rows, "RESIDENT_SHARE", 0.0)  # streamed, as at scale
    monkeypatch.setattr(rows, "CHUNK_NNZ", 300)
    made = record_compactions(monkeypatch)
    fits = {}
    for below in (0.5, 0.2):
        made.clear()
        fits[below] = DualMLR(C=1.0, eps=0.05, seed=4, compact_below=below).fit(mapped, y.astype(np.int8))
        first = [active for active, _, _ in made if active > 0]
        assert first and max(first) <= below * X.shape[0]
        assert fits[below].converged_
        if below == 0.5:
            assert max(first) > 0.2 * X.shape[0]  # the higher fraction copies more at once
    assert DualMLR().compact_below < rows.COMPACT_BELOW
    assert abs(fits[0.5].dual_objective_ - fits[0.2].dual_objective_) <= 1e-4 * abs(fits[0.2].dual_objective_)
