"""Dual multinomial logistic regression by shrinking exponentiated gradient.

Dual-MLR paper (dual-mlr-reordering), Section 3.1 and Algorithm 1. The primal (eq. 6)
    P(w) = 1/(2 sigma^2) sum_k ||w_k||^2 + sum_i [logsumexp_k w_k.x_i - w_{y_i}.x_i]
has the dual (eq. 9) D(alpha) = 1/(2 sigma^2) sum_k ||w_k(alpha)||^2 + sum_ik alpha_ik log alpha_ik
over one probability simplex per example, with w_k(alpha) = sigma^2 sum_i (p~_ik - alpha_ik) x_i
(eq. 10), and min P = -min D. We write C for sigma^2 (the same role as the SVM's C).

Per visited example: the gradient (eq. 12, dropping terms constant in k, which neither
the EG update nor the gap test sees) is 1 + log alpha_ik - w_k.x_i; the gap
v_i = max_k - min_k of it (eq. 16) decides shrinking; an EG step (eq. 11) with eta = 0.5
is halved until the exact change of D (eq. 13) is non-positive; w is updated by eq. 14.
Because w_k.x_i after a step is known in closed form (s_k - C ||x_i||^2 delta_k), up to
`inner_steps` EG steps can be taken on the same example for the price of one sparse
read and one sparse write (1 = the paper's algorithm). alpha starts at eq. 15 with a
small `init_eps`. Shrinking, tolerance cooling and the stopping certificate are the
same as the SVM's (`shrinking.run_shrinking`).

EG's one step size per example is bounded by the curvature A = C ||x_i||^2 of its large
classes, so a class whose alpha is hundreds of nats from its optimum moves a few
hundredths of a nat a visit. Eq. 15 starts w at C init_eps times the feature counts,
which grows with the corpus, so on a large corpus most classes start hundreds of nats
away and EG stalls in its first tolerance (benchmarks/RESULTS.md, issue 13). With
step="exact" (the default) an example whose gap exceeds `exact_gap` and which an EG
step left with more than EG_LEAVES (half) of it is then minimised exactly over its own
simplex (`_exact_block`: the block's KKT condition, one Newton solve per class inside a
safeguarded Newton on the multiplier, as in Yu, Huang and Lin's dual coordinate descent
for maximum entropy). EG is far cheaper a visit and keeps every example it moves well,
so the exact step runs only where EG leaves most of the gap (RESULTS, issue 30).
step="eg" is the paper's algorithm alone.

Bias: a constant feature of value `bias`, regularised (LIBLINEAR `-B` style), 0 = none.
This module must not know about stores or files.
"""

from __future__ import annotations

from typing import Any

import numba as nb
import numpy as np
import scipy.sparse as sp

from training.constraints import Interval, Options, positive, whole
from training.families.base import ReorderingClassifier
from training.families.registry import register
from training.families.solvers.prefetch import PREFETCH_FAR, PREFETCH_NEAR, prefetch
from training.families.solvers.rows import fits_in_memory, rows_in_memory, solver_state
from training.families.solvers.shrinking import run_shrinking
from training.families.solvers.sparse import decision_scores, row_axpy, row_dot
from training.families.solvers.state import MemoryState
from training.features.rowchunks import iter_row_chunks


_LOG_TINY = np.log(1e-300)  # alpha never reaches 0: eq. 9 is undefined there
EG_LEAVES = 0.5  # step="exact": an EG step that left more of a large gap takes the exact step


@nb.njit(nogil=True, cache=True)
def _init_w(indptr, indices, data, y, bias, C, alpha, w):
    """w(alpha) of eq. 10 for the starting alpha (one pass over the data)."""
    K = w.shape[1]
    coef = np.empty(K)
    for i in range(indptr.shape[0] - 1):
        for k in range(K):
            coef[k] = C * ((1.0 if k == y[i] else 0.0) - alpha[i, k])
        row_axpy(indptr, indices, data, i, w, bias, coef)


