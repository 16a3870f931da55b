"""Every default of the user-facing entry points, in one place.

The CLI passes None for an option the user did not give, and the API functions fill it
in from here (and from the family's declared contract, training.families.base), so
`moses-reorder train ...` and `training.api.train_model(...)` with the same arguments
write the same model. Facts of Moses (its MAXLEN of 7, its smoothing constant 0.5)
are defined where Moses's behaviour is coded and only named here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from training.corpus.reading import DEFAULT_MAX_SENTENCE_LENGTH as MAX_SENTENCE_LENGTH  # noqa: F401
from training.moses.extract import DEFAULT_MAX_PHRASE_LENGTH as MAX_PHRASE_LENGTH  # noqa: F401
from training.moses.extract import DEFAULT_MODELS as EXTRACT_MODELS  # noqa: F401
from training.moses.table import DEFAULT_SMOOTHING as SMOOTHING  # noqa: F401
from training.store.build import DEFAULT_CHUNK_EXAMPLES as CHUNK_EXAMPLES  # noqa: F401
from training.store.build import DEFAULT_MEMORY as MEMORY  # noqa: F401

JOBS = 0                                     # sharded stages: 0 = every available core

EMBEDDED_CORPUS = Path(__file__).resolve().parent / "data" / "tanaka-3k"
SRC_LANG, TGT_LANG = "ja", "en"

MOSES_TYPE = "hier-msd-bidirectional-fe"     # what pipeline trains and Moses users mostly run
FEATURES = "S7"                              # pipeline's feature set
THRESHOLD = 10                               # keep features seen more than this (the papers)
HELDOUT_FRACTION = 0.1                       # last 10% of sentences left for eval
CALIBRATION_FRACTION = 0.05                  # last 5% of the rest calibrate probabilities
SEED = 0
PIPELINE_OUT = "work/pipeline"

EXPERIMENT_TYPE = "wbe-msd-backward-fe"      # the SVM paper's classification study
EXPERIMENT_FEATURES = "S2,S4,S7"
EXPERIMENT_FAMILIES = "lexical,nb-map,nb-bayes,maxent"
EXPERIMENT_WORK = "experiment-out"


@dataclass(frozen=True)
class FamilySettings:
    """A family's feature set, threshold and calibration tail for one Moses type."""

    features: str
    threshold: int
    calibration_fraction: float


def family_settings(family: str, language: str, *, features: str | None = None, threshold: int | None = None,
                    calibration_fraction: float | None = None) -> FamilySettings:
    """Fill what the caller left None: the family's declared defaults, then the ones above."""
    from training.families import get_family

    cls = get_family(family)
    if threshold is None:
        threshold = THRESHOLD if cls.default_threshold is None else cls.default_threshold
    if calibration_fraction is None:
        calibration_fraction = (CALIBRATION_FRACTION if cls.default_calibration_fraction is None
                                else cls.default_calibration_fraction)
    return FamilySettings(cls.feature_set(language, features), threshold, calibration_fraction)
