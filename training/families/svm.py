"""Crammer-Singer multiclass SVM trained by the shrinking sequential dual method.

SVM paper (svm-reordering), Section 6.1: the dual of
    min_w 1/2 sum_k ||w_k||^2 + C sum_i max_k (1 - delta_{y_i k} + w_k.x_i - w_{y_i}.x_i)
is solved one example at a time. For example i all K dual variables alpha_ik are
re-optimised exactly (Algorithm 1: sort D, find beta) with the others fixed, and w is
updated by eq. 11. Examples whose violation v_i (eq. 12) is at most the shrinking
tolerance leave the active set (Algorithm 2); `shrinking.run_shrinking` cools that
tolerance towards eps and certifies the stop. Weights are feature-major [F+1, K] float64
during training so that one sparse row touches K contiguous numbers; the squared row
norms x_i.x_i (A in eq. 10) are computed once.

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

from training.families.base import ReorderingClassifier
from training.families.calibration import fit_temperature
from training.families.shrinking import run_shrinking
from training.families.sparse import check_Xy, decision_scores, row_sqnorms


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
def _svm_pass(indptr, indices, data, y, sqnorm, bias, C, w, alpha, index, active, tol, objective):
    """One pass of Algorithm 2 over index[:active]; shrunk examples move behind `active`.

    objective[0] (the dual value) is kept up to date incrementally, so a pass over a
    small active set costs nothing per inactive example.
    """
    K = w.shape[1]
    fb = w.shape[0] - 1  # bias row (unused when bias == 0)
    G = np.empty(K)
    B = np.empty(K)
    alpha_new = np.empty(K)
    delta = np.empty(K)
    max_violation = 0.0
    updates = 0
    s = 0
    while s < active:
        i = index[s]
        A = sqnorm[i]
        yi = y[i]
        if A <= 0.0:  # an empty row never changes w: drop it
            active -= 1
            index[s], index[active] = index[active], index[s]
            continue
        # G_ik = w_k.x_i + 1 - delta_ik   (eq. 10)
        for k in range(K):
            G[k] = 1.0
        G[yi] = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            v = data[p]
            for k in range(K):
                G[k] += w[j, k] * v
        if bias != 0.0:
            for k in range(K):
                G[k] += w[fb, k] * bias
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
        if v_i > max_violation:
            max_violation = v_i
        if v_i <= 1e-12:
            active -= 1
            index[s], index[active] = index[active], index[s]
            continue
        for k in range(K):
            B[k] = G[k] - A * alpha[i, k]
        _sub_problem(A, B, yi, C, alpha_new)
        for k in range(K):
            delta[k] = alpha_new[k] - alpha[i, k]
            alpha[i, k] = alpha_new[k]
        # w_k += (alpha'_ik - alpha_ik) x_i   (eq. 11)
        dq = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            v = data[p]
            for k in range(K):
                step = delta[k] * v
                dq += step * (w[j, k] + 0.5 * step)
                w[j, k] += step
        if bias != 0.0:
            for k in range(K):
                step = delta[k] * bias
                dq += step * (w[fb, k] + 0.5 * step)
                w[fb, k] += step
        objective[0] += dq - delta[yi]
        updates += 1
        if v_i < tol:
            # Shrink (eq. 12 test) after the exact update: the example is optimal now
            # and leaves the active set until the next reactivation.
            active -= 1
            index[s], index[active] = index[active], index[s]
        else:
            s += 1
    return active, max_violation, updates


@nb.njit(nogil=True, cache=True)
def _svm_dual_objective(w, alpha, y):
    """LIBLINEAR's (minimised) dual value: 1/2 ||w||^2 - sum_i alpha_{i y_i}."""
    total = 0.0
    for j in range(w.shape[0]):
        for k in range(w.shape[1]):
            total += w[j, k] * w[j, k]
    total *= 0.5
    for i in range(y.shape[0]):
        total -= alpha[i, y[i]]
    return total


class MulticlassSVM(ReorderingClassifier):
    """Crammer-Singer SVM, shrinking sequential dual (LIBLINEAR `-s 4` objective).

    C: penalty; eps: stopping tolerance on v_i (eq. 12); bias: value of the constant
    feature (0 = none); max_passes: cap on passes; seed: the visiting order.
    """

    family = "svm"

    def __init__(self, C: float = 0.1, eps: float = 0.1, bias: float = 1.0,
                 max_passes: int = 1000, seed: int = 0, n_classes: int | None = None,
                 verbose: bool = False):
        self.C = C
        self.eps = eps
        self.bias = bias
        self.max_passes = max_passes
        self.seed = seed
        self.n_classes = n_classes
        self.verbose = verbose

    def fit(self, X: sp.csr_matrix, y: np.ndarray) -> "MulticlassSVM":
        X, y, n_classes = check_Xy(X, y, self.n_classes)
        n, F = X.shape
        sqnorm = row_sqnorms(X) + self.bias * self.bias
        w = np.zeros((F + 1, n_classes), dtype=np.float64)
        alpha = np.zeros((n, n_classes), dtype=np.float64)
        C, bias = float(self.C), float(self.bias)
        objective = np.zeros(1)

        def run_pass(index, active, tol):
            return _svm_pass(X.indptr, X.indices, X.data, y, sqnorm, bias, C, w, alpha,
                             index, active, tol, objective)

        self.history_, self.converged_ = run_shrinking(
            run_pass, lambda: objective[0], n, float(self.eps),
            int(self.max_passes), int(self.seed), self.verbose, desc="svm")
        self.n_passes_ = len(self.history_)
        self.dual_objective_ = _svm_dual_objective(w, alpha, y)
        self.n_support_ = int(np.count_nonzero(np.any(alpha != 0.0, axis=1)))
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
        scores = self.decision_function(X).astype(np.float64) / self.temperature_
        scores -= scores.max(axis=1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=1, keepdims=True)
        return scores

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
                "dual_objective": float(self.dual_objective_),
                "support_examples": self.n_support_,
                "temperature": float(self.temperature_)}
