"""Classification metrics on arrays: what the evaluation report is made of.

Accuracy, the confusion matrix and per-class precision/recall/F1 (the SVM paper's
Tables 4-6), log-loss (Moses consumes log-probabilities, so calibration matters as
much as the argmax) and expected calibration error. Inputs are plain numpy arrays;
this module must not know about models, stores or files.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from training.probability import log_loss_of_proba

# Moses floors ln p at -100 (MOSES-NOTES section 3); the log-loss uses the same floor so
# one zero probability cannot make the mean infinite.


def confusion_matrix(y_true: np.ndarray, y_pred: np.ndarray, n_classes: int) -> np.ndarray:
    """counts[t, p]: examples of true class t predicted as p (int64 [K x K])."""
    idx = np.asarray(y_true, dtype=np.int64) * n_classes + np.asarray(y_pred, dtype=np.int64)
    return np.bincount(idx, minlength=n_classes * n_classes).reshape(n_classes, n_classes)


def precision_recall_f1(confusion: np.ndarray) -> dict[str, np.ndarray]:
    """Per class, from counts[t, p]; 0 where undefined (no prediction / no example)."""
    tp = np.diag(confusion).astype(np.float64)
    predicted = confusion.sum(axis=0).astype(np.float64)
    actual = confusion.sum(axis=1).astype(np.float64)
    precision = np.divide(tp, predicted, out=np.zeros_like(tp), where=predicted > 0)
    recall = np.divide(tp, actual, out=np.zeros_like(tp), where=actual > 0)
    denom = precision + recall
    f1 = np.divide(2 * precision * recall, denom, out=np.zeros_like(tp), where=denom > 0)
    return {"precision": precision, "recall": recall, "f1": f1}


def expected_calibration_error(y_true: np.ndarray, proba: np.ndarray, n_bins: int = 15) -> float:
    """Top-label ECE (Guo et al. 2017): equal-width confidence bins, weighted mean of
    |accuracy - mean confidence| per bin."""
    if len(y_true) == 0:
        return float("nan")
    confidence = proba.max(axis=1).astype(np.float64)
    correct = (proba.argmax(axis=1) == np.asarray(y_true)).astype(np.float64)
    bins = np.minimum((confidence * n_bins).astype(np.int64), n_bins - 1)
    count = np.bincount(bins, minlength=n_bins).astype(np.float64)
    acc_sum = np.bincount(bins, weights=correct, minlength=n_bins)
    conf_sum = np.bincount(bins, weights=confidence, minlength=n_bins)
    return float(np.abs(acc_sum - conf_sum).sum() / len(y_true))


def classification_summary(y_true: np.ndarray, proba: np.ndarray, classes: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """Everything the report prints for one slice of examples, JSON-ready."""
    K = len(classes)
    y_true = np.asarray(y_true, dtype=np.int64)
    y_pred = proba.argmax(axis=1) if len(y_true) else np.zeros(0, dtype=np.int64)
    confusion = confusion_matrix(y_true, y_pred, K)
    prf = precision_recall_f1(confusion)
    n = int(len(y_true))
    return {
        "examples": n,
        "accuracy": float(np.trace(confusion) / n) if n else float("nan"),
        "classes": list(classes),
        "confusion": confusion.tolist(),   # [true][predicted] counts
        "precision": prf["precision"].tolist(),
        "recall": prf["recall"].tolist(),
        "f1": prf["f1"].tolist(),
        "log_loss": log_loss_of_proba(proba, y_true),
        "ece": expected_calibration_error(y_true, proba),
    }
