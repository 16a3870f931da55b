"""The contract every model family implements (scikit-learn's estimator shape).

A family is one module in `training/families/` with one class deriving from
`ReorderingClassifier`. The CLI, the evaluator and the server never branch on the
family: they call `fit`, `predict_proba` and `export`, and a loaded weight file scores
through the link function named by `link`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp


class ReorderingClassifier(ABC):
    """One classifier for one direction: X (CSR, n x F) -> K orientation classes.

    `__init__` stores hyper-parameters only. `fit` learns `coef_` [F x K] float32 and
    `intercept_` [K] and returns self. `history_` (optional) is a list of per-pass dicts
    (pass, active, objective/gap, seconds) for the papers' Figure 1.
    """

    family: ClassVar[str]
    link: ClassVar[str] = "softmax"

    @abstractmethod
    def fit(self, X: sp.csr_matrix, y: np.ndarray) -> "ReorderingClassifier": ...

    @abstractmethod
    def decision_function(self, X: sp.csr_matrix) -> np.ndarray: ...

    def predict_proba(self, X: sp.csr_matrix) -> np.ndarray:
        scores = self.decision_function(X).astype(np.float64)
        scores -= scores.max(axis=1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=1, keepdims=True)
        return scores

    def predict(self, X: sp.csr_matrix) -> np.ndarray:
        return np.argmax(self.decision_function(X), axis=1)

    def get_params(self) -> dict[str, Any]:
        """Hyper-parameters, recorded in the weight file's metadata."""
        return {k: v for k, v in vars(self).items() if not k.endswith("_") and not k.startswith("_")}

    def calibrate(self, X: sp.csr_matrix, y: np.ndarray) -> "ReorderingClassifier":
        """Adjust probabilities on held-out rows (train.py calls it for every family).

        Default: nothing (a likelihood-trained family is calibrated already). A family
        whose scores are margins overrides it and folds the result into export_arrays.
        """
        return self

    def fit_summary(self) -> dict[str, Any]:
        """Family-specific facts about the finished fit for the weight file's metadata."""
        return {}

    def export_arrays(self) -> dict[str, np.ndarray]:
        """Arrays for the weight file: weights [F x K], bias [K], plus family extras."""
        return {"weights": np.asarray(self.coef_, dtype=np.float32),
                "bias": np.asarray(self.intercept_, dtype=np.float32)}
