"""Train one weight file: a Moses type string, a feature set, a family, an example store.

The steps are the same for every family, so nothing here branches on it: resolve the
type (one classifier per direction, backward first), split sentences (held-out tail
for `eval`, then a calibration tail of the training part), build the feature matrix
(training.features.matrix.build_matrix, vocabulary counted on the fit sentences only), fit and
calibrate one classifier per direction, and write the weight file with everything that
reproduces it. The family is looked up in the registry and built from its declared contract
(training.families.base); this
module must not know any family's internals, and families must not know about stores.
"""

from __future__ import annotations

import resource
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from threadpoolctl import threadpool_info, threadpool_limits

from training import __version__
from training.api.checkpoint import DirectionParts, fingerprint
from training.errors import InputError, UsageError
from training.jitcache import compiling
from training import defaults
from training.families import get_family
from training.features.spec import FeatureSpec
from training.modelfile.model import write_model
from training.probability import log_loss, log_softmax
from training.parallel import parse_memory
from training.progress import note
from training.moses.types import MosesType, class_labels, label_source
from training.eval.split import heldout_sentences
from training.store.examples import ExampleStore
from training.features.matrix import build_matrix, csr_view


@dataclass(frozen=True)
class SentenceSplit:
    """Boolean masks over sentences: fit (train the classifiers), calibrate, held out."""

    fit: np.ndarray
    calibrate: np.ndarray
    heldout: np.ndarray

    @classmethod
    def make(cls, n_sentences: int, heldout_fraction: float, calibration_fraction: float) -> "SentenceSplit":
        """Held-out = the last `heldout_fraction` (training.eval.split); calibration = the last
        `calibration_fraction` of what remains; fit = the rest."""
        if not 0.0 <= calibration_fraction < 1.0:
            raise UsageError(f"--calibration-fraction must be in [0, 1), got {calibration_fraction}")
        heldout = heldout_sentences(n_sentences, heldout_fraction)
        train = np.flatnonzero(~heldout)
        n_cal = int(len(train) * calibration_fraction + 0.5)
        calibrate = np.zeros(n_sentences, dtype=bool)
        calibrate[train[len(train) - n_cal:]] = True
        fit = ~heldout & ~calibrate
        if not fit.any():
            raise InputError("no sentences left to train on; lower --heldout-fraction or --calibration-fraction")
        return cls(fit, calibrate, heldout)


# Settings of how a fit runs, not of what it learns: recorded under "training", not as
# hyper-parameters. (The memory budget sizes the solvers' chunks and decides their compact
# copies, which changes the visiting order as a seed does; train records the budget.)
RESOURCE_PARAMS = ("verbose", "memory")


def _run(rows: np.ndarray) -> tuple[int, int] | None:
    """(first, last + 1) when sorted `rows` are one contiguous run, else None."""
    if rows.size and rows[-1] - rows[0] + 1 == rows.size:
        return int(rows[0]), int(rows[-1]) + 1
    return None


def take_rows(values: np.ndarray, rows: np.ndarray | tuple[int, int]) -> np.ndarray:
    """values[rows] (an index array or a range (first, stop)); a contiguous run (the usual
    case) is a view, not a copy."""
    run = rows if isinstance(rows, tuple) else _run(rows)
    return values[run[0]:run[1]] if run else values[rows]


def select_rows(X: sp.csr_matrix, rows: np.ndarray | tuple[int, int]) -> sp.csr_matrix:
    """Rows of X (an index array or a range (first, stop)); a contiguous run (the usual
    case: sentences are in store order) is a view, and one starting at row 0 keeps the
    (mapped) row pointers themselves."""
    run = rows if isinstance(rows, tuple) else _run(rows)
    if run:
        a, b = run
        p0, p1 = int(X.indptr[a]), int(X.indptr[b])
        indptr = X.indptr[a:b + 1] if p0 == 0 else X.indptr[a:b + 1] - p0
        return csr_view(X.data[p0:p1], X.indices[p0:p1], indptr, (b - a, X.shape[1]))
    return X[rows]


