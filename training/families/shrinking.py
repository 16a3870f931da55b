"""The outer loop shared by the two shrinking dual solvers (svm, dual-mlr).

Both papers' algorithms visit the examples of an active set in a fresh random order,
drop an example once its optimality violation v_i is at most a tolerance (SVM paper
eq. 12, dual-MLR paper eq. 16) and stop when no example is left. Removing an example
for good is a heuristic: later updates of w can make it violated again. Like
LIBLINEAR's Solver_MCSVM_CS we therefore cool the shrinking tolerance: it starts at
max(10 eps, 1); whenever the active set runs empty every example is reactivated and the
tolerance halves (down to eps). Training stops when a pass over *all* examples finds
every v_i <= eps: no update happened in that pass, so all examples satisfy the
optimality condition at the same w, a real certificate rather than a heuristic.

This module only drives passes; the per-example work is the family's numba kernel
`run_pass(index, active, tol) -> (active, max_violation, updates)`. It must not know
about stores, files or features.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
from tqdm.auto import tqdm

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
    rng = np.random.Generator(np.random.PCG64(seed))
    index = np.arange(n, dtype=np.int64)
    active = n
    tol = max(10.0 * eps, 1.0) if eps < 1.0 else eps
    from_all = True
    history: list[dict] = []
    converged = False
    start = time.perf_counter()
    bar = tqdm(total=max_passes, desc=desc, unit="pass", disable=not verbose, leave=False)
    try:
        for p in range(1, max_passes + 1):
            rng.shuffle(index[:active])
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
            if active == 0:
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
