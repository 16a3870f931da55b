"""Crammer-Singer multiclass SVM trained by the shrinking sequential dual method.

SVM paper (svm-reordering), Section 6.1: the dual of
    min_w 1/2 sum_k ||w_k||^2 + C sum_i max_k (1 - delta_{y_i k} + w_k.x_i - w_{y_i}.x_i)
is solved one example at a time. For example i all K dual variables alpha_ik are
re-optimised exactly (Algorithm 1: sort D, find beta) with the others fixed, and w is
updated by eq. 11. The stop is eq. 12: a pass over all examples in which every
v_i < eps; `shrinking.run_shrinking` drives passes over an active set and reactivates
everything whenever the active examples satisfy a cooling tolerance (max(10 eps, 1),
halved down to eps), as LIBLINEAR does.

Which examples leave the active set (`shrinking`):
- "paper": Algorithm 2 lines 6-7, v_i below the current tolerance. It drops free
  support vectors whose v_i grows again once their neighbours move, so every
  reactivation finds new violators: more than twice the passes of "bound" for about
  the same CPU time (benchmarks/RESULTS.md, Training).
- "bound" (default): the example's classes are all but one pinned at their bound with
  a gradient that keeps them there (LIBLINEAR's test), i.e. eq. 12 holds exactly and
  stays robust to small changes of w. Same optimum, same certificate.

Weights are feature-major [F+1, K] float64 during training so that one sparse row
touches K contiguous numbers; the squared row norm x_i.x_i (A in eq. 10) comes out of
the same read of the row that computes w.x_i, so no per-example array but the label and
alpha is kept (beside the matrix in a file when the matrix is one: solvers/state.py),
and the pass prefetches the data of the examples a few visits ahead (prefetch.py): the
random visiting order otherwise makes every visit wait for a chain of cache misses.

Bias: like LIBLINEAR's `-B b`, a constant feature of value `bias` is appended to every
row (virtually: the kernel adds it, X is not copied), so the intercept is b * w_{F} and
it is regularised like any other weight. `bias=0` means no intercept.

Probabilities: the paper takes the softmax of the decision values. Those are not
calibrated, and Moses consumes log-probabilities, so `calibrate(X, y)` fits one
temperature T on held-out rows (scipy bounded scalar minimisation of the log-loss);
`predict_proba` is softmax(scores / T) and `export_arrays` folds 1/T into the weights
and bias so the served link stays the plain softmax.

This module must not know about stores or files: it sees a CSR matrix and labels.
"""

from __future__ import annotations

from typing import Any

import numba as nb
import numpy as np
import scipy.sparse as sp

from training.constraints import Options, positive, whole
from training.families.base import ReorderingClassifier
from training.families.registry import register
from training.families.solvers.calibration import fit_temperature
from training.families.solvers.prefetch import PREFETCH_FAR, PREFETCH_NEAR, prefetch
from training.families.solvers.rows import solver_state
from training.families.solvers.shrinking import run_shrinking
from training.families.solvers.sparse import decision_scores, row_axpy, row_dot
from training.probability import softmax


SHRINKING = ("bound", "paper")


@nb.njit(nogil=True, cache=True)
def _sub_problem(A, B, yi, C, alpha_new):
    """Algorithm 1 (Fan et al. 2008): exact minimiser of the per-example dual (eq. 9)."""
    K = B.shape[0]
    D = np.empty(K)
    for k in range(K):
        D[k] = B[k]
    D[yi] += A * C
    # Insertion sort, decreasing: K is 2-4 here.
    for a in range(1, K):
        v = D[a]
        b = a - 1
        while b >= 0 and D[b] < v:
            D[b + 1] = D[b]
            b -= 1
        D[b + 1] = v
    beta = D[0] - A * C
    r = 1
    while r < K and beta < r * D[r]:
        beta += D[r]
        r += 1
    beta /= r
    for k in range(K):
        bound = C if k == yi else 0.0
        val = (beta - B[k]) / A
        alpha_new[k] = bound if val > bound else val