def example_range(store: ExampleStore, mask: np.ndarray) -> tuple[int, int]:
    """(first, stop) of the examples of a contiguous run of sentences (SentenceSplit's
    parts are), found from the store's chunk index: no per-example array."""
    chosen = np.flatnonzero(mask)
    if chosen.size == 0:
        return 0, 0
    first, last = int(chosen[0]), int(chosen[-1])
    if last - first + 1 != chosen.size:
        raise InputError("a training split must be a contiguous run of sentences")
    return store.first_example_of(first), store.first_example_of(last + 1)


def drop_zero_rows(keys: np.ndarray, weights: np.ndarray, link: str, extras: dict[str, np.ndarray]
                   ) -> tuple[np.ndarray, np.ndarray, int]:
    """Leave out of the file the keys whose weight row is all zero, where that changes nothing.

    Under the softmax link a key adds its row to the scores and nothing else, so a zero
    row scores exactly like an absent key. Other links also see how many of a pair's keys
    the model knew (n_found), and per-key extras would need the same rows: those files
    keep every key. Returns (keys, weights, number dropped).
    """
    if link != "softmax" or extras:
        return keys, weights, 0
    keep = np.any(weights != 0, axis=1)
    dropped = int(keep.size - np.count_nonzero(keep))
    if dropped == 0:
        return keys, weights, 0
    return keys[keep], weights[keep], dropped


def _check_neighbour(cls, spec: FeatureSpec, select_nmi: str | None) -> None:
    """Neighbour features need a score that splits into the pair's part and the neighbour's
    (training/features/neighbour.py): a plain sum of weights under the softmax link."""
    if cls.link != "softmax" or cls.needs_pair_columns:
        raise UsageError(f"family {cls.family} cannot train {spec.name}: neighbour features need a "
                         "family whose score is a sum of feature weights under the softmax link "
                         "(svm, dual-mlr, maxent, nb-map)")
    if select_nmi is not None:
        raise UsageError(f"--select-nmi cannot select among {spec.name}'s features: "
                         "each direction has its own")


def union_of_directions(keys: list[np.ndarray], exported: list[dict[str, np.ndarray]]
                        ) -> tuple[np.ndarray, list[dict[str, np.ndarray]]]:
    """One key table for directions trained over different keys (each its own neighbour
    features): the sorted union, and each direction's weights placed in its rows (zero
    where it has no such key, which under the softmax link scores as an absent key)."""
    union = keys[0] if len(keys) == 1 else np.union1d(keys[0], keys[1])
    placed = []
    for own, arrays in zip(keys, exported):
        weights = np.zeros((union.shape[0], arrays["weights"].shape[1]), dtype=np.float32)
        weights[np.searchsorted(union, own)] = arrays["weights"]
        placed.append({**arrays, "weights": weights})
    return union, placed


def peak_rss_bytes() -> int:
    """Peak resident memory of this process so far (Linux reports KiB)."""
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        v = float(value)
        return v if np.isfinite(v) else None
    return value


