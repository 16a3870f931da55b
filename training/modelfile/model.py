"""Models as the server sees them: write one weight file, load it, score PairBatches.

`write_model` records every setting extraction needs next to the arrays; `load_model`
maps the file, checks that those settings are ones this software can reproduce (hash
scheme, feature spec, link, shapes) and builds the key index once, so scoring is
keys -> rows -> per-output sums + bias -> link, all in numba with the GIL released.
This module must not train anything or branch on the family: the link does the
family-specific part.

Arrays of a model file: `keys` uint64 [F] strictly increasing, `weights` [F x outputs]
float32 or float16, `bias` float32 [outputs], plus any family extras.
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numba as nb
import numpy as np

from training import __version__
from training.features.batch import PairBatch, pair_slice
from training.errors import MosesReorderError, ModelFileError
from training.features.templates import extract_keys, key_bounds
from training.features.spec import FeatureSpec
from training.features.hashing import HASH_SCHEME
from training.features.keytable import KeyIndex, find_row
from training.modelfile.links import LINKS, softmax_blocks
from training.moses.types import MosesType
from training.modelfile.container import read_weight_file, write_weight_file

MODEL_FORMAT = "moses-reorder-model"
# Every model file's metadata has these; write_model fills them.
REQUIRED_METADATA = ("format", "family", "link", "moses_type", "classes", "directions", "outputs",
                     "features", "hash_scheme", "threshold", "n_features", "weights_dtype", "trainer",
                     "hyperparameters", "corpus_fingerprint", "training_seconds", "software_version",
                     "created_at")


def write_model(path: str | os.PathLike, *, family: str, moses_type: str, keys: np.ndarray,
                weights: np.ndarray, bias: np.ndarray, features: str | FeatureSpec, threshold: int,
                link: str = "softmax", trainer: str | None = None,
                hyperparameters: dict[str, Any] | None = None, corpus_fingerprint: str = "",
                training_seconds: float = 0.0, extras: dict[str, np.ndarray] | None = None,
                float16: bool = False, metadata: dict[str, Any] | None = None) -> str:
    """Validate and write one model file (atomically); return its SHA-256. What cannot be
    written is a ModelFileError (exit 4) naming the file, never a half-written file.

    `weights` columns are the Moses type's outputs (backward block first). `metadata`
    adds family-specific entries (e.g. a lexical model's smoothing).
    """
    mtype = MosesType.parse(moses_type)
    spec = features if isinstance(features, FeatureSpec) else FeatureSpec.parse(features)
    if link not in LINKS:
        raise ModelFileError(f"unknown link {link!r} (registered: {', '.join(sorted(LINKS))})", path)
    keys = np.ascontiguousarray(keys, dtype=np.uint64)
    n_out = len(mtype.outputs)
    weights = np.asarray(weights)
    bias = np.asarray(bias, dtype=np.float32)
    if keys.ndim != 1 or (keys.shape[0] > 1 and not np.all(keys[1:] > keys[:-1])):
        raise ModelFileError("keys must be a strictly increasing uint64 vector", path)
    if weights.shape != (keys.shape[0], n_out) or bias.shape != (n_out,):
        raise ModelFileError(f"weights {weights.shape} / bias {bias.shape} do not match {keys.shape[0]} keys "
                             f"x {n_out} outputs of {mtype}", path)
    if not (np.isfinite(weights).all() and np.isfinite(bias).all()):
        raise ModelFileError("weights or bias contain NaN or infinity (the training diverged: see its "
                             "hyper-parameters)", path)
    weights = weights.astype(np.float16 if float16 else np.float32)
    if float16 and not np.all(np.isfinite(weights)):
        raise ModelFileError("weights overflow float16; write them as float32", path)
    meta: dict[str, Any] = dict(metadata or {})
    meta.update({
        "format": MODEL_FORMAT, "family": family, "link": link, "moses_type": str(mtype),
        "classes": list(mtype.classes), "directions": list(mtype.directions),
        "outputs": list(mtype.outputs), "features": spec.name, "hash_scheme": HASH_SCHEME,
        "threshold": int(threshold), "n_features": int(keys.shape[0]),
        "weights_dtype": "float16" if float16 else "float32", "trainer": trainer or family,
        "hyperparameters": hyperparameters or {}, "corpus_fingerprint": corpus_fingerprint,
        "training_seconds": float(training_seconds), "software_version": __version__,
        "created_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    })
    arrays = dict(extras or {})
    for name in ("keys", "weights", "bias"):
        if name in arrays:
            raise ModelFileError(f"extra array {name!r} clashes with a model array", path)
    arrays.update(keys=keys, weights=weights, bias=bias)
    return write_weight_file(path, meta, arrays)


# float16 bit pattern -> float32, so float16 weights are read with one table lookup.
_HALF_TO_FLOAT = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32)


@nb.njit(nogil=True, cache=True)
def _score(indptr, query, keys, slots, weights, lut, bias, out, n_found):
    """out[p] = bias + sum of the weight rows of pair p's known keys.

    float32 weights come with lut=None; float16 weights come as their uint16 bit patterns
    with lut = the float32 value of every pattern (numba prunes the branch not taken).
    """
    mask = np.uint64(slots.shape[0] - 1)
    n_out = bias.shape[0]
    for p in range(indptr.shape[0] - 1):
        for j in range(n_out):
            out[p, j] = bias[j]
        found = 0
        for i in range(indptr[p], indptr[p + 1]):
            r = find_row(keys, slots, mask, query[i])
            if r >= 0:
                found += 1
                for j in range(n_out):
                    if lut is None:
                        out[p, j] += weights[r, j]
                    else:
                        out[p, j] += lut[weights[r, j]]
        n_found[p] = found


@dataclass(eq=False)
class LoadedModel:
    """A validated model file, ready to score. Immutable once built; safe to share across threads."""

    path: str
    metadata: dict[str, Any]
    arrays: dict[str, np.ndarray]
    spec: FeatureSpec
    moses_type: str
    classes: tuple[str, ...]
    directions: tuple[str, ...]
    outputs: tuple[str, ...]
    family: str
    link_name: str
    format_version: int
    file_size: int
    sha256: str
    _index: KeyIndex = field(repr=False)

    @property
    def keys(self) -> np.ndarray:
        return self.arrays["keys"]

    @property
    def weights(self) -> np.ndarray:
        return self.arrays["weights"]

    @property
    def bias(self) -> np.ndarray:
        return self.arrays["bias"]

    @property
    def n_features(self) -> int:
        return int(self.keys.shape[0])

    @property
    def index_nbytes(self) -> int:
        return self._index.nbytes

    @property
    def has_context(self) -> bool:
        """Whether the model conditions on the phrase placed next to each pair (neighbour
        features): its probabilities then need that phrase, and a server answers with
        `context_blocks` instead."""
        return bool(self.spec.neighbour)

    def scores(self, indptr: np.ndarray, keys: np.ndarray, bias: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Per-output sums (+ bias) for each row of a key CSR, and how many keys were known."""
        n = indptr.shape[0] - 1
        out = np.empty((n, len(self.outputs)), dtype=np.float32)
        n_found = np.empty(n, dtype=np.int32)
        w = self.weights
        b = self.bias if bias else np.zeros_like(self.bias)
        if w.dtype == np.float16:
            _score(indptr, keys, self.keys, self._index.slots, w.view(np.uint16), _HALF_TO_FLOAT, b,
                   out, n_found)
        else:
            _score(indptr, keys, self.keys, self._index.slots, w, None, b, out, n_found)
        return out, n_found

    def predict_proba_keys(self, indptr: np.ndarray, keys: np.ndarray) -> np.ndarray:
        scores, n_found = self.scores(indptr, keys)
        return LINKS[self.link_name](self, scores, n_found)

    def predict_proba(self, batch: PairBatch) -> np.ndarray:
        """float32 [n_pairs x n_outputs], Moses's column order; each direction block sums to 1.
        A context model's probabilities need each pair's neighbour: `predict_proba_next_to`."""
        if self.has_context:
            raise ValueError(f"{self.spec.name} conditions on the neighbouring phrase: use predict_proba_next_to "
                             "or context_blocks")
        indptr, keys = extract_keys(batch, self.spec)
        return self.predict_proba_keys(indptr, keys)

    def neighbour_scores(self, tgt: np.ndarray, src: np.ndarray, direction: str) -> np.ndarray:
        """What neighbours (their boundary words) add to the scores of `direction`'s block:
        [n x n_outputs], the other direction's columns zero."""
        from training.features.neighbour import BACKWARD, FORWARD, KEYS_PER_NEIGHBOUR, neighbour_keys

        keys = neighbour_keys(tgt, src, BACKWARD if direction == "backward" else FORWARD).reshape(-1)
        indptr = np.arange(0, keys.shape[0] + 1, KEYS_PER_NEIGHBOUR, dtype=np.int64)
        out, _ = self.scores(indptr, keys, bias=False)
        K, d = len(self.classes), self.directions.index(direction)
        out[:, :d * K] = 0.0
        out[:, (d + 1) * K:] = 0.0
        return out

    def context_blocks(self, batch: PairBatch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A context model's answer for one sentence (proto ScoreResponse): each pair's own
        scores [n x outputs] (bias in, before the softmax), what it adds as a neighbour
        [n x outputs] (backward columns from its last target word, forward from its first)
        and what the sentence edges add [outputs]."""
        both = self._own_and_neighbour(batch)
        K = len(self.outputs)
        return both[:, :K], both[:, K:], self._boundary()

    def _own_and_neighbour(self, batch: PairBatch) -> np.ndarray:
        from training.features.neighbour import BACKWARD, FORWARD, pair_boundary_words

        own, _ = self.scores(*extract_keys(batch, self.spec.pair_spec))
        neighbour = np.zeros_like(own)
        for direction in self.directions:
            d = BACKWARD if direction == "backward" else FORWARD
            neighbour += self.neighbour_scores(*pair_boundary_words(batch, d), direction)
        return np.concatenate([own, neighbour], axis=1)

    def _boundary(self) -> np.ndarray:
        from training.features.neighbour import BACKWARD, FORWARD, edge_words

        boundary = np.zeros(len(self.outputs), dtype=np.float32)
        for direction in self.directions:
            d = BACKWARD if direction == "backward" else FORWARD
            boundary += self.neighbour_scores(*edge_words(d), direction)[0]
        return boundary

    def predict_proba_next_to(self, batch: PairBatch, neighbours: dict[str, tuple[np.ndarray, np.ndarray]]
                              ) -> np.ndarray:
        """A context model's probabilities [n x outputs] when each pair's neighbour in each
        direction is known: `neighbours[direction]` = (target word hashes, source word
        hashes) [n] (training/features/neighbour.py: gold_neighbour_words for the reference's)."""
        own, _ = self.scores(*extract_keys(batch, self.spec.pair_spec))
        for direction in self.directions:
            own += self.neighbour_scores(*neighbours[direction], direction)
        return softmax_blocks(own, len(self.classes))

    def key_bounds(self, batch: PairBatch) -> np.ndarray:
        """Cumulative upper bounds of the batch's feature keys under this model's features
        (training.features.templates.key_bounds): what scoring it will cost, known before it starts."""
        return key_bounds(batch, self.spec)

    def predict_proba_sliced(self, batch: PairBatch, bounds: np.ndarray, slice_keys: int,
                             keep_going: Callable[[], bool]) -> np.ndarray | None:
        """`predict_proba` (same answers) in slices of consecutive pairs of at most about
        `slice_keys` keys each (`bounds` from `key_bounds`), asking `keep_going()` before
        each slice; None as soon as it says no. A server scores this way so a request whose
        client gave up, or a server that is shutting down, stops within one slice."""
        return self._sliced(batch, bounds, slice_keys, keep_going, self.predict_proba, len(self.outputs))

    def context_blocks_sliced(self, batch: PairBatch, bounds: np.ndarray, slice_keys: int,
                              keep_going: Callable[[], bool]) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """`context_blocks` (same answers) in slices, as `predict_proba_sliced`."""
        own = self._sliced(batch, bounds, slice_keys, keep_going, self._own_and_neighbour, 2 * len(self.outputs))
        if own is None:
            return None
        K = len(self.outputs)
        return own[:, :K], own[:, K:], self._boundary()

    def _sliced(self, batch: PairBatch, bounds: np.ndarray, slice_keys: int, keep_going: Callable[[], bool],
                score: Callable[[PairBatch], np.ndarray], width: int) -> np.ndarray | None:
        n = batch.n_pairs
        out = np.empty((n, width), dtype=np.float32)
        start = 0
        while start < n:
            if not keep_going():
                return None
            stop = int(np.searchsorted(bounds, bounds[start] + slice_keys, side="right")) - 1
            stop = min(max(stop, start + 1), n)
            out[start:stop] = score(pair_slice(batch, start, stop))
            start = stop
        return out

    def summary(self) -> dict[str, Any]:
        """What `inspect` and the server's GetModel report."""
        return {
            "path": self.path, "file_size": self.file_size, "sha256": self.sha256,
            "format_version": self.format_version, "n_features": self.n_features,
            "arrays": {name: {"dtype": str(a.dtype), "shape": list(a.shape), "nbytes": int(a.nbytes)}
                       for name, a in sorted(self.arrays.items())},
            "index_nbytes": self.index_nbytes, "metadata": self.metadata,
        }


def _check(ok: bool, path: str, message: str) -> None:
    if not ok:
        raise ModelFileError(message, path)


def _is_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# The JSON type of every metadata field that software reading a model file relies on
# (the loader, links, `inspect`, `evaluate`): a file whose checksum is right can still have
# been written by something else, and a wrong type must be a ModelFileError naming the
# field, not a TypeError deep inside. Optional fields are checked when present.
METADATA_TYPES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "format": (lambda v: isinstance(v, str), "a string"),
    "family": (lambda v: isinstance(v, str), "a string"),
    "link": (lambda v: isinstance(v, str), "a string"),
    "moses_type": (lambda v: isinstance(v, str), "a string"),
    "classes": (_is_str_list, "a list of strings"),
    "directions": (_is_str_list, "a list of strings"),
    "outputs": (_is_str_list, "a list of strings"),
    "features": (lambda v: isinstance(v, str), "a string"),
    "hash_scheme": (lambda v: isinstance(v, str), "a string"),
    "threshold": (_is_int, "an integer"),
    "n_features": (_is_int, "an integer"),
    "weights_dtype": (lambda v: v in ("float32", "float16"), '"float32" or "float16"'),
    "trainer": (lambda v: isinstance(v, str), "a string"),
    "hyperparameters": (lambda v: isinstance(v, dict), "an object"),
    "corpus_fingerprint": (lambda v: isinstance(v, str), "a string"),
    "training_seconds": (_is_number, "a number"),
    "software_version": (lambda v: isinstance(v, str), "a string"),
    "created_at": (lambda v: isinstance(v, str), "a string"),
    "training": (lambda v: isinstance(v, dict), "an object"),  # optional: what the trainer reported
}


def _check_metadata_types(meta: dict[str, Any], path: str) -> None:
    for name, (ok, what) in METADATA_TYPES.items():
        if name in meta and not ok(meta[name]):
            raise ModelFileError(f"metadata field {name!r} must be {what}, is {type(meta[name]).__name__} "
                                 f"{_short(meta[name])}", path)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def load_model(path: str | os.PathLike, warm_up: bool = True) -> LoadedModel:
    """Map, verify and index a model file; ModelFileError for anything we cannot serve exactly.

    `warm_up` scores one tiny request through the serving path, so numba's compilation
    (or cache load) happens here, before a server swaps the model in, not on a live request,
    and checks the answer (see `_warm_up`).
    """
    wf = read_weight_file(path)
    meta, arrays, p = wf.metadata, wf.arrays, wf.path
    missing = [k for k in REQUIRED_METADATA if k not in meta]
    _check(not missing, p, f"not a model file: metadata lacks {', '.join(missing)}")
    _check_metadata_types(meta, p)
    _check(meta["format"] == MODEL_FORMAT, p, f"metadata format {meta['format']!r} is not {MODEL_FORMAT!r}")
    _check(meta["hash_scheme"] == HASH_SCHEME, p,
           f"feature hash scheme {meta['hash_scheme']!r} differs from this software's {HASH_SCHEME!r}; "
           "retrain the model or use the version that wrote it")
    _check(meta["link"] in LINKS, p,
           f"link {meta['link']!r} is unknown to this software (known: {', '.join(sorted(LINKS))})")
    try:
        spec = FeatureSpec.parse(meta["features"])
        mtype = MosesType.parse(meta["moses_type"])
    except MosesReorderError as exc:
        raise ModelFileError(f"metadata: {exc}", p) from exc
    _check(list(mtype.outputs) == meta["outputs"] and list(mtype.classes) == meta["classes"]
           and list(mtype.directions) == meta["directions"], p,
           "metadata outputs/classes/directions disagree with its Moses type")
    for name in ("keys", "weights", "bias"):
        _check(name in arrays, p, f"model array {name!r} is missing")
    keys, weights, bias = arrays["keys"], arrays["weights"], arrays["bias"]
    n_out = len(mtype.outputs)
    _check(keys.dtype == np.uint64 and keys.ndim == 1, p, "keys must be a uint64 vector")
    _check(weights.dtype in (np.float32, np.float16) and weights.shape == (keys.shape[0], n_out), p,
           f"weights must be float32/float16 [{keys.shape[0]} x {n_out}], are {weights.dtype} {weights.shape}")
    _check(bias.dtype == np.float32 and bias.shape == (n_out,), p, f"bias must be float32 [{n_out}]")
    _check(keys.shape[0] < 2 or bool(np.all(keys[1:] > keys[:-1])), p, "keys are not strictly increasing")
    _check(meta["n_features"] == keys.shape[0], p, "metadata n_features disagrees with the keys array")
    _check(bool(np.isfinite(weights).all() and np.isfinite(bias).all()), p, "weights or bias are NaN or infinite")
    model = LoadedModel(
        path=p, metadata=meta, arrays=arrays, spec=spec, moses_type=str(mtype), classes=mtype.classes,
        directions=mtype.directions, outputs=mtype.outputs, family=meta["family"], link_name=meta["link"],
        format_version=wf.format_version, file_size=wf.file_size, sha256=wf.sha256, _index=KeyIndex(keys))
    if warm_up:
        _warm_up(model)
    return model


def _warm_up(model: LoadedModel) -> None:
    """Score one one-word pair through the serving path (request arrays -> PairBatch -> keys
    -> scores -> link) and check the answer: one finite row of the model's outputs whose
    every direction block sums to 1. ModelFileError naming the file otherwise, so a model
    that would answer nonsense is refused before it serves a single request."""
    from training.modelfile.request import batch_from_strings

    p = model.path
    batch = batch_from_strings(["a", "b"], [(0, 1, ["x"], [(0, 0)])])
    if model.has_context:
        _check(model.link_name == "softmax", p, f"a model with {model.spec.name} must use the softmax link")
        own, neighbour, boundary = model.context_blocks(batch)
        probs = softmax_blocks(own + boundary[None, :], len(model.classes))
        _check(bool(np.all(np.isfinite(neighbour))), p, "warm-up neighbour block is not finite")
    else:
        probs = np.asarray(model.predict_proba(batch))
    n_out = len(model.outputs)
    _check(probs.shape == (1, n_out) and bool(np.all(np.isfinite(probs))), p,
           f"warm-up score has shape {probs.shape} (expected (1, {n_out})) or is not finite")
    sums = probs.reshape(len(model.directions), len(model.classes)).sum(axis=1)
    _check(bool(np.allclose(sums, 1.0, atol=1e-3)), p,
           f"warm-up probabilities do not sum to 1 per direction: {sums.tolist()}")
