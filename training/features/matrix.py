"""Feature vocabulary and the training matrix: keys counted over a store -> CSR X, cached on disk.

`FeatureVocab` keeps the keys seen more than `threshold` times in the training
sentences (the papers keep features seen more than 10 times) and maps a PairBatch to
CSR rows over those keys. `build_matrix` streams a whole example store through it
twice (count, then map) and caches the result under STORE/features/ so that several
trainers reuse one matrix. This module must not extract features itself (it calls
training/features.py) nor know about labels or families.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numba as nb
import numpy as np
import scipy.sparse as sp

from training import __version__
from training.atomic import fsync_directory
from training.features.batch import PairBatch, pair_slice
from training.errors import InputError
from training.npyfile import NpyAppender as _NpyAppender  # noqa: F401 (also the tests' name)
from training.features.templates import extract_keys
from training.features.spec import FeatureSpec
from training.progress import progress as reporter
from training.features.keytable import KeyCounter, KeyIndex, find_row

# Pairs per extraction call: bounds the key buffer (S15 can reach ~1,500 keys for one pair).
SUB_BATCH_PAIRS = 65_536
CACHE_FORMAT = "moses-reorder-features"


def iter_keys(batch: PairBatch, spec: FeatureSpec, size: int = SUB_BATCH_PAIRS) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """extract_keys over bounded slices of a large batch."""
    for lo in range(0, batch.n_pairs, size):
        yield extract_keys(pair_slice(batch, lo, min(lo + size, batch.n_pairs)), spec)


@nb.njit(nogil=True, cache=True)
def _to_columns(indptr, keys, vocab, slots):
    """Keep the known keys of each row; their columns come out ascending (keys and vocab are sorted)."""
    mask = np.uint64(slots.shape[0] - 1)
    n = indptr.shape[0] - 1
    out_ptr = np.empty(n + 1, dtype=np.int64)
    cols = np.empty(keys.shape[0], dtype=np.int32)
    out_ptr[0] = 0
    w = 0
    for p in range(n):
        for i in range(indptr[p], indptr[p + 1]):
            r = find_row(vocab, slots, mask, keys[i])
            if r >= 0:
                cols[w] = r
                w += 1
        out_ptr[p + 1] = w
    return out_ptr, cols[:w].copy()


class FeatureVocab:
    """Kept feature keys (sorted uint64) and the key -> column map.

    `fit` counts; `keys_` are the kept keys, `counts_` their training counts and
    `n_distinct_` how many distinct keys were seen before the threshold.
    """

    def __init__(self, spec: FeatureSpec | str, threshold: int):
        self.spec = spec if isinstance(spec, FeatureSpec) else FeatureSpec.parse(spec)
        if threshold < 0:
            raise InputError(f"threshold must be >= 0, got {threshold}")
        self.threshold = int(threshold)

    def fit(self, batches: Iterable[PairBatch]) -> "FeatureVocab":
        counter = KeyCounter()
        for batch in batches:
            for _, keys in iter_keys(batch, self.spec):
                counter.add(keys)
        keys, counts = counter.items()
        keep = counts > self.threshold
        return self.set_keys(keys[keep], counts[keep], n_distinct=int(keys.shape[0]))

    def set_keys(self, keys: np.ndarray, counts: np.ndarray | None = None, n_distinct: int | None = None
                 ) -> "FeatureVocab":
        """Adopt an existing sorted key vector (a cache or a model file's keys)."""
        self.keys_ = np.ascontiguousarray(keys, dtype=np.uint64)
        self.counts_ = counts
        self.n_distinct_ = int(keys.shape[0]) if n_distinct is None else n_distinct
        self._index = KeyIndex(self.keys_)
        return self

    @property
    def n_features(self) -> int:
        return int(self.keys_.shape[0])

    def transform_keys(self, indptr: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Key CSR -> column CSR (int64 indptr, int32 indices), unknown keys dropped."""
        return _to_columns(indptr, keys, self.keys_, self._index.slots)

    def transform(self, batch: PairBatch) -> sp.csr_matrix:
        """Binary CSR [n_pairs x n_features], float32 ones."""
        parts = [self.transform_keys(*k) for k in iter_keys(batch, self.spec)]
        return _csr(parts, self.n_features)


def _csr(parts: list[tuple[np.ndarray, np.ndarray]], n_features: int) -> sp.csr_matrix:
    """Stack row blocks (indptr, indices) into one CSR with implicit ones."""
    n_rows = sum(p[0].shape[0] - 1 for p in parts)
    nnz = sum(p[1].shape[0] for p in parts)
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    indices = np.empty(nnz, dtype=np.int32)
    row = pos = 0
    for ptr, cols in parts:
        n = ptr.shape[0] - 1
        indptr[row + 1:row + n + 1] = ptr[1:] + pos
        indices[pos:pos + cols.shape[0]] = cols
        row += n
        pos += cols.shape[0]
    return _matrix(indptr, indices, n_features)


def _matrix(indptr: np.ndarray, indices: np.ndarray, n_features: int) -> sp.csr_matrix:
    """CSR over given arrays (often memory-mapped), no copies.

    Every feature is binary, so `data` is one float32 1.0 broadcast to nnz entries (a
    read-only array with stride 0): nnz * 4 bytes that are never allocated or read
    from memory. Code that wants to scale X gets a new matrix, as with any CSR.
    """
    data = np.broadcast_to(np.float32(1.0), (indices.shape[0],))
    X = sp.csr_matrix((data, indices, indptr), shape=(indptr.shape[0] - 1, n_features), copy=False)
    X.has_sorted_indices = True
    return X


@dataclass
class FeatureMatrix:
    """What build_matrix returns. Rows are all store examples, in store order."""

    X: sp.csr_matrix
    keys: np.ndarray
    spec: FeatureSpec
    threshold: int
    meta: dict[str, Any]
    path: Path | None


def cache_name(spec: FeatureSpec, threshold: int, sentence_mask: np.ndarray | None) -> str:
    name = f"{spec.name}-t{threshold}"
    if sentence_mask is not None:
        digest = hashlib.sha256(np.packbits(np.asarray(sentence_mask, dtype=bool)).tobytes()).hexdigest()
        name += f"-m{digest[:12]}"
    return name


def _store_identity(store) -> dict[str, Any]:
    corpus = store.meta.get("corpus", {})
    return {"corpus_sha256": corpus.get("sha256") if isinstance(corpus, dict) else corpus,
            "n_examples": store.n_examples, "n_sentences": store.n_sentences,
            "created_at": store.meta.get("created_at")}


def _load_cache(path: Path, store, spec: FeatureSpec, threshold: int) -> FeatureMatrix | None:
    try:
        meta = json.loads((path / "meta.json").read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return None
    if (meta.get("format") != CACHE_FORMAT or meta.get("store") != _store_identity(store)
            or meta.get("spec") != spec.name or meta.get("threshold") != threshold):
        return None
    arrays = {n: np.load(path / f"{n}.npy", mmap_mode="r", allow_pickle=False) for n in ("keys", "indptr", "indices")}
    X = _matrix(np.asarray(arrays["indptr"]), np.asarray(arrays["indices"]), arrays["keys"].shape[0])
    return FeatureMatrix(X, np.asarray(arrays["keys"]), spec, threshold, meta, path)


def _save_npy(path: Path, array: np.ndarray) -> None:
    with open(path, "wb") as fh:
        np.save(fh, array, allow_pickle=False)
        fh.flush()
        os.fsync(fh.fileno())


def build_matrix(store, spec: FeatureSpec | str, threshold: int,
                 sentence_mask: np.ndarray | None = None, *, cache: bool = True,
                 progress: bool = False) -> FeatureMatrix:
    """X [n_examples x F] over ALL store examples, vocabulary counted on the masked sentences.

    The cache lives in STORE/features/<spec>-t<threshold>[-m<mask digest>]/ and is built
    in a temporary sibling directory and renamed into place, so a crash leaves no half
    cache and two concurrent builders cannot corrupt each other.
    """
    spec = spec if isinstance(spec, FeatureSpec) else FeatureSpec.parse(spec)
    threshold = int(threshold)
    if sentence_mask is not None:
        sentence_mask = np.asarray(sentence_mask, dtype=bool)
        if sentence_mask.shape != (store.n_sentences,):
            raise InputError(f"sentence_mask must have shape ({store.n_sentences},), got {sentence_mask.shape}")
    root = Path(store.path) / "features"
    target = root / cache_name(spec, threshold, sentence_mask)
    if cache:
        found = _load_cache(target, store, spec, threshold)
        if found is not None:
            return found
    started = time.perf_counter()
    chunks = reporter(store.iter_chunks(sentence_mask), total=len(store.meta["chunks"]),
                      desc=f"count {spec.name}", unit="chunk", enabled=progress)
    vocab = FeatureVocab(spec, threshold).fit(chunk.batch for chunk in chunks)
    count_seconds = time.perf_counter() - started
    rows = _column_rows(store, vocab, spec)
    meta = {
        "format": CACHE_FORMAT, "version": 1, "spec": spec.name, "threshold": threshold,
        "store": _store_identity(store), "n_features": vocab.n_features, "n_distinct": vocab.n_distinct_,
        "mask_sentences": None if sentence_mask is None else int(sentence_mask.sum()),
        "count_seconds": round(count_seconds, 3), "software_version": __version__,
    }
    if not cache:
        X = _csr(list(rows), vocab.n_features)
        _check_rows(X.shape[0], store)
        meta.update(nnz=int(X.nnz), seconds=round(time.perf_counter() - started, 3))
        return FeatureMatrix(X, vocab.keys_, spec, threshold, meta, None)
    _write_cache(root, target, vocab, rows, store, meta, started)
    found = _load_cache(target, store, spec, threshold)
    if found is None:
        raise InputError(f"feature cache {target} was written but cannot be read back", store.path)
    return found


def _column_rows(store, vocab: FeatureVocab, spec: FeatureSpec) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(indptr, column indices) of every store example, a sub-batch at a time, in order."""
    expected_first = 0
    for chunk in store.iter_chunks():
        if chunk.examples.shape[0] and int(chunk.examples[0]) != expected_first:
            raise InputError("store chunks are not in example order", store.path)
        expected_first += chunk.examples.shape[0]
        for keys in iter_keys(chunk.batch, spec):
            yield vocab.transform_keys(*keys)


def _check_rows(n_rows: int, store) -> None:
    if n_rows != store.n_examples:
        raise InputError(f"store yielded {n_rows} examples, its metadata says {store.n_examples}", store.path)


def _write_cache(root: Path, target: Path, vocab: FeatureVocab, rows: Iterable[tuple[np.ndarray, np.ndarray]],
                 store, meta: dict, started: float) -> None:
    """Stream the rows into a temporary sibling of `target` and rename it into place.

    Only one sub-batch of rows is in memory at a time: the matrix is never assembled
    here, the trainers map the finished files.
    """
    root.mkdir(exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=root))
    indptr = _NpyAppender(tmp / "indptr.npy", np.int64)
    indices = _NpyAppender(tmp / "indices.npy", np.int32)
    try:
        _save_npy(tmp / "keys.npy", vocab.keys_)
        _save_npy(tmp / "counts.npy", vocab.counts_.astype(np.uint32))
        indptr.append(np.zeros(1, dtype=np.int64))
        for ptr, cols in rows:
            indptr.append(ptr[1:] + indices.count)
            indices.append(cols)
        _check_rows(indptr.count - 1, store)
        indptr.finish()
        indices.finish()
        meta.update(nnz=indices.count, seconds=round(time.perf_counter() - started, 3))
        with open(tmp / "meta.json", "w", encoding="utf-8") as fh:
            fh.write(json.dumps(meta, indent=2) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        if target.exists():  # another builder finished first: same content, keep theirs
            shutil.rmtree(tmp)
            return
        os.rename(tmp, target)
    except BaseException:
        indptr.close()
        indices.close()
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    fsync_directory(root)
