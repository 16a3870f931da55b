"""Primal multinomial logistic regression (MaxEnt), the baseline the dual papers beat.

Objective, the dual-MLR paper's eq. 6 with sigma^2 = C:
    P(W) = 1/(2C) ||W||^2 + sum_i [logsumexp_k s_ik - s_{i y_i}],  s_i = W^T x_i (+ bias row)
(L2), or with lambda = 1/C times ||W||_1 instead of the square (L1). Solvers:
- "lbfgs" (L2): scipy.optimize L-BFGS-B on a vectorized sparse objective/gradient;
- "owlqn" (L1): our OWL-QN (Andrew & Gao 2007, the optimiser the SVM paper used for
  MaxEnt): L-BFGS two-loop on the pseudo-gradient, orthant-projected backtracking;
- "sgd" (L2): mini-batch SGD with `partial_fit` for data that only streams.
The bias is a constant feature of value `bias` (0 = none), regularised like any weight,
so the objective is exactly the dual MLR's primal. Scores are computed in float64 by
the numba kernel in `sparse.py` (no float64 copy of X).

This module must not know about stores or files.
"""

from __future__ import annotations

import time
from typing import Any

import numba as nb
import numpy as np
import scipy.sparse as sp
from scipy.optimize import minimize
from training.progress import progress

from training.constraints import Options, positive, whole
from training.families.base import ReorderingClassifier
from training.families.registry import register
from training.families.solvers.sparse import decision_scores, row_axpy, row_dot
from training.features.rowchunks import iter_row_chunks

SOLVERS = ("lbfgs", "owlqn", "sgd")


@nb.njit(nogil=True, cache=True)
def _loss_grad(indptr, indices, data, y, W, bias, G, total):
    """total + sum_i NLL_i at W ([F+1, K], last row = bias weights); G += its gradient."""
    K = W.shape[1]
    s = np.empty(K)
    for i in range(indptr.shape[0] - 1):
        row_dot(indptr, indices, data, i, W, bias, s)
        m = s[0]
        for k in range(1, K):
            if s[k] > m:
                m = s[k]
        z = 0.0
        for k in range(K):
            s[k] = np.exp(s[k] - m)
            z += s[k]
        total += np.log(z) + m - (np.log(s[y[i]]) + m)
        for k in range(K):
            s[k] /= z
        s[y[i]] -= 1.0  # s is now p_i - onehot(y_i)
        row_axpy(indptr, indices, data, i, G, bias, s)
    return total


def nll_and_grad(X: sp.csr_matrix, y: np.ndarray, W: np.ndarray, bias: float) -> tuple[float, np.ndarray]:
    """Unregularised sum of negative log-likelihoods and its gradient, W [F+1, K].

    X is read a chunk of rows at a time (features/rowchunks.py: pread, no copy of the
    matrix); the sums run in row order, as in one pass over the whole matrix."""
    G = np.zeros_like(W)
    total = 0.0
    for lo, hi, rows in iter_row_chunks(X):
        total = _loss_grad(*rows, y[lo:hi], W, bias, G, total)
    return float(total), G


def primal_objective(X: sp.csr_matrix, y: np.ndarray, W: np.ndarray, C: float, bias: float,
                     penalty: str = "l2") -> float:
    """Eq. 6 (penalty l2) or its L1 variant at W [F+1, K]: the number tests compare."""
    nll, _ = nll_and_grad(X, np.asarray(y, dtype=np.int64), np.asarray(W, dtype=np.float64), bias)
    if penalty == "l1":
        return nll + np.abs(W).sum() / C
    return nll + 0.5 * float(np.sum(np.asarray(W, dtype=np.float64) ** 2)) / C


