"""Multinomial naive Bayes reordering models (the Bayesian paper, section 4).

Two families share one pass over the data (class-by-feature count accumulation with a
sparse product) and differ only in how the counts become predictions:

- `nb-map`: the MAP estimate of the class-conditional multinomial (eq. 10, Dirichlet
  alpha > 1). Its log-probabilities are linear weights and the log prior a bias, so it
  scores through the plain softmax link like every linear family.
- `nb-bayes`: Bayesian inference, the Dirichlet-multinomial predictive (eqs. 11-13) with
  the posterior hyper-parameters alpha_km = alpha + counts. It is not linear in the
  features (Gamma functions of the row's total count), so it exports the posterior
  alphas (as logarithms: features are binary, so their sum over a row is the
  product in eq. 11), their per-class sums and the log prior, and scores through the
  "dirichlet" link.

Calibration (beyond the paper): naive Bayes counts correlated features as independent
evidence and is over-confident, and Moses consumes log-probabilities. `calibrate`
fits one temperature on held-out rows (the same scalar fit as the SVM's); it divides
the log-posterior, so the argmax and the accuracy are the paper's. `--param
temperature_scaling=False` gives the paper's probabilities.

This module must not read stores or files: it sees a CSR matrix and labels only.
"""

from __future__ import annotations

import time
from typing import ClassVar

import numba as nb
import numpy as np
import scipy.sparse as sp
from scipy.special import gammaln

from training.constraints import Interval, positive
from training.families.base import ReorderingClassifier
from training.families.registry import register
from training.families.solvers.calibration import fit_temperature
from training.families.solvers.sparse import decision_scores
from training.features.rowchunks import CHUNK_NNZ, iter_row_chunks
from training.probability import LOG_FLOOR

# A class never seen in training gets this log prior instead of -inf (Moses floors
# log-probabilities at -100 the same way), so the softmax never sees an all -inf row.


@nb.njit(nogil=True, cache=True)
def _add_counts(indptr, indices, data, y, counts):
    for i in range(indptr.shape[0] - 1):
        k = y[i]
        for p in range(indptr[i], indptr[i + 1]):
            counts[k, indices[p]] += data[p]