@nb.njit(nogil=True, cache=True)
def _norm_term(w, C):
    """1/(2C) ||w||^2, the first term of D (eq. 9)."""
    total = 0.0
    for j in range(w.shape[0]):
        for k in range(w.shape[1]):
            total += w[j, k] * w[j, k]
    return total / (2.0 * C)


@nb.njit(nogil=True, cache=True)
def _plus_entropy(total, log_alpha):
    """total + sum_ik alpha_ik log alpha_ik over these examples (D summed a piece of the
    examples at a time, in example order)."""
    for i in range(log_alpha.shape[0]):
        for k in range(log_alpha.shape[1]):
            total += np.exp(log_alpha[i, k]) * log_alpha[i, k]
    return total


@nb.njit(nogil=True, cache=True)
def _omega(b, warm):
    """The v that solves e^v + v = b (Wright's omega), by Newton.

    Newton on this convex increasing left side falls monotonically from any start right
    of the root, and never overflows there: log(b) (b > 1) or b are such starts. `warm`
    (this class's v at the previous multiplier of _exact_block, NaN for none) is used
    instead when it lies below that start and either right of the root or left of it
    by less than a one-nat Newton step, after which Newton is right of the root, close.
    """
    v = np.log(b) if b > 1.0 else b
    e = np.nan
    if warm < v:  # False for NaN
        e_warm = np.exp(warm)
        if e_warm + warm - b >= -(e_warm + 1.0):
            v, e = warm, e_warm
    if e != e:
        e = np.exp(v)
    for _ in range(100):
        step = (e + v - b) / (e + 1.0)
        v -= step
        # Newton's error after a step of size d is at most d^2 / 2 here (f''/f' <= 1):
        # below 1e-7 the iterate is within 5e-15 of the root, and one more exp would
        # only confirm it
        if abs(step) <= 1e-7:
            break
        e = np.exp(v)
    return v


@nb.njit(nogil=True, cache=True)
def _log_alpha_at(c, A):
    """The t = log alpha that solves t + A e^t = c (one class of the block's KKT
    condition): with v = t + log A it is e^v + v = c + log A (_omega)."""
    if A <= 0.0:
        return max(c, _LOG_TINY)
    log_a = np.log(A)
    return max(_omega(c + log_a, np.nan) - log_a, _LOG_TINY)


@nb.njit(nogil=True, cache=True)
def _exact_block(la_cur, grad, g_min, g_max, s, a_cur, A, la_new, v):
    """alpha_i minimising D with every other example fixed, into la_new (log alpha);
    v: scratch of K (each class's omega solution, the next multiplier's warm start).

    With s_k = w_k.x_i and A = C ||x_i||^2 the change of D (eq. 13) is minimal where
    log alpha_k + A (alpha_k - a_k) - s_k = mu for every k, alpha on the simplex: each
    class solves t + A e^t = s_k + A a_k + mu (_log_alpha_at) and mu, which lies between
    the smallest and the largest gradient of eq. 12, makes the alphas sum to one
    (safeguarded Newton: their sum is increasing and convex in mu). Unlike an EG step,
    whose one step size is set by the largest class's curvature A, this moves a class
    whose alpha is off by hundreds of nats in one visit (the stall at 44M examples).
    Each class's Newton starts from its solution at the previous mu, a few hundredths
    of a nat off once mu settles: 2-3 exps a class instead of ~5 (issue 30).
    """
    K = la_cur.shape[0]
    total = 0.0
    if A <= 0.0:  # no curvature (an empty row, no bias): the block is a softmax of s
        top = s.max()
        for k in range(K):
            la_new[k] = max(s[k] - top, _LOG_TINY)
            total += np.exp(la_new[k])
    else:
        log_a = np.log(A)
        lo, hi = g_min, g_max
        mu = 0.0
        for k in range(K):
            mu += a_cur[k] * grad[k]
            v[k] = np.nan
        mu = min(max(mu, lo), hi)
        for _ in range(100):
            total = 0.0
            slope = 0.0
            for k in range(K):
                v[k] = _omega(s[k] + A * a_cur[k] + mu + log_a, v[k])
                la_new[k] = max(v[k] - log_a, _LOG_TINY)
                a = np.exp(la_new[k])
                total += a
                slope += a / (1.0 + A * a)
            if abs(total - 1.0) <= 1e-13:
                break
            if total > 1.0:
                hi = mu
            else:
                lo = mu
            nxt = mu - (total - 1.0) / slope
            if not (lo < nxt < hi):
                nxt = 0.5 * (lo + hi)
            if nxt == mu:
                break
            mu = nxt
    log_total = np.log(total)
    for k in range(K):
        la_new[k] = max(la_new[k] - log_total, _LOG_TINY)


