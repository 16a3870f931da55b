"""Temperature scaling: one scalar that makes softmax(scores / T) a calibrated posterior.

Moses consumes log-probabilities, so a family whose scores are margins (the SVM) needs
its softmax calibrated. One temperature keeps the argmax (accuracy is unchanged) and is
folded into the exported weights, so serving stays a plain softmax.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize_scalar

from training.probability import log_loss, log_softmax


def fit_temperature(scores: np.ndarray, y: np.ndarray, bounds: tuple[float, float] = (1e-2, 1e2)) -> float:
    """Minimise the held-out log-loss over log T (bounded Brent); 1.0 without data."""
    y = np.asarray(y, dtype=np.int64)
    if len(y) == 0:
        return 1.0
    res = minimize_scalar(lambda log_t: log_loss(log_softmax(np.asarray(scores, dtype=np.float64) / float(np.exp(log_t))), y, None),
                          bounds=(np.log(bounds[0]), np.log(bounds[1])), method="bounded",
                          options={"xatol": 1e-4})
    return float(np.exp(res.x))
