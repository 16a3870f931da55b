"""Feature vocabulary and the training matrix: keys counted over a store -> CSR X, cached on disk.

`FeatureVocab` keeps the keys seen more than `threshold` times in the training
sentences (the papers keep features seen more than 10 times) and maps a PairBatch to
CSR rows over those keys. `build_matrix` streams a whole example store through it
twice (count, then map) and caches the result under STORE/features/ so that several
trainers reuse one matrix. This module must not extract features itself (it calls
training/features/templates.py) nor know about labels or families.

Both passes are tasks of the shared runner (training/parallel.py: in-process, local
processes or Dask), over ranges of examples, with memory bounded by `--memory`, never
by the corpus:
- count: each task counts the keys of its range and spills them to disk sorted and
  cut into 2^PARTITION_BITS partitions by their top bits; then each group of
  consecutive partitions (sized to the budget) is merged from every spill, thresholded
  and returned sorted, so the kept keys come out globally sorted in partition order;
- map: each task maps its range to CSR rows over the kept keys; the rows are appended
  to the cache in task order.
Results come back in task order, so the cache is byte-identical for any number of
jobs and on any cluster (the workers must see the store's path).
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
from training.errors import InputError, UsageError
from training.npyfile import NpyAppender
from training.features.templates import extract_keys
from training.features.spec import FeatureSpec
from training.progress import progress as reporter
from training.features.keytable import KeyCounter, KeyIndex, find_row

# Pairs per extraction call: bounds the key buffer (S15 can reach ~1,500 keys for one pair).
SUB_BATCH_PAIRS = 65_536
PARTITION_BITS = 10  # count spills are cut into 1,024 partitions by the keys' top bits
COUNT_READ_EXAMPLES = 4 * SUB_BATCH_PAIRS  # a count task reads its range this many examples at a time
TASK_BYTES_PER_EXAMPLE = 4096  # a task's budget per example (batch, keys, counter): sets the range size
MIN_TASK_EXAMPLES, MAX_TASK_EXAMPLES = 16_384, 1 << 20
MERGE_GROUPS_PER_JOB = 4  # merge tasks per worker (smaller groups balance better; one in-process)
# Examples that pay for a local worker (count + map cost 2-4 us an example, a spawned
# worker ~1.5 s of CPU to start): below 2 of them, one in-process job (parallel.jobs_that_pay).
WORKER_EXAMPLES = 1 << 20
CACHE_FORMAT = "moses-reorder-features"


def distinct_pair_keys(store, sentence_mask: np.ndarray | None = None,
                       step: int = 4 * SUB_BATCH_PAIRS) -> np.ndarray:
    """Sorted unique phrase-pair identity keys (templates.pair_keys) of the masked
    sentences, read `step` examples at a time (never a whole store chunk's batch)."""
    from training.features.templates import pair_keys

    parts = []
    for lo in range(0, store.n_examples, step):
        chunk = store.read_examples(lo, lo + step, sentence_mask)
        if chunk is not None:
            parts.append(np.unique(pair_keys(chunk.batch)))
    return np.unique(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.uint64)


def sorted_members(keys: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """keys (any order) found in sorted_set: np.isin without its sort of both arrays
    (a few GB at Kyoto's 36M keys and 32M pairs), one int64 a key."""
    if sorted_set.shape[0] == 0:
        return np.zeros(keys.shape[0], dtype=bool)
    at = np.minimum(np.searchsorted(sorted_set, keys), sorted_set.shape[0] - 1)
    return sorted_set[at] == keys


def iter_keys(batch: PairBatch, spec: FeatureSpec, size: int = SUB_BATCH_PAIRS) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """extract_keys over bounded slices of a large batch."""
    for lo in range(0, batch.n_pairs, size):
        yield extract_keys(pair_slice(batch, lo, min(lo + size, batch.n_pairs)), spec)


def chunk_keys(store, chunk, spec: FeatureSpec, direction: str | None = None,
               size: int = SUB_BATCH_PAIRS) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The training rows' keys of a store chunk, in bounded slices: its pairs' features, and
    with neighbour features the gold neighbour's in `direction` merged into each row (a
    context model's rows differ by direction, so each direction has its own matrix)."""
    if not spec.neighbour:
        yield from iter_keys(chunk.batch, spec, size)
        return
    from training.features.neighbour import gold_neighbour_words, neighbour_keys, with_neighbour_keys

    d = direction_index(direction)
    extra = neighbour_keys(*gold_neighbour_words(store, chunk.sentence, chunk.tgt_start, chunk.tgt_end, d), d)
    pair = spec.pair_spec
    n = chunk.batch.n_pairs
    for lo in range(0, n, size):
        hi = min(lo + size, n)
        yield with_neighbour_keys(*extract_keys(pair_slice(chunk.batch, lo, hi), pair), extra[lo:hi])


def direction_index(direction: str | None) -> int:
    """training/features/neighbour.py's BACKWARD or FORWARD for a Moses direction name."""
    from training.features.neighbour import BACKWARD, FORWARD

    if direction not in ("backward", "forward"):
        raise UsageError(f"neighbour features are built for one direction, backward or forward (got {direction!r})")
    return BACKWARD if direction == "backward" else FORWARD


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
            raise UsageError(f"threshold must be >= 0, got {threshold}")
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
    return csr_view(data, indices, indptr, (indptr.shape[0] - 1, n_features))


def csr_view(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, shape: tuple[int, int]) -> sp.csr_matrix:
    """A CSR matrix over these arrays (sorted indices), without copying or reading them.

    scipy's constructor casts the row pointers and the indices to one dtype after
    reading them whole to see what fits: below 2^31 entries an int32 copy of the int64
    row pointers (4 bytes a row, resident as long as the matrix: 200 MB at 50M rows) and
    a read of the mapped files that faults them in (RESULTS "Issue 13": 400 MB more peak
    at 52M rows); past it an int64 copy of every int32 column index. So the arrays are
    set after construction (the empty matrix's row pointers are calloc'ed, never
    touched) and stay the mapped int64 row pointers and int32 indices. Our readers
    (features/rowchunks.py) take them as they are; scipy's slicing, products and sums
    take such a matrix and cast what they need per call; `tocoo` does not."""
    X = sp.csr_matrix(shape, dtype=data.dtype)
    X.data, X.indices, X.indptr = data, indices, indptr
    X.has_sorted_indices = True
    return X


@dataclass
class FeatureMatrix:
    """What build_matrix returns. Rows are all store examples, in store order.
    pair_columns: which columns are phrase-pair keys (built with keep_pairs; else None)."""

    X: sp.csr_matrix
    keys: np.ndarray
    spec: FeatureSpec
    threshold: int
    meta: dict[str, Any]
    path: Path | None
    pair_columns: np.ndarray | None = None


def cache_name(spec: FeatureSpec, threshold: int, sentence_mask: np.ndarray | None,
               keep_pairs: bool = False, direction: str | None = None) -> str:
    name = f"{spec.name}-t{threshold}" + ("+pairs" if keep_pairs else "")
    if spec.neighbour:
        name += f"-{direction}"
    if sentence_mask is not None:
        digest = hashlib.sha256(np.packbits(np.asarray(sentence_mask, dtype=bool)).tobytes()).hexdigest()
        name += f"-m{digest[:12]}"
    return name


def _store_identity(store) -> dict[str, Any]:
    corpus = store.meta.get("corpus", {})
    return {"corpus_sha256": corpus.get("sha256") if isinstance(corpus, dict) else corpus,
            "n_examples": store.n_examples, "n_sentences": store.n_sentences,
            "created_at": store.meta.get("created_at")}


def _load_cache(path: Path, store, spec: FeatureSpec, threshold: int, keep_pairs: bool = False,
                direction: str | None = None) -> FeatureMatrix | None:
    try:
        meta = json.loads((path / "meta.json").read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return None
    if (meta.get("format") != CACHE_FORMAT or meta.get("store") != _store_identity(store)
            or meta.get("spec") != spec.name or meta.get("threshold") != threshold
            or bool(meta.get("keep_pairs", False)) != keep_pairs or meta.get("direction") != direction):
        return None
    arrays = {n: np.load(path / f"{n}.npy", mmap_mode="r", allow_pickle=False) for n in ("keys", "indptr", "indices")}
    X = _matrix(np.asarray(arrays["indptr"]), np.asarray(arrays["indices"]), arrays["keys"].shape[0])
    pair_columns = _load_pair_columns(path) if keep_pairs else None
    if keep_pairs and pair_columns is None:
        return None
    return FeatureMatrix(X, np.asarray(arrays["keys"]), spec, threshold, meta, path, pair_columns)


def _load_pair_columns(path: Path) -> np.ndarray | None:
    try:
        return np.load(path / "pair_columns.npy", allow_pickle=False)
    except FileNotFoundError:
        return None


def _save_npy(path: Path, array: np.ndarray) -> None:
    with open(path, "wb") as fh:
        np.save(fh, array, allow_pickle=False)
        fh.flush()
        os.fsync(fh.fileno())


def build_matrix(store, spec: FeatureSpec | str, threshold: int,
                 sentence_mask: np.ndarray | None = None, *, cache: bool = True,
                 progress: bool = False, jobs: int | None = 1, scheduler: str | None = None,
                 memory: int | str | None = None, keep_pairs: bool = False,
                 direction: str | None = None) -> FeatureMatrix:
    """X [n_examples x F] over ALL store examples, vocabulary counted on the masked sentences.

    direction: for a spec with neighbour features, the direction whose gold neighbour each
    row holds (chunk_keys); ignored otherwise.

    keep_pairs: every phrase-pair identity key of the masked sentences is kept whatever
    its count (the spec must hold the `pair` template), the other keys by the threshold.
    The hybrid keys every seen pair but gives weight only to base features above its
    threshold; at threshold 0 for everything, Kyoto's S6,pair kept 273M keys of which
    233M were singleton base features, and the per-column arrays ran it out of memory.

    The cache lives in STORE/features/<spec>-t<threshold>[+pairs][-m<mask digest>]/ and is built
    in a temporary sibling directory and renamed into place, so a crash leaves no half
    cache and two concurrent builders cannot corrupt each other. jobs / scheduler: the
    task runner's (training/parallel.py); memory: the budget (bytes or "4G") that sizes
    the tasks and the merge groups. cache=False builds the same files in a temporary
    directory and returns the matrix in memory.
    """
    from training import defaults
    from training.parallel import jobs_that_pay, parse_memory, resolve_jobs

    spec = spec if isinstance(spec, FeatureSpec) else FeatureSpec.parse(spec)
    threshold = int(threshold)
    if keep_pairs and "pair" not in spec.templates:
        raise UsageError(f"features {spec.name}: keeping every phrase pair needs the pair template")
    if spec.neighbour:
        direction_index(direction)
    else:
        direction = None
    if sentence_mask is not None:
        sentence_mask = np.asarray(sentence_mask, dtype=bool)
        if sentence_mask.shape != (store.n_sentences,):
            raise InputError(f"sentence_mask must have shape ({store.n_sentences},), got {sentence_mask.shape}")
    root = Path(store.path) / "features"
    target = root / cache_name(spec, threshold, sentence_mask, keep_pairs, direction)
    if cache:
        found = _load_cache(target, store, spec, threshold, keep_pairs, direction)
        if found is not None:
            return found
    jobs = jobs_that_pay(resolve_jobs(jobs), store.n_examples, WORKER_EXAMPLES, scheduler)
    plan = _Plan(store, spec, threshold, jobs, scheduler, parse_memory(memory if memory is not None else defaults.MEMORY),
                 keep_pairs, direction)
    if not cache:
        with tempfile.TemporaryDirectory(prefix="features-") as tmp:
            built = _build(plan, Path(tmp) / "matrix", sentence_mask, progress)
            X = _matrix(np.load(built / "indptr.npy"), np.load(built / "indices.npy"),
                        int(np.load(built / "keys.npy", mmap_mode="r").shape[0]))
            keys = np.load(built / "keys.npy")
            meta = json.loads((built / "meta.json").read_text(encoding="utf-8"))
            pair_columns = _load_pair_columns(built) if keep_pairs else None
        return FeatureMatrix(X, keys, spec, threshold, meta, None, pair_columns)
    root.mkdir(exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=root))
    try:
        _build(plan, tmp, sentence_mask, progress)
        if _load_cache(target, store, spec, threshold, keep_pairs, direction) is not None:
            shutil.rmtree(tmp)  # another builder finished first: same content, keep theirs
        else:
            if target.exists():  # a cache this build replaces (e.g. written before pair_columns.npy)
                stale = Path(tempfile.mkdtemp(prefix=f".{target.name}.stale-", dir=root))
                os.rename(target, stale / "old")
                shutil.rmtree(stale)
            os.rename(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    fsync_directory(root)
    found = _load_cache(target, store, spec, threshold, keep_pairs, direction)
    if found is None:
        raise InputError(f"feature cache {target} was written but cannot be read back", store.path)
    return found


@dataclass(frozen=True)
class _Plan:
    """What the tasks of one build share: the store, the features and how to run."""

    store: Any
    spec: FeatureSpec
    threshold: int
    jobs: int
    scheduler: str | None
    memory: int
    keep_pairs: bool = False
    direction: str | None = None

    def ranges(self) -> list[tuple[int, int]]:
        """Example ranges of the tasks: as many examples as a job's share of the budget holds."""
        share = self.memory // max(1, self.jobs)
        size = min(MAX_TASK_EXAMPLES, max(MIN_TASK_EXAMPLES, share // TASK_BYTES_PER_EXAMPLE))
        n = self.store.n_examples
        return [(lo, min(lo + size, n)) for lo in range(0, n, size)] or [(0, 0)]

    @staticmethod
    def run(runner, fn, tasks: list, progress: bool, desc: str):
        return reporter(runner.iter(fn, tasks), total=len(tasks), desc=desc, unit="task", enabled=progress)


def _build(plan: _Plan, out: Path, sentence_mask: np.ndarray | None, progress: bool) -> Path:
    """Count, threshold and map into the directory `out` (created): keys.npy, counts.npy,
    indptr.npy, indices.npy, meta.json. Spills live in out/spill until the merge is done.
    The three rounds of tasks share one pool (workers start once)."""
    from training.parallel import task_runner

    with task_runner(jobs=plan.jobs, scheduler=plan.scheduler) as runner:
        return _build_with(runner, plan, out, sentence_mask, progress)


def _build_with(runner, plan: _Plan, out: Path, sentence_mask: np.ndarray | None, progress: bool) -> Path:
    started = time.perf_counter()
    store, spec = plan.store, plan.spec
    out.mkdir(parents=True, exist_ok=True)
    spill = out / "spill"
    spill.mkdir()
    mask_path = None
    if sentence_mask is not None:
        mask_path = str(spill / "mask.npy")
        _save_npy(Path(mask_path), sentence_mask)
    ranges = plan.ranges()
    count_tasks = [(str(store.path), spec.name, lo, hi, mask_path, str(spill / f"count-{i:05d}"), plan.direction)
                   for i, (lo, hi) in enumerate(ranges)]
    spills = list(plan.run(runner, count_range, count_tasks, progress, f"count {spec.name}"))
    pairs_path = pairs = None
    if plan.keep_pairs:  # sorted; each merge task maps only its own key range of it
        pairs_path = str(spill / "pairs.npy")
        pairs = distinct_pair_keys(store, sentence_mask)
        _save_npy(Path(pairs_path), pairs)
    merge_tasks = _merge_groups(spills, plan.threshold, plan.memory // max(1, plan.jobs),
                                MERGE_GROUPS_PER_JOB * plan.jobs if plan.jobs > 1 or plan.scheduler else 1,
                                pairs_path)
    keys, counts, n_distinct = [], [], 0
    for k, c, d in plan.run(runner, merge_partitions, merge_tasks, progress, "merge"):
        keys.append(k)
        counts.append(c)
        n_distinct += d
    shutil.rmtree(spill)
    keys = np.concatenate(keys) if keys else np.empty(0, dtype=np.uint64)
    _save_npy(out / "keys.npy", keys)
    if pairs is not None:  # which kept keys are pairs: the hybrid's pair_columns, found once here
        _save_npy(out / "pair_columns.npy", sorted_members(keys, pairs))
        del pairs
    _save_npy(out / "counts.npy", np.concatenate(counts).astype(np.uint32) if counts else
              np.empty(0, dtype=np.uint32))
    count_seconds = time.perf_counter() - started
    del keys, counts
    # Workers write their rows to files, which are appended by the kernel: no pickling
    # through the pool's pipes, no copy in this process (in-process tasks return arrays).
    in_process = plan.scheduler is None and plan.jobs == 1
    map_tasks = [(str(store.path), spec.name, str(out / "keys.npy"), lo, hi,
                  None if in_process else str(out / f"map-{i:05d}"), plan.direction)
                 for i, (lo, hi) in enumerate(ranges)]
    indptr = NpyAppender(out / "indptr.npy", np.int64)
    indices = NpyAppender(out / "indices.npy", np.int32)
    try:
        indptr.append(np.zeros(1, dtype=np.int64))
        for ptr, cols in plan.run(runner, map_range, map_tasks, progress, f"map {spec.name}"):
            if isinstance(ptr, str):
                indptr.append(np.load(ptr)[1:].astype(np.int64) + indices.count)
                indices.append_npy(cols)
                os.unlink(ptr)
                os.unlink(cols)
                continue
            indptr.append(ptr[1:].astype(np.int64) + indices.count)  # int32 + int: overflow past 2^31
            indices.append(cols)
        _check_rows(indptr.count - 1, store)
        indptr.finish()
        indices.finish()
    except BaseException:
        indptr.close()
        indices.close()
        raise
    meta = {
        "format": CACHE_FORMAT, "version": 1, "spec": spec.name, "threshold": plan.threshold,
        "keep_pairs": plan.keep_pairs, "direction": plan.direction,
        "store": _store_identity(store), "n_features": int(np.load(out / "keys.npy", mmap_mode="r").shape[0]),
        "n_distinct": n_distinct,
        "mask_sentences": None if sentence_mask is None else int(sentence_mask.sum()),
        "count_seconds": round(count_seconds, 3), "software_version": __version__,
        "nnz": indices.count, "seconds": round(time.perf_counter() - started, 3),
    }
    with open(out / "meta.json", "w", encoding="utf-8") as fh:
        fh.write(json.dumps(meta, indent=2) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    return out


def _open_store(path: str):
    from training.store.examples import ExampleStore

    return ExampleStore.open(path)


def count_range(task: tuple) -> tuple[str, np.ndarray]:
    """Task: count the keys of examples lo..hi-1 (masked sentences only) and spill them.

    The spill (`prefix`.keys.npy / .counts.npy) holds the range's distinct keys sorted
    with their counts; its partition p is [bounds[p], bounds[p+1]). Returns (prefix, bounds).
    The examples are read COUNT_READ_EXAMPLES at a time (never a whole range's batch).
    """
    store_path, spec_name, lo, hi, mask_path, prefix, *rest = task  # rest: (direction,) of neighbour features
    direction = rest[0] if rest else None
    store = _open_store(store_path)
    spec = FeatureSpec.parse(spec_name)
    mask = None if mask_path is None else np.load(mask_path, mmap_mode="r")
    counter = KeyCounter()
    for a in range(lo, hi, COUNT_READ_EXAMPLES):
        chunk = store.read_examples(a, min(a + COUNT_READ_EXAMPLES, hi), mask)
        if chunk is not None:
            for _, keys in chunk_keys(store, chunk, spec, direction):
                counter.add(keys)
    keys, counts = counter.items()
    edges = np.arange(1 << PARTITION_BITS, dtype=np.uint64) << np.uint64(64 - PARTITION_BITS)
    bounds = np.append(np.searchsorted(keys, edges), keys.shape[0]).astype(np.int64)
    _save_npy(Path(prefix + ".keys.npy"), keys)
    _save_npy(Path(prefix + ".counts.npy"), counts)
    return prefix, bounds


def _merge_groups(spills: list[tuple[str, np.ndarray]], threshold: int, budget: int, min_groups: int = 1,
                  pairs_path: str | None = None) -> list[tuple]:
    """Merge tasks: consecutive partitions whose spilled entries fit a quarter of a job's
    budget (12 bytes an entry, sorting needs a few copies), and at least about `min_groups`
    of them so that every worker merges (the kept keys are the same however they are grouped)."""
    return [(spills, lo, hi, threshold, pairs_path)
            for lo, hi in partition_groups(spills, budget // 4 // 12, min_groups)]


def partition_groups(spills: list[tuple[str, np.ndarray]], max_entries: int, min_groups: int = 1
                     ) -> list[tuple[int, int]]:
    """Consecutive partition ranges [lo, hi) of the spills (count_range's (prefix, bounds))
    holding at most `max_entries` spilled entries in all, and at least about `min_groups`
    of them; a single partition larger than that is a group of its own."""
    n_parts = 1 << PARTITION_BITS
    sizes = np.zeros(n_parts, dtype=np.int64)
    for _, bounds in spills:
        sizes += np.diff(bounds)
    limit = max(1, min(max_entries, -(-int(sizes.sum()) // max(1, min_groups))))
    groups, start, total = [], 0, 0
    for p in range(n_parts):
        if total and total + sizes[p] > limit:
            groups.append((start, p))
            start, total = p, 0
        total += int(sizes[p])
    groups.append((start, n_parts))
    return groups


def merge_partitions(task: tuple) -> tuple[np.ndarray, np.ndarray, int]:
    """Task: partitions lo..hi-1 of every spill summed; (kept keys sorted, their counts,
    distinct keys seen) with kept = count > threshold, or a key of the sorted pair keys at
    pairs_path (None: none)."""
    spills, lo, hi, threshold, pairs_path = task
    keys, counts = [], []
    for prefix, bounds in spills:
        a, b = int(bounds[lo]), int(bounds[hi])
        if b > a:
            keys.append(np.array(np.load(prefix + ".keys.npy", mmap_mode="r")[a:b]))
            counts.append(np.array(np.load(prefix + ".counts.npy", mmap_mode="r")[a:b]))
    if not keys:
        return np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.uint32), 0
    keys, counts = np.concatenate(keys), np.concatenate(counts).astype(np.uint64)
    order = np.argsort(keys, kind="stable")
    keys, counts = keys[order], counts[order]
    first = np.flatnonzero(np.concatenate([[True], keys[1:] != keys[:-1]]))
    totals = np.add.reduceat(counts, first)
    keep = totals > threshold
    if pairs_path is not None:
        distinct = keys[first]
        pairs = np.load(pairs_path, mmap_mode="r")
        a = int(np.searchsorted(pairs, distinct[0], side="left"))
        b = int(np.searchsorted(pairs, distinct[-1], side="right"))
        keep |= sorted_members(distinct, np.asarray(pairs[a:b]))
    return keys[first][keep], totals[keep].astype(np.uint32), int(first.shape[0])


_VOCAB: dict[str, FeatureVocab] = {}  # a worker keeps the last vocabulary it mapped with


def map_range(task: tuple) -> tuple[np.ndarray, np.ndarray] | tuple[str, str]:
    """Task: (indptr, column indices) of examples lo..hi-1 over the kept keys at keys_path;
    with an `out` prefix, written to out.indptr.npy / out.indices.npy and their paths returned."""
    store_path, spec_name, keys_path, lo, hi, out, *rest = task
    direction = rest[0] if rest else None
    vocab = _VOCAB.get(keys_path)
    if vocab is None:
        _VOCAB.clear()
        vocab = _VOCAB[keys_path] = FeatureVocab(spec_name, 0).set_keys(np.load(keys_path))
    store = _open_store(store_path)
    chunk = store.read_examples(lo, hi) if hi > lo else None
    if chunk is None:
        ptr, cols = np.zeros(1, dtype=np.int64), np.empty(0, dtype=np.int32)
    else:
        X = _csr([vocab.transform_keys(*k) for k in chunk_keys(store, chunk, vocab.spec, direction)],
                 vocab.n_features)
        ptr, cols = X.indptr, X.indices
    if out is None:
        return ptr, cols
    np.save(out + ".indptr.npy", ptr, allow_pickle=False)
    np.save(out + ".indices.npy", cols, allow_pickle=False)
    return out + ".indptr.npy", out + ".indices.npy"


def _check_rows(n_rows: int, store) -> None:
    if n_rows != store.n_examples:
        raise InputError(f"store yielded {n_rows} examples, its metadata says {store.n_examples}", store.path)