@nb.njit(nogil=True, cache=True)
def _svm_pass(indptr, indices, data, y, alpha, bias, C, w, index, active, tol, objective,
              paper_shrink):
    """One pass of Algorithm 2 over index[:active]; shrunk examples move behind `active`.

    objective[0] (the dual value) is kept up to date incrementally, so a pass over a
    small active set costs nothing per inactive example.
    """
    K = w.shape[1]
    G = np.empty(K)
    B = np.empty(K)
    alpha_new = np.empty(K)
    delta = np.empty(K)
    max_violation = 0.0
    updates = 0
    s = 0
    while s < active:
        if s + PREFETCH_FAR < active:
            j = index[s + PREFETCH_FAR]
            prefetch(indptr, j)
            prefetch(alpha, j)
            prefetch(y, j)
        if s + PREFETCH_NEAR < active:
            prefetch(indices, indptr[index[s + PREFETCH_NEAR]])
        i = index[s]
        yi = y[i]
        # G_ik = w_k.x_i + 1 - delta_ik   (eq. 10); A = x_i.x_i
        A = row_dot(indptr, indices, data, i, w, bias, G)
        if A <= 0.0:  # an empty row never changes w: drop it
            active -= 1
            index[s], index[active] = index[active], index[s]
            continue
        for k in range(K):
            G[k] += 1.0
        G[yi] -= 1.0
        # v_i = max_k G_ik - min_{k: alpha_ik < C delta_ik} G_ik   (eq. 12)
        max_g = -np.inf
        min_g = np.inf
        for k in range(K):
            if G[k] > max_g:
                max_g = G[k]
            bound = C if k == yi else 0.0
            if alpha[i, k] < bound and G[k] < min_g:
                min_g = G[k]
        v_i = max_g - min_g
        if not paper_shrink:
            # Class k is pinned when alpha_ik sits at its bound and G_ik < min_g keeps it
            # there; with at most one class free, v_i = 0 exactly: shrink (LIBLINEAR's rule).
            free = 0
            for k in range(K):
                bound = C if k == yi else 0.0
                if not (alpha[i, k] == bound and G[k] < min_g):
                    free += 1
            if free <= 1:
                active -= 1
                index[s], index[active] = index[active], index[s]
                continue
        if v_i > max_violation:
            max_violation = v_i
        if v_i <= 1e-12:
            active -= 1
            index[s], index[active] = index[active], index[s]
            continue
        for k in range(K):
            B[k] = G[k] - A * alpha[i, k]
        _sub_problem(A, B, yi, C, alpha_new)
        dq = 0.0  # change of 1/2 ||w||^2, from G before the update: w_k.x_i = G_ik - 1 + delta_ik
        for k in range(K):
            delta[k] = alpha_new[k] - alpha[i, k]
            alpha[i, k] = alpha_new[k]
            dq += delta[k] * (G[k] - (0.0 if k == yi else 1.0) + 0.5 * A * delta[k])
        row_axpy(indptr, indices, data, i, w, bias, delta)  # w_k += delta_k x_i   (eq. 11)
        objective[0] += dq - delta[yi]
        updates += 1
        if paper_shrink and v_i < tol:
            # Algorithm 2, lines 6-7: v_i within the tolerance, the example leaves the
            # active set (after its exact update, which is nearly free now).
            active -= 1
            index[s], index[active] = index[active], index[s]
        else:
            s += 1
    return active, max_violation, updates


@nb.njit(nogil=True, cache=True)
def _half_squared_norm(w):
    """1/2 ||w||^2, the first term of the dual value."""
    total = 0.0
    for j in range(w.shape[0]):
        for k in range(w.shape[1]):
            total += w[j, k] * w[j, k]
    return total * 0.5


@nb.njit(nogil=True, cache=True)
def _minus_alpha_y(total, alpha, y):
    """total - sum_i alpha_{i y_i} over these examples (the dual value, summed a piece
    of the examples at a time in example order)."""
    for i in range(y.shape[0]):
        total -= alpha[i, y[i]]
    return total