def _owlqn(fun_grad, x0: np.ndarray, lam: float, max_iter: int, tol: float, memory: int = 10,
           callback=None) -> np.ndarray:
    """Minimise f(x) + lam ||x||_1 by OWL-QN (Andrew & Gao 2007)."""
    x = x0.copy()
    f, g = fun_grad(x)
    obj = f + lam * np.abs(x).sum()
    s_hist: list[np.ndarray] = []
    y_hist: list[np.ndarray] = []
    for it in range(max_iter):
        # Pseudo-gradient of the non-smooth objective.
        pg = np.where(x > 0, g + lam, np.where(x < 0, g - lam, 0.0))
        at0 = x == 0
        pg[at0 & (g + lam < 0)] = (g + lam)[at0 & (g + lam < 0)]
        pg[at0 & (g - lam > 0)] = (g - lam)[at0 & (g - lam > 0)]
        if np.max(np.abs(pg)) <= tol * max(1.0, abs(obj)):
            break
        # Two-loop recursion on the pseudo-gradient.
        q = pg.copy()
        rho_a = []
        for s_, y_ in zip(reversed(s_hist), reversed(y_hist)):
            rho = 1.0 / float(y_ @ s_)
            a = rho * float(s_ @ q)
            q -= a * y_
            rho_a.append((rho, a))
        if y_hist:
            q *= float(s_hist[-1] @ y_hist[-1]) / float(y_hist[-1] @ y_hist[-1])
        for (s_, y_), (rho, a) in zip(zip(s_hist, y_hist), reversed(rho_a)):
            b = rho * float(y_ @ q)
            q += (a - b) * s_
        d = -q
        d[d * pg >= 0] = 0.0  # keep the direction a descent direction for the pseudo-gradient
        orthant = np.where(x != 0, np.sign(x), -np.sign(pg))
        step = 1.0 if s_hist else 1.0 / max(np.linalg.norm(pg), 1e-12)
        for _ in range(40):
            x_new = x + step * d
            x_new[np.sign(x_new) != orthant] = 0.0  # project onto the orthant
            f_new, g_new = fun_grad(x_new)
            obj_new = f_new + lam * np.abs(x_new).sum()
            if obj_new <= obj + 1e-4 * float(pg @ (x_new - x)):
                break
            step *= 0.5
        else:
            break  # no decrease possible along this direction: stop
        s_vec, y_vec = x_new - x, g_new - g
        if float(s_vec @ y_vec) > 1e-12:
            s_hist.append(s_vec)
            y_hist.append(y_vec)
            if len(s_hist) > memory:
                s_hist.pop(0)
                y_hist.pop(0)
        converged = abs(obj - obj_new) <= tol * max(1.0, abs(obj))
        x, f, g, obj = x_new, f_new, g_new, obj_new
        if callback is not None:
            callback(it + 1, obj)
        if converged:
            break
    return x


