"""The outer loop shared by the two shrinking dual solvers (svm, dual-mlr).

Both papers' algorithms visit the examples of an active set in a fresh random order,
drop an example once its optimality violation v_i is at most a tolerance (SVM paper
eq. 12, dual-MLR paper eq. 16) and stop when no example is left. Removing an example
for good is a heuristic: later updates of w can make it violated again. Like
LIBLINEAR's Solver_MCSVM_CS we therefore cool a tolerance: it starts at max(10 eps, 1);
whenever a pass over the active set finds every visited v_i below it (or the active set
runs empty), every example is reactivated and the tolerance halves (down to eps).
Training stops when a pass over *all* examples finds every v_i < eps (eq. 12 / eq. 16
with tolerance eps for all i), or after max_passes.

This module only drives passes; the per-example work is the family's numba kernel
`run_pass(index, active, tol) -> (active, max_violation, updates)`. It must not know
about stores, files or features.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numba as nb
import numpy as np
from tqdm.auto import tqdm

_MUL = np.uint64(0x2545F4914F6CDD1D)
_S12, _S25, _S27, _S11 = np.uint64(12), np.uint64(25), np.uint64(27), np.uint64(11)
_TWO_M53 = 1.0 / 9007199254740992.0


@nb.njit(nogil=True, cache=True)
def shuffle_prefix(index, n, state):
    """Fisher-Yates shuffle of index[:n] driven by xorshift64* (state[0], never 0).

    Our own generator keeps the order a pure function of the seed, independent of
    numpy's or numba's global random state. uint64 arithmetic only.
    """
    x = state[0]
    if x == np.uint64(0):
        x = np.uint64(1)
    for i in range(n - 1, 0, -1):
        x ^= x >> _S12
        x ^= x << _S25
        x ^= x >> _S27
        r = (x * _MUL) >> _S11  # 53 random bits
        j = int(np.float64(r) * _TWO_M53 * (i + 1))
        index[i], index[j] = index[j], index[i]
    state[0] = x


PassFn = Callable[[np.ndarray, int, float], tuple[int, float, int]]


def run_shrinking(run_pass: PassFn, objective: Callable[[], float], n: int, eps: float,
                  max_passes: int, seed: int, verbose: bool = False,
                  desc: str = "passes") -> tuple[list[dict], bool]:
    """Run passes until the certificate above holds or `max_passes` is reached.

    Returns (history, converged). history has one dict per pass: pass number, the
    active fraction at the start of the pass, the shrinking tolerance, the largest
    violation seen, the number of updated examples, the objective after the pass and
    the cumulative seconds (the papers' Figure 1).
    """
    rng_state = np.array([np.uint64(seed) ^ np.uint64(0x9E3779B97F4A7C15)], dtype=np.uint64)
    index = np.arange(n, dtype=np.int32 if n < 2**31 else np.int64)  # n x 4 bytes, not 8
    active = n
    tol = max(10.0 * eps, 1.0) if eps < 1.0 else eps
    from_all = True
    history: list[dict] = []
    converged = False
    start = time.perf_counter()
    bar = tqdm(total=max_passes, desc=desc, unit="pass", disable=not verbose, leave=False)
    try:
        for p in range(1, max_passes + 1):
            shuffle_prefix(index, active, rng_state)
            active_before = active
            active, max_violation, updates = run_pass(index, active, tol)
            history.append({
                "pass": p,
                "active": active_before / n if n else 0.0,
                "tol": tol,
                "max_violation": float(max_violation),
                "updates": int(updates),
                "objective": float(objective()),
                "seconds": time.perf_counter() - start,
            })
            bar.update(1)
            bar.set_postfix(active=f"{active_before / max(n, 1):.3f}", tol=f"{tol:.3g}",
                            viol=f"{max_violation:.3g}")
            if active == 0 or max_violation < tol:
                if from_all and max_violation < eps:
                    converged = True
                    break
                # Everything looked optimal at this tolerance: check all examples again
                # with a tighter one (LIBLINEAR-style cooling).
                active = n
                tol = max(tol / 2.0, eps)
                from_all = True
            else:
                from_all = False
    finally:
        bar.close()
    return history, converged