@register
class MulticlassSVM(ReorderingClassifier):
    """Crammer-Singer SVM, shrinking sequential dual (LIBLINEAR `-s 4` objective).

    C: penalty; eps: stopping tolerance on v_i (eq. 12); bias: value of the constant
    feature (0 = none); max_passes: cap on passes; seed: the visiting order;
    shrinking: "bound" (default) or "paper" (see the module docstring); memory: the
    budget (--memory) that sizes the streamed chunks and the compact copies (rows.py).
    """

    family = "svm"
    _parameter_constraints = {"C": [positive()], "eps": [positive()], "bias": [positive(closed_at_zero=True)],
                              "max_passes": [whole(1)], "shrinking": [Options(SHRINKING)]}

    def __init__(self, C: float = 0.1, eps: float = 0.1, bias: float = 1.0,
                 max_passes: int = 1000, seed: int = 0, shrinking: str = "bound",
                 n_classes: int | None = None, verbose: bool = False,
                 memory: int | str | None = None):
        self.C = C
        self.eps = eps
        self.bias = bias
        self.max_passes = max_passes
        self.seed = seed
        self.shrinking = shrinking
        self.n_classes = n_classes
        self.verbose = verbose
        self.memory = memory

    def fit(self, X: sp.csr_matrix, y: np.ndarray) -> "MulticlassSVM":
        X, y, n_classes = self.check_Xy(X, y)
        paper_shrink = self.shrinking == "paper"
        n, F = X.shape
        w = np.zeros((F + 1, n_classes), dtype=np.float64)
        rows = (X.indptr, X.indices, X.data)
        # (y, alpha) of every example, beside the matrix when it is a file (state.py)
        state = solver_state(rows, [(y.dtype, ()), (np.float64, (n_classes,))])
        try:
            for lo, hi in state.pieces():  # alpha starts at zero
                state.write([(lo, hi)], (y[lo:hi],), columns=[0])
            C, bias = float(self.C), float(self.bias)
            objective = np.zeros(1)

            def kernel(rows, state, index, active, tol):
                return _svm_pass(*rows, *state, bias, C, w, index, active, tol, objective,
                                 paper_shrink)

            result = run_shrinking(
                kernel, lambda: objective[0], rows, state, float(self.eps), int(self.max_passes),
                int(self.seed), self.verbose, family="svm", memory=self.memory)
            dual, support = _half_squared_norm(w), 0
            for lo, hi in state.pieces():
                y_part, alpha = state.read([(lo, hi)])
                dual = _minus_alpha_y(dual, alpha, y_part)
                support += int(np.count_nonzero(np.any(alpha != 0.0, axis=1)))
        finally:
            state.close()
        self.history_, self.converged_ = result.history, result.converged
        self.max_violation_ = result.max_violation
        self.n_passes_ = len(self.history_)
        self.dual_objective_ = dual
        self.n_support_ = support
        self.coef_ = w[:F].astype(np.float32)
        self.intercept_ = (w[F] * bias).astype(np.float32)
        self.temperature_ = 1.0
        self.n_classes_ = n_classes
        return self

    def primal_objective(self, X: sp.csr_matrix, y: np.ndarray) -> float:
        """1/2 ||w||^2 (bias weight included) + C sum_i max_k(1 - delta + s_k - s_y)."""
        scores = decision_scores(X, self.coef_.astype(np.float64),
                                 self.intercept_.astype(np.float64))
        y = np.asarray(y, dtype=np.int64)
        margin = scores + 1.0
        margin[np.arange(len(y)), y] -= 1.0
        loss = margin.max(axis=1) - scores[np.arange(len(y)), y]
        w_bias = self.intercept_.astype(np.float64) / self.bias if self.bias else 0.0
        reg = 0.5 * (np.sum(self.coef_.astype(np.float64) ** 2) + np.sum(w_bias ** 2))
        return float(reg + self.C * loss.sum())

    def decision_function(self, X: sp.csr_matrix) -> np.ndarray:
        return decision_scores(X, self.coef_, self.intercept_)

    def predict_proba(self, X: sp.csr_matrix) -> np.ndarray:
        return softmax(self.decision_function(X) / self.temperature_)

    def calibrate(self, X: sp.csr_matrix, y: np.ndarray) -> "MulticlassSVM":
        """Fit the softmax temperature on held-out rows (see module docstring)."""
        self.temperature_ = fit_temperature(self.decision_function(X), np.asarray(y))
        return self

    def export_arrays(self) -> dict[str, np.ndarray]:
        t = float(self.temperature_)
        return {"weights": (self.coef_.astype(np.float64) / t).astype(np.float32),
                "bias": (self.intercept_.astype(np.float64) / t).astype(np.float32)}

    def fit_summary(self) -> dict[str, Any]:
        return {"converged": bool(self.converged_), "passes": self.n_passes_,
                "max_violation": self.max_violation_,
                "dual_objective": float(self.dual_objective_),
                "support_examples": self.n_support_,
                "temperature": float(self.temperature_)}
