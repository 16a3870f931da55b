"""Feature selection by normalised mutual information (the Bayesian paper, eqs. 14-16).

Each feature is a binary variable X_m (present in the example or not) and the class
is Y. From the class/feature contingency counts (how many examples of class k contain
feature m) we get I(X_m; Y) = H(Y) - H(Y|X_m) (eq. 15) and normalise it by
min(H(X_m), H(Y)) (eq. 16, Estevez et al. 2009) so frequent features are not favoured
just for being frequent. Everything is vectorized over the feature axis: one sparse
product for the counts, numpy over [K x F] arrays after that.

This module ranks and selects columns; it does not train, and it does not know about
stores or weight files.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.special import xlogy

from training.errors import InputError, UsageError


def presence_counts(X: sp.csr_matrix, y: np.ndarray, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """d_km = examples of class k in which feature m occurs [K x F]; N_k [K]."""
    X = sp.csr_matrix(X)
    present = sp.csr_matrix((np.ones(X.nnz), X.indices, X.indptr), shape=X.shape)
    present.sum_duplicates()
    present.data[:] = 1.0
    y = np.asarray(y, dtype=np.int64)
    n = X.shape[0]
    onehot = sp.csr_matrix((np.ones(n), (y, np.arange(n))), shape=(n_classes, n))
    return np.asarray((onehot @ present).todense()), np.bincount(y, minlength=n_classes).astype(np.float64)


def _entropy(p: np.ndarray, axis: int = 0) -> np.ndarray:
    """H = -sum p log p (eq. 14), natural log, 0 log 0 = 0."""
    return -xlogy(p, p).sum(axis=axis)


def normalized_mutual_information(present: np.ndarray, class_count: np.ndarray) -> np.ndarray:
    """NMI of every feature with the class, from contingency counts (eqs. 14-16).

    present [K x F]: examples of class k containing feature m; class_count [K]: N_k.
    A feature (or class set) with zero entropy carries no information: its NMI is 0.
    """
    present = np.asarray(present, dtype=np.float64)
    N = float(class_count.sum())
    p_y = class_count / N                                    # K
    p_x1 = present.sum(axis=0) / N                           # F
    joint1 = present / N                                     # p(x=1, y=k)
    joint0 = (class_count[:, None] - present) / N            # p(x=0, y=k)
    p_x0 = 1.0 - p_x1
    with np.errstate(divide="ignore", invalid="ignore"):
        mi = (xlogy(joint1, joint1 / (p_x1[None, :] * p_y[:, None])).sum(axis=0)
              + xlogy(joint0, joint0 / (p_x0[None, :] * p_y[:, None])).sum(axis=0))  # eq. 15
    h_x = _entropy(np.vstack([p_x1, p_x0]))
    h_y = _entropy(p_y)
    denom = np.minimum(h_x, h_y)
    nmi = np.zeros_like(mi)
    ok = denom > 0
    nmi[ok] = mi[ok] / denom[ok]                             # eq. 16
    return np.clip(nmi, 0.0, 1.0)  # rounding can leave -1e-17 or 1+1e-16


def feature_nmi(X: sp.csr_matrix, y: np.ndarray, n_classes: int) -> np.ndarray:
    """NMI per column of X with the labels y."""
    present, class_count = presence_counts(X, y, n_classes)
    return normalized_mutual_information(present, class_count)


@dataclass(frozen=True)
class Selection:
    """How many features to keep: NMI >= threshold, the top k, or the top fraction."""

    mode: str      # "threshold" | "top-k" | "fraction"
    value: float

    @classmethod
    def parse(cls, text: str) -> "Selection":
        """`top-k:N`, `threshold:T`, `fraction:F`, or a bare number in (0, 1] = fraction."""
        text = text.strip()
        try:
            if text.startswith("top-k:"):
                k = int(text[6:])
                if k < 1:
                    raise ValueError
                return cls("top-k", float(k))
            if text.startswith("threshold:"):
                return cls("threshold", float(text[10:]))
            value = float(text[9:] if text.startswith("fraction:") else text)
        except ValueError:
            value = float("nan")
        if not 0.0 < value <= 1.0:
            raise UsageError(f"--select-nmi {text!r}: expected top-k:N, threshold:T, or a fraction in (0, 1]")
        return cls("fraction", value)

    def __str__(self) -> str:
        return f"{self.mode}:{int(self.value) if self.mode == 'top-k' else self.value:g}"

    def mask(self, nmi: np.ndarray) -> np.ndarray:
        """Boolean keep-mask over features. Ties at the cut are broken by column index so
        the choice is deterministic."""
        F = nmi.shape[0]
        if self.mode == "threshold":
            return nmi >= self.value
        k = int(self.value) if self.mode == "top-k" else int(round(self.value * F))
        k = min(max(k, 0), F)
        order = np.lexsort((np.arange(F), -nmi))             # highest NMI first, stable
        keep = np.zeros(F, dtype=bool)
        keep[order[:k]] = True
        return keep


def select_columns(X: sp.csr_matrix, label_sets: list[np.ndarray], n_classes: int,
                   selection: Selection) -> tuple[np.ndarray, np.ndarray]:
    """Keep-mask over X's columns and the NMI it was cut on.

    A weight file holds one key set for all its directions, so a bidirectional model
    ranks each feature by its best NMI over the directions' label sets.
    """
    nmi = np.max([feature_nmi(X, y, n_classes) for y in label_sets], axis=0)
    return selection.mask(nmi), nmi