def train_model(store_dir: str | Path, *, family: str, moses_type: str, out: str | Path,
                features: str | None = None, threshold: int | None = None,
                heldout_fraction: float = defaults.HELDOUT_FRACTION, calibration_fraction: float | None = None,
                params: dict[str, Any] | None = None, seed: int = defaults.SEED, float16: bool = False,
                plot: str | Path | None = None, verbose: bool = False, select_nmi: str | None = None,
                blas_threads: int | None = defaults.BLAS_THREADS, jobs: int | None = defaults.JOBS,
                scheduler: str | None = None, memory: int | str | None = defaults.MEMORY) -> dict[str, Any]:
    """Train every direction of `moses_type` and write the weight file `out`; returns its metadata.

    None for `features`, `threshold` or `calibration_fraction` means the family's own
    default, else the project's (training.api.defaults.family_settings). `blas_threads`
    caps the BLAS library's threads while the classifiers fit and calibrate (None: the
    library's own setting); the cap is lifted on return. jobs, scheduler and memory run
    the feature stage (training.features.matrix.build_matrix); memory also sizes the
    dual solvers' chunks and compact copies (families that take a `memory` parameter).
    Each finished direction is kept in `OUT.parts` until `out` is written, and a run with
    the same inputs takes it from there instead of fitting it again (training.api.checkpoint)."""
    if blas_threads is not None and blas_threads < 1:
        raise UsageError(f"blas_threads must be a positive number of threads or None, got {blas_threads}")
    start = time.perf_counter()
    mtype = MosesType.parse(moses_type)
    cls = get_family(family)
    settings = defaults.family_settings(family, mtype.language, features=features, threshold=threshold,
                                        calibration_fraction=calibration_fraction)
    spec, threshold = FeatureSpec.parse(settings.features), settings.threshold
    calibration_fraction = settings.calibration_fraction
    cls.from_params(params)  # refuses an unknown hyper-parameter before any work
    store = ExampleStore.open(store_dir)
    # the store column each direction's labels come from (its own, or a richer one folded)
    columns = [list(store.label_columns)[label_source(store, mtype, d)[0]] for d in mtype.directions]
    labels_of = {d: class_labels(store, mtype, d) for d in mtype.directions}  # InputError if absent
    split = SentenceSplit.make(store.n_sentences, heldout_fraction, calibration_fraction)
    fit_rows, cal_rows = example_range(store, split.fit), example_range(store, split.calibrate)
    n_fit, n_cal = fit_rows[1] - fit_rows[0], cal_rows[1] - cal_rows[0]
    if n_fit == 0:
        raise InputError("the training sentences hold no examples", store_dir)

    if spec.neighbour:
        _check_neighbour(cls, spec, select_nmi)

    t_features = time.perf_counter()
    # One matrix for every direction, except with neighbour features: a row then holds its
    # direction's neighbour (the phrase before, or after), so each direction has its own.
    matrices = {}
    for direction in mtype.directions if spec.neighbour else mtype.directions[:1]:
        matrices[direction] = build_matrix(store, spec, threshold, split.fit, progress=verbose, jobs=jobs,
                                           scheduler=scheduler, memory=memory,
                                           keep_pairs=cls.needs_pair_columns, direction=direction)
    matrix = matrices[mtype.directions[0]]
    feature_seconds = time.perf_counter() - t_features
    if matrix.X.shape[1] == 0:
        raise InputError(f"no feature of {spec.name} occurs more than {threshold} times in the "
                         "training sentences; lower --threshold", store_dir)
    X_fit, X_cal = select_rows(matrix.X, fit_rows), select_rows(matrix.X, cal_rows)
    keys, pair_columns, selection_meta = matrix.keys, matrix.pair_columns, None
    if select_nmi is not None:  # Bayesian paper section 5: keep features by NMI with the class
        from training.features.selection import Selection, select_columns

        rule = Selection.parse(select_nmi)
        fit_labels = [take_rows(labels_of[d], fit_rows).astype(np.int64) for d in mtype.directions]
        keep, nmi = select_columns(X_fit, fit_labels, len(mtype.classes), rule)
        X_fit, X_cal, keys = X_fit[:, keep], X_cal[:, keep], matrix.keys[keep]
        pair_columns = None if pair_columns is None else pair_columns[keep]
        selection_meta = {"rule": str(rule), "kept": int(keep.sum()), "of": int(keep.size),
                          "min_kept_nmi": float(nmi[keep].min()) if keep.any() else None}
        if not keep.any():
            raise InputError(f"--select-nmi {select_nmi}: no feature kept")

    fit_kwargs: dict[str, Any] = {}
    if cls.needs_pair_columns:  # the hybrid: which keys are pairs
        fit_kwargs["pair_columns"] = pair_columns  # build_matrix(keep_pairs) found them

    models, exported, directions_meta = [], [], {}
    parts = DirectionParts(out)
    t_train = time.perf_counter()
    with threadpool_limits(limits=blas_threads, user_api="blas"), compiling() as compile_clock:  # None: no change
        blas_in_force = max((p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"), default=None)
        for direction, column in zip(mtype.directions, columns):
            if direction in matrices and direction != mtype.directions[0]:  # its own neighbour
                X_fit, X_cal = select_rows(matrices[direction].X, fit_rows), select_rows(matrices[direction].X, cal_rows)
            labels = labels_of.pop(direction)  # int8; the calibration rows are widened
            model = cls.from_params(params, n_classes=len(mtype.classes), seed=seed, verbose=verbose,
                                    memory=memory)
            part_print = fingerprint({
                "store": str(Path(store_dir).resolve()), "examples": int(store.n_examples),
                "family": family, "params": {k: v for k, v in model.get_params().items() if k not in RESOURCE_PARAMS},
                "type": str(mtype), "direction": direction, "column": column, "features": spec.name,
                "threshold": threshold, "rows": [fit_rows, cal_rows], "select_nmi": select_nmi,
                "version": __version__}, matrices[direction].keys if spec.neighbour else keys)
            done = parts.load(direction, part_print)
            if done is not None:  # finished by an earlier run that was stopped before the file
                note(f"train {family} {direction}: the fit of an earlier run ({parts.folder})", enabled=verbose)
                exported.append(done[0])
                models.append(model)
                directions_meta[direction] = done[1]
                continue
            note(f"train {family} {direction}: {n_fit:,} examples x {X_fit.shape[1]:,} features",
                 enabled=verbose)
            t0 = time.perf_counter()
            model.fit(X_fit, take_rows(labels, fit_rows), **fit_kwargs)  # int8, a view
            fit_seconds = time.perf_counter() - t0
            info: dict[str, Any] = {"store_column": column, "fit_seconds": fit_seconds,
                                    "history": getattr(model, "history_", [])}
            if n_cal:
                y_cal = take_rows(labels, cal_rows).astype(np.int64)
                before = model.decision_function(X_cal)
                model.calibrate(X_cal, y_cal)
                probs = model.predict_proba(X_cal)
                info["calibration"] = {
                    "examples": int(n_cal),
                    "accuracy": float(np.mean(np.argmax(before, axis=1) == y_cal)),
                    "log_loss_before": log_loss(log_softmax(before), y_cal),
                    "log_loss": log_loss(np.log(np.maximum(probs, 1e-300)), y_cal),
                }
            info["summary"] = model.fit_summary()
            exported.append(model.export_arrays())  # a family may drop its training caches here
            models.append(model)
            directions_meta[direction] = info
            parts.save(direction, part_print, exported[-1], _jsonable(info))
    # numba's one-time compiling (a first run) is not the family's work: recorded apart
    train_seconds = time.perf_counter() - t_train - compile_clock.seconds

    if spec.neighbour:
        keys, exported = union_of_directions([matrices[d].keys for d in mtype.directions], exported)
    arrays = {name: np.concatenate([e[name] for e in exported], axis=-1) for name in exported[0]}
    weights, bias = arrays.pop("weights"), arrays.pop("bias")
    keys, weights, zero_rows = drop_zero_rows(keys, weights, cls.link, arrays)
    corpus = store.meta.get("corpus", {})
    metadata = {
        "training": {
            "store": str(Path(store_dir).resolve()),
            "examples": {"fit": int(n_fit), "calibration": int(n_cal),
                         "heldout": int(store.n_examples - n_fit - n_cal)},
            "sentences": {"fit": int(split.fit.sum()), "calibration": int(split.calibrate.sum()),
                          "heldout": int(split.heldout.sum())},
            "heldout_fraction": heldout_fraction, "calibration_fraction": calibration_fraction,
            "features_distinct": int(matrix.meta.get("n_distinct", 0)) if isinstance(matrix.meta, dict) else 0,
            "feature_seconds": feature_seconds, "train_seconds": train_seconds,
            "compile_seconds": compile_clock.seconds,
            "peak_memory_bytes": peak_rss_bytes(),
            "selection": selection_meta,
            "zero_weight_keys_dropped": zero_rows,
            "blas_threads": blas_in_force,
            "memory_bytes": parse_memory(defaults.MEMORY if memory is None else memory),
            "directions": directions_meta,
        },
    }
    write_model(out, family=family, moses_type=str(mtype), keys=keys, weights=weights, bias=bias,
                features=spec, threshold=threshold, link=cls.link,
                trainer=f"{type(models[0]).__module__}.{type(models[0]).__name__} (moses-reorder {__version__})",
                hyperparameters=_jsonable({k: v for k, v in models[0].get_params().items()
                                            if k not in RESOURCE_PARAMS}),
                corpus_fingerprint=corpus.get("sha256", "") if isinstance(corpus, dict) else str(corpus),
                training_seconds=time.perf_counter() - start, extras=arrays or None, float16=float16,
                metadata=_jsonable(metadata))
    parts.remove()  # the weight file holds every direction now
    if plot is not None:  # after the model is safe: a plot must not cost the training
        from training.eval.historyplot import plot_history

        plot_history({d: info["history"] for d, info in directions_meta.items()}, plot,
                     title=f"{family} {mtype} {spec.name}")
    return metadata