@nb.njit(nogil=True, cache=True)
def _exact_step(la_cur, grad, g_min, g_max, s, a_cur, A, la_new, a_new, v_block):
    """Move example i's alphas to the block's minimum (_exact_block), updating la_cur,
    a_cur and s = w.x_i in place; returns the change of D (eq. 13), <= 0."""
    K = la_cur.shape[0]
    _exact_block(la_cur, grad, g_min, g_max, s, a_cur, A, la_new, v_block)
    d_ent = 0.0
    d_lin = 0.0
    d_sq = 0.0
    for k in range(K):
        a_new[k] = np.exp(la_new[k])
        d = a_new[k] - a_cur[k]
        d_ent += a_new[k] * la_new[k] - a_cur[k] * la_cur[k]
        d_lin += d * s[k]
        d_sq += d * d
    for k in range(K):
        s[k] -= A * (a_new[k] - a_cur[k])
        a_cur[k] = a_new[k]
        la_cur[k] = la_new[k]
    return d_ent - d_lin + 0.5 * A * d_sq


@nb.njit(nogil=True, cache=True)
def _mlr_pass(indptr, indices, data, bias, C, w, log_alpha, index, active, tol,
              max_trials, inner_steps, objective, exact, exact_gap):
    """One pass of Algorithm 1 over index[:active]; shrunk examples move behind `active`.

    alpha is kept as log alpha: the gradient (eq. 12) and the entropy change (eq. 13)
    need logs, so a trial step then costs K exps and one log instead of ~4K logs.
    """
    K = w.shape[1]
    s = np.empty(K)       # w_k(alpha).x_i
    grad = np.empty(K)    # log alpha_ik - s_k  (eq. 12 up to a constant)
    a_old = np.empty(K)
    a_cur = np.empty(K)
    la_cur = np.empty(K)
    a_new = np.empty(K)
    la_new = np.empty(K)
    v_block = np.empty(K)  # _exact_block's scratch
    max_violation = 0.0
    updates = 0
    pos = 0
    while pos < active:
        if pos + PREFETCH_FAR < active:
            j = index[pos + PREFETCH_FAR]
            prefetch(indptr, j)
            prefetch(log_alpha, j)
        if pos + PREFETCH_NEAR < active:
            prefetch(indices, indptr[index[pos + PREFETCH_NEAR]])
        i = index[pos]
        A = C * row_dot(indptr, indices, data, i, w, bias, s)
        for k in range(K):
            la_cur[k] = log_alpha[i, k]
            a_cur[k] = np.exp(la_cur[k])
            a_old[k] = a_cur[k]
        v_first = 0.0
        for step in range(inner_steps):
            g_max = -np.inf
            g_min = np.inf
            for k in range(K):
                grad[k] = la_cur[k] - s[k]
                if grad[k] > g_max:
                    g_max = grad[k]
                if grad[k] < g_min:
                    g_min = grad[k]
            v_i = g_max - g_min  # eq. 16
            if step == 0:
                v_first = v_i
                if v_i > max_violation:
                    max_violation = v_i
            if v_i <= 1e-12 or (step > 0 and v_i < 0.1 * tol):
                break
            eta = 0.5
            accepted = False
            for trial in range(max_trials):
                # eq. 11 in log space: log a'_k = log a_k - eta grad_k - log Z
                m = -np.inf
                for k in range(K):
                    la_new[k] = la_cur[k] - eta * (grad[k] - g_min)
                    if la_new[k] > m:
                        m = la_new[k]
                z = 0.0
                for k in range(K):
                    a_new[k] = np.exp(la_new[k] - m)
                    z += a_new[k]
                log_z = np.log(z) + m
                # eq. 13: exact change of D
                d_ent = 0.0
                d_lin = 0.0
                d_sq = 0.0
                for k in range(K):
                    la_new[k] = max(la_new[k] - log_z, _LOG_TINY)
                    a_new[k] /= z
                    d = a_new[k] - a_cur[k]
                    d_ent += a_new[k] * la_new[k] - a_cur[k] * la_cur[k]
                    d_lin += d * s[k]
                    d_sq += d * d
                change = d_ent - d_lin + 0.5 * A * d_sq
                if change <= 0.0:
                    accepted = True
                    objective[0] += change
                    for k in range(K):
                        s[k] -= A * (a_new[k] - a_cur[k])
                        a_cur[k] = a_new[k]
                        la_cur[k] = la_new[k]
                    break
                eta *= 0.5
            if exact and v_i > exact_gap:
                # EG's one step size is bounded by the curvature of the example's large
                # classes: where it left more than EG_LEAVES of the gap, the block is
                # minimised exactly from where EG got (the stall at 44M examples)
                g_max = -np.inf
                g_min = np.inf
                for k in range(K):
                    grad[k] = la_cur[k] - s[k]
                    g_max = max(g_max, grad[k])
                    g_min = min(g_min, grad[k])
                if g_max - g_min > EG_LEAVES * v_i:
                    objective[0] += _exact_step(la_cur, grad, g_min, g_max, s, a_cur, A,
                                                la_new, a_new, v_block)
                    continue
            if not accepted:
                break
        # eq. 14 once for all inner steps: w_k -= C (alpha'_ik - alpha_ik) x_i
        moved = False
        for k in range(K):
            a_new[k] = -C * (a_cur[k] - a_old[k])
            if a_new[k] != 0.0:
                moved = True
            log_alpha[i, k] = la_cur[k]
        if moved:
            row_axpy(indptr, indices, data, i, w, bias, a_new)  # eq. 14
            updates += 1
        if v_first < tol:
            active -= 1
            index[pos], index[active] = index[active], index[pos]
        else:
            pos += 1
    return active, max_violation, updates


