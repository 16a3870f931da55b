"""The contract every model family implements (scikit-learn's estimator shape).

A family is one module in `training/families/` with one class deriving from
`ReorderingClassifier`, registered by name with `@register` (registry.py). Everything
the training entry point may ask of a family is declared here with its default, so
`training.api` reads attributes instead of probing with getattr/hasattr, and the CLI,
the evaluator and the server never branch on the family: they call `fit`,
`predict_proba` and `export_arrays`, and a loaded weight file scores through the link
function named by `link`. A family must not know about stores, files or the CLI.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from training.constraints import check_params, whole
from training.errors import InputError, UsageError
from training.features.spec import FeatureSpec
from training.families.solvers.sparse import check_Xy
from training.probability import softmax

# Constructor arguments `training.api` fills in itself where a family accepts them.
IMPLIED_PARAMS = ("n_classes", "seed", "verbose", "memory")
# Their accepted values (a family declares the rest in `_parameter_constraints`). The
# memory budget's text ("4G") is read, and refused when below 64M, by training.parallel.
IMPLIED_CONSTRAINTS: dict[str, list] = {"n_classes": [whole(2), None], "seed": [whole(0)], "verbose": [bool],
                                        "memory": [whole(1), str, None]}


class ReorderingClassifier(ABC):
    """One classifier for one direction: X (CSR, n x F) -> K orientation classes.

    `__init__` stores hyper-parameters only. `fit` learns `coef_` [F x K] float32 and
    `intercept_` [K] and returns self. `history_` is a list of per-pass dicts (pass,
    active, objective, seconds) for the papers' Figure 1.
    """

    family: ClassVar[str]
    link: ClassVar[str] = "softmax"
    # Feature set used when the caller gives none; None: the caller must choose.
    default_features: ClassVar[str | None] = None
    # Feature-count threshold and calibration tail of this family; None: the entry
    # point's defaults (training.api.defaults).
    default_threshold: ClassVar[int | None] = None
    default_calibration_fraction: ClassVar[float | None] = None
    # A family whose single feature IS the model's conditioning (lexical: the pair for
    # -fe types, the source phrase for -f types) maps the type's language to that set
    # and trains on nothing else.
    features_by_language: ClassVar[Mapping[str, str] | None] = None
    # The hybrid must know which columns are phrase-pair identities: `fit` then gets
    # `pair_columns=bool[F]`.
    needs_pair_columns: ClassVar[bool] = False
    # The values each hyper-parameter accepts (training.constraints, scikit-learn's shape;
    # the implied ones are IMPLIED_CONSTRAINTS). `from_params` checks them before any
    # work and `check_Xy` again at fit's door, so a family built in code is checked too.
    _parameter_constraints: ClassVar[dict[str, list]] = {}

    # ----- building one from hyper-parameters -----
    @classmethod
    def accepted_params(cls) -> set[str]:
        return set(inspect.signature(cls.__init__).parameters) - {"self"}

    @classmethod
    def default_params(cls) -> dict[str, Any]:
        return {name: p.default for name, p in inspect.signature(cls.__init__).parameters.items()
                if name != "self" and p.default is not inspect.Parameter.empty}

    @classmethod
    def check_params(cls, params: Mapping[str, Any]) -> None:
        """UsageError (exit 2) naming the parameter, its value and its range for the first
        value of `params` (defaults filling the rest) that the family does not accept."""
        values = {**cls.default_params(), **params}
        check_params(f"family {cls.family}", {**IMPLIED_CONSTRAINTS, **cls._parameter_constraints}, values)
        cls.check_together(values)

    @classmethod
    def check_together(cls, values: Mapping[str, Any]) -> None:
        """Conditions between values that a per-parameter range cannot say (default: none)."""

    @classmethod
    def from_params(cls, given: Mapping[str, Any] | None = None, **implied: Any) -> "ReorderingClassifier":
        """An instance from user hyper-parameters `given` (each must exist and be in its
        range) plus the IMPLIED_PARAMS (n_classes, seed, verbose, memory), passed only where
        the family takes them."""
        given = dict(given or {})
        accepted = cls.accepted_params()
        unknown = sorted(set(given) - accepted)
        if unknown:
            raise UsageError(f"family {cls.family} has no hyper-parameter {', '.join(unknown)} "
                             f"(it takes: {', '.join(sorted(accepted))})")
        params = {k: v for k, v in implied.items() if k in accepted and v is not None}
        params.update(given)
        cls.check_params(params)
        return cls(**params)

    @classmethod
    def feature_set(cls, language: str, given: str | None) -> str:
        """The feature set to train on for a type conditioned on `language` (f or fe)."""
        if cls.features_by_language is not None:
            if language not in cls.features_by_language:
                raise UsageError(f"family {cls.family} builds types conditioned on "
                                 f"{' or '.join(sorted(cls.features_by_language))}, not -{language}")
            own = cls.features_by_language[language]
            if given is not None:
                if FeatureSpec.parse(given).name != FeatureSpec.parse(own).name:
                    raise UsageError(f"family {cls.family} with a -{language} type trains on --features "
                                     f"{own} (the table's conditioning), not {given}")
            return own
        if given is not None:
            return given
        if cls.default_features is None:
            raise UsageError(f"--features is required for family {cls.family}")
        return cls.default_features

    # ----- the estimator -----
    def check_Xy(self, X: sp.csr_matrix, y: np.ndarray) -> tuple[sp.csr_matrix, np.ndarray, int]:
        """The one input check at `fit`: the hyper-parameters in range, CSR, integer labels in
        [0, n_classes); (X, y, K)."""
        self.check_params(self.get_params())
        return check_Xy(X, y, getattr(self, "n_classes", None))

    @abstractmethod
    def fit(self, X: sp.csr_matrix, y: np.ndarray) -> "ReorderingClassifier": ...

    @abstractmethod
    def decision_function(self, X: sp.csr_matrix) -> np.ndarray: ...

    def predict_proba(self, X: sp.csr_matrix) -> np.ndarray:
        return softmax(self.decision_function(X))

    def predict(self, X: sp.csr_matrix) -> np.ndarray:
        return np.argmax(self.decision_function(X), axis=1)

    def get_params(self) -> dict[str, Any]:
        """Hyper-parameters, recorded in the weight file's metadata."""
        return {k: v for k, v in vars(self).items() if not k.endswith("_") and not k.startswith("_")}

    def calibrate(self, X: sp.csr_matrix, y: np.ndarray) -> "ReorderingClassifier":
        """Adjust probabilities on held-out rows (training.api calls it for every family).

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
