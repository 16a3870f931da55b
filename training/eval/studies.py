"""Studies that train several models on one store: the papers' comparison tables and curves.

- `selection_curve`: the Bayesian paper's Figures 1-2, NMI of every feature and the
  held-out error of naive Bayes as fewer features are kept.
- `run_experiment`: the SVM paper's classification study (Tables 5-6), families x
  feature sets on the held-out split, each model trained by `train_model` into a
  weight file and scored by `evaluate` exactly as `train` and `eval` would.

It owns no algorithm: training is training/api/train.py, scoring training/eval/evaluate.py.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from training.errors import InputError, UsageError
from training.eval.evaluate import evaluate
from training.eval.report import features_label
from training.families import get_family
from training.features.spec import FeatureSpec
from training.moses.types import MosesType, class_labels
from training.features.selection import Selection, feature_nmi
from training.store.examples import ExampleStore
from training.progress import note
from training.api.train import SentenceSplit, select_rows, train_model
from training import defaults
from training.features.matrix import build_matrix

DEFAULT_FRACTIONS = (1.0, 0.75, 0.5, 0.3, 0.2, 0.1, 0.05, 0.02)


def selection_curve(store_dir: str | os.PathLike, features: str, moses_type: str,
                    family: str = "nb-map", threshold: int = defaults.THRESHOLD,
                    fractions: tuple[float, ...] = DEFAULT_FRACTIONS, heldout_fraction: float = defaults.HELDOUT_FRACTION
                    ) -> dict[str, Any]:
    """NMI per feature (first direction) and held-out error per kept fraction.

    Naive Bayes refits in one pass, so the curve costs one count per point.
    """
    if family not in ("nb-map", "nb-bayes"):
        raise UsageError(f"selection curve: family must be nb-map or nb-bayes, not {family}")
    store = ExampleStore.open(store_dir)
    mtype = MosesType.parse(moses_type)
    split = SentenceSplit.make(store.n_sentences, heldout_fraction, 0.0)
    matrix = build_matrix(store, FeatureSpec.parse(features), threshold, split.fit)
    sentence = store.sentence_of_examples()
    fit_rows, test_rows = np.flatnonzero(split.fit[sentence]), np.flatnonzero(split.heldout[sentence])
    y = class_labels(store, mtype, mtype.directions[0]).astype(np.int64)
    X_fit, X_test = select_rows(matrix.X, fit_rows), select_rows(matrix.X, test_rows)
    K = len(mtype.classes)
    nmi = feature_nmi(X_fit, y[fit_rows], K)
    points = []
    for fraction in fractions:
        keep = Selection("fraction", fraction).mask(nmi)
        model = get_family(family)(n_classes=K, temperature_scaling=False).fit(X_fit[:, keep], y[fit_rows])
        error = float(np.mean(model.predict(X_test[:, keep]) != y[test_rows]))
        points.append({"fraction": fraction, "kept": int(keep.sum()),
                       "min_nmi": float(nmi[keep].min()) if keep.any() else None, "error": error})
    return {"features": matrix.spec.name, "family": family, "direction": mtype.directions[0],
            "n_features": int(nmi.size), "nmi": nmi, "points": points}


def checked_families(families: list[str], params: dict[str, dict[str, Any]] | None) -> dict[str, type]:
    """Each family's class, once its hyper-parameters are known to be in range: an unknown
    family or a bad value is a UsageError before the first model trains."""
    classes = {family: get_family(family) for family in families}
    for family, cls in classes.items():
        cls.from_params((params or {}).get(family))
    return classes


def run_experiment(store_dir: str | os.PathLike, out_dir: str | os.PathLike, *, families: list[str],
                   feature_sets: list[str], moses_type: str, threshold: int | None = None,
                   heldout_fraction: float = defaults.HELDOUT_FRACTION, params: dict[str, dict[str, Any]] | None = None,
                   log=print, progress: bool = False) -> list[dict[str, Any]]:
    """Train and evaluate every family x feature set; one row per model (first direction).

    Families with their own feature set (lexical: pair) are trained once, not per set.
    `progress`: the trainers report their stages and passes (training.progress).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    mtype = MosesType.parse(moses_type)
    classes = checked_families(families, params)
    rows: list[dict[str, Any]] = []
    for family, cls in classes.items():
        own = cls.features_by_language is not None or cls.default_features is not None
        for features in ([None] if own else feature_sets):
            settings = defaults.family_settings(family, mtype.language, features=features,
                                                threshold=None if own else threshold)
            name = f"{family}-{FeatureSpec.parse(settings.features).name}".replace(",", "_").replace("=", "")
            path = out_dir / f"{name}.mrw"
            t = time.perf_counter()
            note(f"training {family} on {FeatureSpec.parse(settings.features).name} ...", enabled=progress)
            meta = train_model(store_dir, family=family, moses_type=moses_type, features=settings.features,
                               out=path, threshold=settings.threshold, heldout_fraction=heldout_fraction,
                               calibration_fraction=settings.calibration_fraction,
                               params=(params or {}).get(family, {}), verbose=progress)
            wall = time.perf_counter() - t
            report = evaluate(path, store_dir, heldout_fraction)
            direction = mtype.directions[0]
            result = report["directions"][direction]
            training = meta["training"]
            row = {"family": family, "features": FeatureSpec.parse(settings.features).name, "model": str(path),
                   "seconds": training["train_seconds"],  # fit + calibration, numba's compiling left out
                   "feature_seconds": training["feature_seconds"], "wall_seconds": wall,
                   "peak_memory_bytes": training["peak_memory_bytes"], "direction": direction,
                   "signature": report["signature"], "directions": report["directions"],
                   "split": report["split"], **result}
            rows.append(row)
            log(f"{family:9s} {features_label(row['features']):12s} fit {row['seconds']:7.1f} s  "
                f"acc {result['all']['accuracy']:.4f}"
                f"  seen {result['seen']['accuracy']:.4f}  unseen {result['unseen']['accuracy']:.4f}"
                f"  log-loss {result['all']['log_loss']:.4f}")
    return rows