@register
class DualMLR(ReorderingClassifier):
    """Multinomial LR (eq. 6 with sigma^2 = C) solved in the dual by shrinking EG.

    eps: shrinking/stopping tolerance on the gap of eq. 16; init_eps: eq. 15;
    max_trials: step halvings per example; inner_steps: EG steps per visit (1 = paper);
    step: "exact" minimises D over the alphas of a visited example whose gap exceeds
    exact_gap (_exact_block) and takes EG steps below it, "eg" takes only the paper's
    exponentiated-gradient steps (eq. 11) with step halving;
    shrink_below: the shrinking tolerance cools down to eps * shrink_below while the
    stopping test stays every v_i < eps (1: LIBLINEAR's cooling, which at eps cycles
    through a full pass per reactivation; issue 30);
    compact_below: the active fraction at which a streamed problem's active rows are
    copied out (rows.Compacted). The copy sets a streamed run's peak memory, and this
    solver's extra cooling phases make larger first copies than the SVM's 0.25 allows
    for, hence 0.2 (RESULTS, issue 30);
    memory: the budget (--memory) that sizes the streamed chunks and compact copies.
    """

    family = "dual-mlr"
    _parameter_constraints = {
        "C": [positive()], "eps": [positive()], "bias": [positive(closed_at_zero=True)], "max_passes": [whole(1)],
        "init_eps": [Interval(0.0, 1.0, "neither")],  # eq. 15: every alpha inside its simplex
        "max_trials": [whole(1)], "inner_steps": [whole(1)], "step": [Options(("exact", "eg"))],
        "exact_gap": [positive(closed_at_zero=True)], "shrink_below": [Interval(0.0, 1.0, "right")],
        "compact_below": [Interval(0.0, 1.0)]}

    def __init__(self, C: float = 1.0, eps: float = 0.1, bias: float = 1.0,
                 max_passes: int = 1000, seed: int = 0, init_eps: float = 1e-3,
                 max_trials: int = 30, inner_steps: int = 1, step: str = "exact",
                 exact_gap: float = 2.0, shrink_below: float = 0.25, compact_below: float = 0.2,
                 n_classes: int | None = None, verbose: bool = False,
                 memory: int | str | None = None):
        self.C = C
        self.eps = eps
        self.bias = bias
        self.max_passes = max_passes
        self.seed = seed
        self.init_eps = init_eps
        self.max_trials = max_trials
        self.inner_steps = inner_steps
        self.step = step
        self.exact_gap = exact_gap
        self.shrink_below = shrink_below
        self.compact_below = compact_below
        self.n_classes = n_classes
        self.verbose = verbose
        self.memory = memory

    def fit(self, X: sp.csr_matrix, y: np.ndarray) -> "DualMLR":
        X, y, K = self.check_Xy(X, y)
        exact = self.step == "exact"
        n, F = X.shape
        C, bias = float(self.C), float(self.bias)
        w = np.zeros((F + 1, K), dtype=np.float64)
        rows = (X.indptr, X.indices, X.data)
        # log alpha: in memory with the rows when the problem fits its share of the budget
        # (rows.RESIDENT_SHARE; one random order a pass, nothing read or written per
        # chunk: the solver of 78832e3); else beside a mapped matrix, streamed (bounded
        # memory, issue 13). Issue 30.
        resident = fits_in_memory(rows, K * np.dtype(np.float64).itemsize, self.memory)
        if resident:
            rows = rows_in_memory(rows, self.memory)
            state = MemoryState([np.empty((n, K), dtype=np.float64)])
        else:
            state = solver_state(rows, [(np.float64, (K,))])
        try:
            for lo, hi, part in iter_row_chunks(rows):  # read with pread, never faulted in
                alpha = np.full((hi - lo, K), self.init_eps / (K - 1), dtype=np.float64)  # eq. 15
                alpha[np.arange(hi - lo), y[lo:hi]] = 1.0 - self.init_eps
                _init_w(*part, y[lo:hi], bias, C, alpha, w)
                state.write([(lo, hi)], (np.log(alpha, out=alpha),))
            objective = np.array([self._dual_value(w, state)])

            def kernel(rows, state, index, active, tol):
                return _mlr_pass(*rows, bias, C, w, *state, index, active, tol,
                                 int(self.max_trials), int(self.inner_steps), objective, exact,
                                 float(self.exact_gap))

            # Streamed like the SVM's; EG's tail on ja-en S6 at eps 0.01 stalled on a few
            # coupled examples under chunked visiting (1,000 passes, not converged) until the
            # driver's stall test (shrinking.py) reactivates such a phase.
            result = run_shrinking(
                kernel, lambda: objective[0], rows, state, float(self.eps), int(self.max_passes),
                int(self.seed), self.verbose, family="dual-mlr", memory=self.memory,
                resident=resident, shrink_below=float(self.shrink_below),
                compact_below=float(self.compact_below))
            self.dual_objective_ = self._dual_value(w, state)
        finally:
            state.close()
        self.history_, self.converged_ = result.history, result.converged
        self.max_violation_ = result.max_violation
        self.n_passes_ = len(self.history_)
        self.coef_ = w[:F].astype(np.float32)
        self.intercept_ = (w[F] * bias).astype(np.float32)
        self.n_classes_ = K
        return self

    def _dual_value(self, w: np.ndarray, state) -> float:
        """D(alpha) of eq. 9, the entropy term read a piece of the examples at a time."""
        total = _norm_term(w, float(self.C))
        for lo, hi in state.pieces():
            total = _plus_entropy(total, state.read([(lo, hi)])[0])
        return float(total)

    def decision_function(self, X: sp.csr_matrix) -> np.ndarray:
        return decision_scores(X, self.coef_, self.intercept_)

    def fit_summary(self) -> dict[str, Any]:
        return {"converged": bool(self.converged_), "passes": self.n_passes_,
                "max_violation": self.max_violation_, "dual_objective": self.dual_objective_}
