"""Classification metrics on arrays: what the evaluation report is made of.

Accuracy, the confusion matrix and per-class precision/recall/F1 (the SVM paper's
Tables 4-6), log-loss (Moses consumes log-probabilities, so calibration matters as
much as the argmax) and expected calibration error. Inputs are plain numpy arrays;
this module must not know about models, stores or files.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from training.probability import LOG_FLOOR

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


ECE_BINS = 15


def expected_calibration_error(y_true: np.ndarray, proba: np.ndarray, n_bins: int = ECE_BINS) -> float:
    """Top-label ECE (Guo et al. 2017): equal-width confidence bins, weighted mean of
    |accuracy - mean confidence| per bin."""
    if len(y_true) == 0:
        return float("nan")
    _, acc_sum, conf_sum = _ece_bins(y_true, proba, n_bins)
    return float(np.abs(acc_sum - conf_sum).sum() / len(y_true))


def _ece_bins(y_true: np.ndarray, proba: np.ndarray, n_bins: int) -> tuple[np.ndarray, ...]:
    confidence = proba.max(axis=1).astype(np.float64) if len(y_true) else np.zeros(0)
    correct = (proba.argmax(axis=1) == np.asarray(y_true)).astype(np.float64) if len(y_true) else np.zeros(0)
    bins = np.minimum((confidence * n_bins).astype(np.int64), n_bins - 1)
    count = np.bincount(bins, minlength=n_bins).astype(np.float64)
    acc_sum = np.bincount(bins, weights=correct, minlength=n_bins)
    conf_sum = np.bincount(bins, weights=confidence, minlength=n_bins)
    return count, acc_sum, conf_sum


def slice_totals(y_true: np.ndarray, proba: np.ndarray, n_classes: int) -> dict[str, np.ndarray]:
    """The sums a summary is made of, for some examples of a slice: add the totals of
    several parts (`add_totals`) and summarise once (`summary_of_totals`), so a slice
    can be scored a chunk at a time."""
    y_true = np.asarray(y_true, dtype=np.int64)
    y_pred = proba.argmax(axis=1) if len(y_true) else np.zeros(0, dtype=np.int64)
    _, acc_sum, conf_sum = _ece_bins(y_true, proba, ECE_BINS)
    with np.errstate(divide="ignore"):
        picked = np.log(np.asarray(proba, dtype=np.float64)[np.arange(y_true.size), y_true])
    return {"confusion": confusion_matrix(y_true, y_pred, n_classes),
            "nll": np.array([-np.maximum(picked, LOG_FLOOR).sum()]),
            "ece_acc": acc_sum, "ece_conf": conf_sum}


def add_totals(a: dict[str, np.ndarray] | None, b: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return dict(b) if a is None else {name: a[name] + b[name] for name in a}


def summary_of_totals(totals: dict[str, np.ndarray], classes: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """Everything the report prints for one slice, JSON-ready, from its totals."""
    confusion = totals["confusion"]
    prf = precision_recall_f1(confusion)
    n = int(confusion.sum())
    return {
        "examples": n,
        "accuracy": float(np.trace(confusion) / n) if n else float("nan"),
        "classes": list(classes),
        "confusion": confusion.tolist(),   # [true][predicted] counts
        "precision": prf["precision"].tolist(),
        "recall": prf["recall"].tolist(),
        "f1": prf["f1"].tolist(),
        "log_loss": float(totals["nll"][0] / n) if n else float("nan"),
        "ece": float(np.abs(totals["ece_acc"] - totals["ece_conf"]).sum() / n) if n else float("nan"),
    }


def classification_summary(y_true: np.ndarray, proba: np.ndarray, classes: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """Everything the report prints for one slice of examples, JSON-ready."""
    return summary_of_totals(slice_totals(y_true, proba, len(classes)), classes)