def class_feature_counts(X: sp.csr_matrix, y: np.ndarray, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """Sum of feature values per class, [K x F] float64, and examples per class [K].

    One streamed pass over X's rows a chunk at a time (features/rowchunks.py: pread,
    no copy of the matrix), adding each row into its class's counts.
    """
    y = np.asarray(y, dtype=np.int64)
    counts = np.zeros((n_classes, X.shape[1]), dtype=np.float64)
    for lo, hi, rows in iter_row_chunks(X):
        _add_counts(*rows, y[lo:hi], counts)
    return counts, np.bincount(y, minlength=n_classes).astype(np.float64)


def log_prior(class_count: np.ndarray) -> np.ndarray:
    """log p(o_k) = log N_k / N (relative frequency), floored for empty classes."""
    total = class_count.sum()
    with np.errstate(divide="ignore"):
        out = np.log(class_count / total) if total > 0 else np.full(class_count.shape, -np.log(len(class_count)))
    return np.maximum(out, LOG_FLOOR)


def dirichlet_log_likelihood(X: sp.csr_matrix, alpha_post: np.ndarray, alpha_sum: np.ndarray) -> np.ndarray:
    """log p(x_i | o_k) of eq. 11 without the multinomial coefficient C (it cancels).

    alpha_post [F x K] are the posterior hyper-parameters alpha_km (eq. 13) and
    alpha_sum [K] their sums over all M features of the model. For row i with values
    x_im: gammaln(A_k) - gammaln(A_k + n_i) + sum_m [gammaln(alpha_km + x_im) -
    gammaln(alpha_km)], n_i = sum_m x_im. Exact for counts, not only for binary rows.
    """
    X = sp.csr_matrix(X)
    alpha_post = np.asarray(alpha_post, dtype=np.float64)
    A = np.asarray(alpha_sum, dtype=np.float64)[None, :]
    out = np.empty((X.shape[0], alpha_post.shape[1]), dtype=np.float64)
    # nnz x K float64 temporaries (four of them) per chunk only: chunks of an eighth of the
    # usual size keep them near 24 MiB
    for lo, hi, (indptr, indices, data) in iter_row_chunks(X, CHUNK_NNZ // 8):
        n = hi - lo
        x = np.asarray(data, dtype=np.float64)
        a = alpha_post[indices]                                         # chunk nnz x K
        per_value = gammaln(a + x[:, None]) - gammaln(a)
        rows = np.repeat(np.arange(n), np.diff(indptr))
        for k in range(a.shape[1]):                                     # K <= 4 classes
            out[lo:hi, k] = np.bincount(rows, weights=per_value[:, k], minlength=n)
        row_total = np.bincount(rows, weights=x, minlength=n)
        out[lo:hi] += gammaln(A) - gammaln(A + row_total[:, None])
    return out


class _CountingNB(ReorderingClassifier):
    """Shared one-pass counting; subclasses turn `feature_count_` into predictions."""

    def __init__(self, alpha: float = 1.5, temperature_scaling: bool = True, n_classes: int | None = None):
        self.alpha = alpha
        self.temperature_scaling = temperature_scaling
        self.n_classes = n_classes

    def partial_fit(self, X: sp.csr_matrix, y: np.ndarray) -> "_CountingNB":
        """Add one chunk's counts (streaming: the store arrives in chunks)."""
        self._t0 = time.perf_counter()
        X, y, K = self.check_Xy(X, y)
        counts, per_class = class_feature_counts(X, y, K)
        if getattr(self, "feature_count_", None) is None:
            self.feature_count_, self.class_count_ = counts, per_class
        else:
            self.feature_count_ += counts
            self.class_count_ += per_class
        self._finish()
        return self

    def fit(self, X: sp.csr_matrix, y: np.ndarray) -> "_CountingNB":
        self.feature_count_ = None
        return self.partial_fit(X, y)

    def _finish(self) -> None:
        self.class_log_prior_ = log_prior(self.class_count_)
        self.temperature_ = 1.0

    def _record_pass(self, log_q: np.ndarray) -> None:
        """history_ (the train contract): one pass; objective = the training data's
        negative joint log-likelihood sum_k [N_k ln p(o_k) + sum_m c_km ln q_km], from counts."""
        nll = -float((self.feature_count_ * log_q).sum() + self.class_count_ @ self.class_log_prior_)
        self.history_ = [{"pass": 1, "active": 1.0, "objective": nll,
                          "seconds": time.perf_counter() - self._t0}]

    def calibrate(self, X: sp.csr_matrix, y: np.ndarray) -> "_CountingNB":
        """One temperature on held-out rows (see the module docstring)."""
        if self.temperature_scaling and X.shape[0]:
            self.temperature_ = fit_temperature(self._log_joint(X), np.asarray(y, dtype=np.int64))
        return self

    def decision_function(self, X: sp.csr_matrix) -> np.ndarray:
        """Log-posterior up to a per-row constant (softmax -> calibrated posterior)."""
        return self._log_joint(X) / self.temperature_

    def fit_summary(self) -> dict:
        return {"temperature": self.temperature_, "examples_per_class": self.class_count_.tolist(),
                "n_features": int(self.feature_count_.shape[1])}


@register
class MultinomialNBMap(_CountingNB):
    """nb-map: q_km = (alpha - 1 + c_km) / (M (alpha - 1) + C_k)   (eq. 10), alpha > 1."""

    family: ClassVar[str] = "nb-map"
    link: ClassVar[str] = "softmax"
    # eq. 10's MAP estimate is a mode of the Dirichlet only for alpha > 1
    _parameter_constraints = {"alpha": [Interval(1.0, None, "neither")], "temperature_scaling": [bool]}

    def _finish(self) -> None:
        super()._finish()
        M = self.feature_count_.shape[1]
        num = self.feature_count_ + (self.alpha - 1.0)                 # K x F
        den = num.sum(axis=1, keepdims=True)                            # M(alpha-1) + C_k
        self.feature_log_prob_ = np.log(num) - np.log(den)
        assert self.feature_log_prob_.shape[1] == M
        self._record_pass(self.feature_log_prob_)

    def _log_joint(self, X: sp.csr_matrix) -> np.ndarray:
        """ln p(o_k) + ln p(x|o_k) up to the multinomial coefficient C (eq. 6)."""
        return decision_scores(X, np.ascontiguousarray(self.feature_log_prob_.T), self.class_log_prior_)

    def export_arrays(self) -> dict[str, np.ndarray]:
        """Softmax link: weights ln q_km / T, bias ln p(o_k) / T."""
        return {"weights": np.asarray(self.feature_log_prob_.T / self.temperature_, dtype=np.float32),
                "bias": np.asarray(self.class_log_prior_ / self.temperature_, dtype=np.float32)}


@register
class MultinomialNBBayes(_CountingNB):
    """nb-bayes: Dirichlet-multinomial predictive with alpha_km = alpha + c_km (eqs. 11-13)."""

    family: ClassVar[str] = "nb-bayes"
    link: ClassVar[str] = "dirichlet"

    def __init__(self, alpha: float = 1.0, temperature_scaling: bool = True, n_classes: int | None = None):
        super().__init__(alpha=alpha, temperature_scaling=temperature_scaling, n_classes=n_classes)

    _parameter_constraints = {"alpha": [positive()], "temperature_scaling": [bool]}

    def _finish(self) -> None:
        super()._finish()
        self.alpha_post_ = (self.feature_count_ + self.alpha).T        # F x K, eq. 13
        self.alpha_sum_ = self.alpha_post_.sum(axis=0)                  # K, eq. 11 denominators
        self._record_pass(np.log(self.alpha_post_ / self.alpha_sum_).T)  # posterior mean q

    def _log_joint(self, X: sp.csr_matrix) -> np.ndarray:
        return dirichlet_log_likelihood(X, self.alpha_post_, self.alpha_sum_) + self.class_log_prior_

    def export_arrays(self) -> dict[str, np.ndarray]:
        """For the "dirichlet" link: weights ln alpha_km, bias ln p(o_k), extras
        `alpha_sum` (float64: sums of millions of counts) and `temperature`."""
        return {"weights": np.log(self.alpha_post_).astype(np.float32),
                "bias": np.asarray(self.class_log_prior_, dtype=np.float32),
                "alpha_sum": np.asarray(self.alpha_sum_, dtype=np.float64),
                "temperature": np.array([self.temperature_], dtype=np.float64)}
