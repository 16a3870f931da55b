"""Softmax and log-loss in float64, the one copy training and evaluation use.

The server scores through the link functions of training.modelfile.links (numba,
float32, per direction block); everything offline (calibration, the hybrid's backoff,
held-out evaluation) goes through these, so a log-loss in a weight file's metadata and
one printed by `eval` are the same quantity.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

# Moses's floor for ln p (its tables and our served rows use max(ln p, -100)).
LOG_FLOOR = -100.0


def log_softmax(scores: np.ndarray) -> np.ndarray:
    """Row-wise ln softmax(scores) in float64."""
    z = np.asarray(scores, dtype=np.float64)
    return z - logsumexp(z, axis=1, keepdims=True)


def softmax(scores: np.ndarray) -> np.ndarray:
    """Row-wise softmax(scores) in float64."""
    return np.exp(log_softmax(scores))


def log_loss(log_proba: np.ndarray, y: np.ndarray, floor: float | None = LOG_FLOOR) -> float:
    """Mean -ln p(true class) from row-wise log-probabilities; ln p floored at `floor`
    (Moses's -100 by default; None: no floor, as an optimiser wants). NaN for no rows."""
    y = np.asarray(y, dtype=np.int64)
    if y.size == 0:
        return float("nan")
    picked = np.asarray(log_proba, dtype=np.float64)[np.arange(y.size), y]
    if floor is not None:
        picked = np.maximum(picked, floor)
    return float(-picked.mean())


def log_loss_of_proba(proba: np.ndarray, y: np.ndarray) -> float:
    """log_loss of probabilities (a served model's output), ln 0 floored like Moses."""
    y = np.asarray(y, dtype=np.int64)
    if y.size == 0:
        return float("nan")
    with np.errstate(divide="ignore"):
        return log_loss(np.log(np.asarray(proba, dtype=np.float64)[np.arange(y.size), y])[:, None],
                        np.zeros(y.size, dtype=np.int64))
