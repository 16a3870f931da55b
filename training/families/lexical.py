"""The lexicalized reordering model (Moses's relative-frequency table) as a served family.

Trained on the `pair` feature set (one phrase-pair identity key per example, threshold
0: every pair seen in training; for `-f` types the `source` set, the source-phrase
identity, which is what Moses's f tables condition on), the class counts per column ARE
the table's counts,
and Moses's smoothing p_k = (c_k + s) / sum_j (c_j + s) comes from training/moses/table.py
(the one implementation `moses-reorder lexical` writes tables with). The table then
scores through the plain softmax link with no special case:

    weights[pair, k] = ln p_k(pair) - ln prior_k,   bias_k = ln prior_k

so a known pair sums to ln p_k(pair), whose softmax is p_k(pair) (it already sums to 1),
and an unknown pair (no key found) sums to the bias: the class prior, the fallback the
issue asks for. Log-probabilities are floored at -100 as Moses floors them.

This module must not read stores: it sees the pair one-hot matrix and labels.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from training.constraints import positive
from training.errors import InputError
from training.families.base import ReorderingClassifier
from training.families.registry import register
from training.families.naive_bayes import class_feature_counts, log_prior
from training.probability import LOG_FLOOR
from training.moses.table import DEFAULT_SMOOTHING, probabilities


@register
class LexicalTable(ReorderingClassifier):
    """Relative frequency per phrase pair with Moses's constant smoothing."""

    family: ClassVar[str] = "lexical"
    link: ClassVar[str] = "softmax"
    # What `train` uses unless told otherwise: every seen pair, no calibration tail
    # (a table has nothing to calibrate, and the tail would only lose counts).
    default_features: ClassVar[str] = "pair"  # what callers reading the attribute get (the -fe set)
    default_threshold: ClassVar[int] = 0
    default_calibration_fraction: ClassVar[float] = 0.0
    # The one feature IS the table's conditioning: the phrase-pair identity for `-fe`
    # types, the source-phrase identity for `-f` types (Moses's p(o | f)). `train` uses
    # it by default and refuses any other feature set for the type.
    features_by_language: ClassVar[dict[str, str]] = {"fe": "pair", "f": "source"}
    _parameter_constraints = {"smoothing": [positive(closed_at_zero=True)]}

    def __init__(self, smoothing: float = DEFAULT_SMOOTHING, n_classes: int | None = None):
        self.smoothing = smoothing
        self.n_classes = n_classes

    def fit(self, X: sp.csr_matrix, y: np.ndarray) -> "LexicalTable":
        X, y, K = self.check_Xy(X, y)
        if X.shape[0] and np.diff(X.indptr).max() > 1:
            raise InputError("lexical: every example must have at most one feature, its phrase-pair "
                             "identity (--features pair; source for -f types)")
        counts, per_class = class_feature_counts(X, y, K)          # [K x F]: the table's counts
        self.pair_count_ = counts.T                                 # [F x K]
        self.class_log_prior_ = log_prior(per_class)
        # In place: at Kyoto's 31.6M pairs each [F x K] float64 array is 758 MB, and the
        # chained expression held six of them (6.7 GB for the two directions' training).
        log_prob = probabilities(self.pair_count_[:, None, :], self.smoothing)
        with np.errstate(divide="ignore", invalid="ignore"):
            np.log(log_prob, out=log_prob)
        np.nan_to_num(log_prob, copy=False, nan=LOG_FLOOR)
        self.log_prob_ = np.maximum(log_prob, LOG_FLOOR, out=log_prob)
        nll = -float((self.pair_count_ * self.log_prob_).sum())   # of the smoothed table
        self.history_ = [{"pass": 1, "active": 1.0, "objective": nll, "seconds": 0.0}]
        return self

    def decision_function(self, X: sp.csr_matrix) -> np.ndarray:
        """ln p_k(pair) for known pairs, ln prior_k for unknown ones."""
        return np.asarray(X @ (self.log_prob_ - self.class_log_prior_)) + self.class_log_prior_

    def fit_summary(self) -> dict[str, Any]:
        return {"pairs": int(self.pair_count_.shape[0]), "smoothing": self.smoothing,
                "prior": np.exp(self.class_log_prior_).tolist()}

    def export_arrays(self) -> dict[str, np.ndarray]:
        return {"weights": (self.log_prob_ - self.class_log_prior_).astype(np.float32),
                "bias": self.class_log_prior_.astype(np.float32)}
