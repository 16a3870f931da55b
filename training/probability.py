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
    return _mean_nll(np.asarray(log_proba, dtype=np.float64)[np.arange(y.size), y], floor)


def log_loss_of_proba(proba: np.ndarray, y: np.ndarray) -> float:
    """log_loss of probabilities (a served model's output), ln 0 floored like Moses."""
    y = np.asarray(y, dtype=np.int64)
    with np.errstate(divide="ignore"):
        return _mean_nll(np.log(np.asarray(proba, dtype=np.float64)[np.arange(y.size), y]), LOG_FLOOR)


def _mean_nll(log_p: np.ndarray, floor: float | None) -> float:
    """Mean of -max(ln p, floor) over the true classes' ln p; NaN for none."""
    if log_p.size == 0:
        return float("nan")
    return float(-(log_p if floor is None else np.maximum(log_p, floor)).mean())
