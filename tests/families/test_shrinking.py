"""The shrinking driver's stall test: a phase whose largest violation stops falling
reactivates everything; a phase that keeps falling is left alone."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from training.families.solvers import shrinking
from training.families.solvers.shrinking import ConvergenceWarning, run_shrinking


def _rows(n: int = 3000):
    X = sp.random(n, 50, density=0.1, format="csr", random_state=0)
    return X.indptr, X.indices, X.data


def _kernel(violations):
    """Keeps the first half of the active set, reports the next scripted violation."""
    def kernel(rows, state, index, active, tol):
        v = violations.pop(0) if violations else 0.0
        visits = state[0]
        visits[index[:active]] += 1
        return (active + 1) // 2 if v >= tol else active, v, active
    return kernel


def test_a_phase_whose_violation_stops_falling_reactivates_everything():
    n = 3000
    visits = np.zeros(n, dtype=np.int64)
    flat = [5.0] * 30 + [0.0]  # stuck at 5.0 (tol 1.0 at eps 0.1): a stall after 21 passes
    with pytest.warns(ConvergenceWarning):
        result = run_shrinking(_kernel(flat), lambda: 0.0, _rows(n), (visits,), eps=0.1, max_passes=25, seed=0)
    stalled = [h["pass"] for h in result.history if h.get("stalled")]
    assert stalled == [shrinking.STALL_PASSES + 1]
    after = result.history[shrinking.STALL_PASSES + 1]
    assert after["active"] == 1.0 and after["tol"] == result.history[0]["tol"]  # all back, tolerance kept


def test_a_falling_violation_is_no_stall():
    n = 3000
    visits = np.zeros(n, dtype=np.int64)
    falling = [5.0 * 0.97 ** p for p in range(40)]  # 3% per pass: far above 1% over 20 passes
    with pytest.warns(ConvergenceWarning):
        result = run_shrinking(_kernel(falling), lambda: 0.0, _rows(n), (visits,), eps=0.1, max_passes=35, seed=0)
    assert not any(h.get("stalled") for h in result.history)
    assert result.history[-1]["active"] < 0.01  # the active set kept shrinking, never reactivated
