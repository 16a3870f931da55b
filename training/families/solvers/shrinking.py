"""The outer loop shared by the two shrinking dual solvers (svm, dual-mlr).

Both papers' algorithms visit the examples of an active set in a fresh random order,
drop an example once its optimality violation v_i is at most a tolerance (SVM paper
eq. 12, dual-MLR paper eq. 16) and stop when no example is left. Removing an example
for good is a heuristic: later updates of w can make it violated again. Like
LIBLINEAR's Solver_MCSVM_CS we therefore cool a tolerance: it starts at max(10 eps, 1);
whenever a pass over the active set finds every visited v_i below it (or the active set
runs empty), every example is reactivated and the tolerance halves (down to eps).
Training stops when a pass over *all* examples finds every v_i < eps (eq. 12 / eq. 16
with tolerance eps for all i), or after max_passes. A phase (the passes since the last
reactivation) whose largest violation fell by less than STALL_DROP (1%) over the last
STALL_PASSES (20) passes has stalled: a few coupled examples of the shrunk set keep
violating while the examples they depend on are inactive, so everything is reactivated
(the tolerance stays). Under chunked visiting this is what makes the dual MLR's EG tail
converge (ja-en S6, eps 0.01: 1,000 passes unconverged without it) and it cuts the SVM's
long phases at large C (benchmarks/RESULTS.md, issue 13). Stopping there without that
certificate is reported, as LIBLINEAR and scikit-learn do: a ConvergenceWarning, and
`converged` False in the result (the families put it into their fit summary).

`run_shrinking` states only this algorithm. How the rows are held during a pass
(resident, streamed in chunks, or a compact copy of the active set) is the business of
the row source (rows.py), and the per-example work is the family's numba kernel
`kernel(rows, state, index, active, tol) -> (active, max_violation, updates)`. This
module must not know about stores or features.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass

from training.progress import note, progress

from training.families.solvers.rows import Kernel, Resident, Rows, Streamed, visiting_rng
from training.families.solvers.state import ExampleState, MemoryState

STALL_PASSES = 20  # a phase whose largest violation fell by less than STALL_DROP
STALL_DROP = 0.01  # over this many passes reactivates everything


class ConvergenceWarning(UserWarning):
    """A shrinking solver stopped at max_passes before its stopping test held."""


@dataclass(frozen=True)
class ShrinkingResult:
    """history: one dict per pass (pass number, the active fraction at the start of the
    pass, the shrinking tolerance, the largest violation seen, the number of updated
    examples, the objective after the pass and the cumulative seconds: the papers'
    Figure 1). converged: the stopping test held. max_violation: the largest v_i of the
    last pass, over the examples it visited (None when no pass ran)."""

    history: list[dict]
    converged: bool
    max_violation: float | None


def run_shrinking(kernel: Kernel, objective: Callable[[], float], rows: Rows,
                  state: "ExampleState | tuple", eps: float, max_passes: int, seed: int,
                  verbose: bool = False, family: str = "shrinking",
                  memory: int | str | None = None, resident: bool = False,
                  shrink_below: float = 1.0, compact_below: float | None = None) -> ShrinkingResult:
    """Run passes until the stopping test above holds or `max_passes` is reached.

    rows: the CSR arrays of the examples; state: the family's per-example arrays (an
    ExampleState, rows.solver_state, or a tuple of in-memory arrays; first axis =
    example), up to date when this returns. kernel: the family's pass over
    index[:active] (see the module docstring); objective(): its objective after a pass.
    The rows are streamed a chunk at a time and compacted once few are active and the
    copy fits the memory budget (rows.Streamed); resident=True: rows and state are in
    memory (a MemoryState or a tuple) and every pass visits the active set in one random
    order (rows.Resident), for a problem that fits the budget (rows.fits_in_memory).
    shrink_below: the shrinking tolerance cools down to eps * shrink_below (1: to eps);
    the stopping test stays eps. compact_below: the active fraction at which a streamed
    problem is compacted (rows.COMPACT_BELOW unless given). family: names the progress
    bar and the warning.
    """
    n = rows[0].shape[0] - 1
    if resident:
        arrays = tuple(state.arrays) if isinstance(state, MemoryState) else tuple(state)
        full = Resident(rows, arrays, visiting_rng(seed))
    else:
        full = Streamed(rows, state, seed, memory, compact_below)
    source = full
    tol = max(10.0 * eps, 1.0) if eps < 1.0 else eps
    from_all = True  # this pass visits every example
    phase: list[float] = []  # largest violation of each pass since the last reactivation
    history: list[dict] = []
    converged = False
    start = time.perf_counter()
    bar = progress(total=max_passes, desc=family, unit="pass", enabled=verbose, leave=False)
    try:
        for p in range(1, max_passes + 1):
            active_before = source.active
            active, max_violation, updates = source.run_pass(kernel, tol)
            history.append({
                "pass": p,
                "active": active_before / n if n else 0.0,
                "tol": tol,
                "max_violation": float(max_violation),
                "updates": int(updates),
                "objective": float(objective()),
                "seconds": time.perf_counter() - start,
            })
            phase.append(float(max_violation))
            bar.update(1)
            bar.set_postfix(active=f"{active_before / max(n, 1):.3f}", tol=f"{tol:.3g}",
                            viol=f"{max_violation:.3g}")
            if from_all and max_violation < eps:
                converged = True
                break
            if active == 0 or max_violation < tol:
                # Everything looked optimal at this tolerance: check all examples again
                # with a tighter one (LIBLINEAR-style cooling).
                source = source.reactivate()
                tol = max(tol / 2.0, eps * shrink_below)
                from_all, phase = True, []
                continue
            if len(phase) > STALL_PASSES and phase[-1] > (1.0 - STALL_DROP) * phase[-1 - STALL_PASSES]:
                history[-1]["stalled"] = True  # see the module docstring
                source = source.reactivate()
                from_all, phase = True, []
                continue
            from_all = False
            shrunk = source.shrunk()
            if shrunk is not source and verbose:
                # What sets the peak of a streamed run (issue 30): the copy's size is the
                # active fraction when it first falls to compact_below, which varies by run.
                note(f"{family}: pass {p}: compact copy of {shrunk.active:,} active examples "
                     f"({shrunk.active / max(n, 1):.3f}), {shrunk.nbytes() / 2**20:,.0f} MiB")
            source = shrunk
    finally:
        bar.close()
        source.write_back()
        full.close()
    last_violation = history[-1]["max_violation"] if history else None
    if not converged:
        seen = "no pass ran" if last_violation is None else \
            f"largest violation of the last pass {last_violation:.4g}"
        warnings.warn(f"{family}: stopped after max_passes={max_passes} passes without "
                      f"converging ({seen}, eps {eps:g}); raise max_passes or eps",
                      ConvergenceWarning, stacklevel=3)
    return ShrinkingResult(history, converged, last_violation)