@register
class MaxEnt(ReorderingClassifier):
    """Primal multinomial LR. solver: lbfgs (L2) | owlqn (L1) | sgd (L2, streaming).

    C: inverse regularisation (sigma^2 of eq. 6); max_passes: iterations (lbfgs/owlqn)
    or epochs (sgd); tol: relative stopping tolerance; batch_size/learning_rate: sgd.
    """

    family = "maxent"
    _parameter_constraints = {"C": [positive()], "solver": [Options(SOLVERS)], "bias": [positive(closed_at_zero=True)],
                              "max_passes": [whole(1)], "tol": [positive()], "batch_size": [whole(1)],
                              "learning_rate": [positive()]}

    def __init__(self, C: float = 1.0, solver: str = "lbfgs", bias: float = 1.0,
                 max_passes: int = 200, tol: float = 1e-6, batch_size: int = 256,
                 learning_rate: float = 1.0, seed: int = 0, n_classes: int | None = None,
                 verbose: bool = False):
        self.C = C
        self.solver = solver
        self.bias = bias
        self.max_passes = max_passes
        self.tol = tol
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.seed = seed
        self.n_classes = n_classes
        self.verbose = verbose

    # -- helpers ---------------------------------------------------------------------
    def _finish(self, W: np.ndarray, F: int, K: int) -> None:
        self.W_ = W
        self.coef_ = W[:F].astype(np.float32)
        self.intercept_ = (W[F] * float(self.bias)).astype(np.float32)
        self.n_classes_ = K

    def _record(self, it: int, objective: float) -> None:
        self.history_.append({"pass": it, "active": 1.0, "objective": float(objective),
                              "seconds": time.perf_counter() - self._t0})
        if self._bar is not None:
            self._bar.update(1)
            self._bar.set_postfix(objective=f"{objective:.6g}")

    # -- fit -------------------------------------------------------------------------
    def fit(self, X: sp.csr_matrix, y: np.ndarray) -> "MaxEnt":
        X, y, K = self.check_Xy(X, y)
        n, F = X.shape
        self.history_ = []
        self._t0 = time.perf_counter()
        self._bar = progress(total=self.max_passes, desc=f"maxent-{self.solver}", unit="it",
                             enabled=self.verbose, leave=False)
        try:
            if self.solver == "sgd":
                self._W = np.zeros((F + 1, K))
                self._t = 0
                rng = np.random.Generator(np.random.PCG64(self.seed))
                for epoch in range(1, self.max_passes + 1):
                    self._sgd_epoch(X, y, rng)
                    self._record(epoch, primal_objective(X, y, self._W, self.C, self.bias))
                W = self._W
            else:
                W = self._fit_quasi_newton(X, y, F, K)
        finally:
            self._bar.close()
            self._bar = None
        self._finish(W, F, K)
        self.objective_ = primal_objective(X, y, W, self.C, self.bias,
                                           "l1" if self.solver == "owlqn" else "l2")
        return self

    def _fit_quasi_newton(self, X, y, F: int, K: int) -> np.ndarray:
        n = X.shape[0]
        bias, C = float(self.bias), float(self.C)
        scale = 1.0 / n  # optimise the mean: tolerances then do not depend on n
        shape = (F + 1, K)

        def smooth(w_flat: np.ndarray) -> tuple[float, np.ndarray]:
            nll, G = nll_and_grad(X, y, w_flat.reshape(shape), bias)
            return nll * scale, G.ravel() * scale

        x0 = np.zeros((F + 1) * K)
        if self.solver == "owlqn":
            return _owlqn(smooth, x0, scale / C, int(self.max_passes), float(self.tol),
                          callback=lambda it, obj: self._record(it, obj / scale)).reshape(shape)

        def l2(w_flat: np.ndarray) -> tuple[float, np.ndarray]:
            f, g = smooth(w_flat)
            return f + 0.5 * scale / C * float(w_flat @ w_flat), g + (scale / C) * w_flat

        it = [0]

        def callback(intermediate_result):
            it[0] += 1
            self._record(it[0], intermediate_result.fun / scale)

        res = minimize(l2, x0, jac=True, method="L-BFGS-B", callback=callback,
                       options={"maxiter": int(self.max_passes), "ftol": float(self.tol),
                                "gtol": float(self.tol) * 1e-2, "maxcor": 10})
        self.converged_ = bool(res.success)
        return res.x.reshape(shape)

    # -- streaming -------------------------------------------------------------------
    def partial_fit(self, X: sp.csr_matrix, y: np.ndarray) -> "MaxEnt":
        """One SGD epoch over a chunk (for stores too big for memory)."""
        X, y, K = self.check_Xy(X, y)
        if not hasattr(self, "_W"):
            self._W = np.zeros((X.shape[1] + 1, K))
            self._t = 0
            self._rng = np.random.Generator(np.random.PCG64(self.seed))
        self._sgd_epoch(X, y, getattr(self, "_rng", np.random.Generator(np.random.PCG64(self.seed))))
        self._finish(self._W, X.shape[1], K)
        return self

    def _sgd_epoch(self, X: sp.csr_matrix, y: np.ndarray, rng: np.random.Generator) -> None:
        """Mini-batch SGD on P/n with step eta_t = eta0 / (1 + eta0 lambda t)."""
        n = X.shape[0]
        lam = 1.0 / (float(self.C) * n)
        order = rng.permutation(n)
        W = self._W
        for start in range(0, n, int(self.batch_size)):
            rows = np.sort(order[start:start + int(self.batch_size)])
            Xb = X[rows]
            _, G = nll_and_grad(Xb, y[rows], W, float(self.bias))
            eta = self.learning_rate / (1.0 + self.learning_rate * lam * self._t)
            W *= 1.0 - eta * lam
            W -= (eta / len(rows)) * G
            self._t += 1

    def decision_function(self, X: sp.csr_matrix) -> np.ndarray:
        return decision_scores(X, self.coef_, self.intercept_)

    def fit_summary(self) -> dict[str, Any]:
        nz = int(np.count_nonzero(np.any(self.coef_ != 0, axis=1)))
        summary = {"objective": float(self.objective_), "iterations": len(self.history_),
                   "nonzero_features": nz}
        if hasattr(self, "converged_"):  # lbfgs: scipy's own convergence test
            summary["converged"] = self.converged_
        return summary
