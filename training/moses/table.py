"""The lexicalized reordering table: Moses's relative frequencies, from the example store.

`count_pairs` groups the store's examples by phrase pair (or by source phrase for `f`
types) and counts orientation classes per direction, vectorized (numba keys, np.unique,
np.bincount); `probabilities` applies Moses's constant smoothing; `write_table` writes
Moses's reordering-table text, which Moses itself loads. The lexical model family
reuses `count_pairs` and `pair_keys` for the served table, so a table and a served
lexical model can never disagree about what "the same phrase pair" is.

Moses semantics (lexical-reordering/score.cpp, reordering_classes.cpp), each a QUIRK
kept for compatibility (docs/moses-quirks.md):
- p_k = (c_k + s) / sum_j (c_j + s) with the same constant s for every class, including
  classes folded together (msd's disc = dleft + dright + other gets one s, not three).
- Values print like C++ `ostream << double` defaults: `%g`, 6 significant digits.
- Columns: msd mono swap disc; mslr mono swap dleft dright; monotonicity mono nonmono;
  leftright right left; bidirectional = backward block then forward block.
- `f` tables: Moses's scorer sends the `f |||` key to stdout instead of the file (since
  2015), so its own f tables come out keyless and unusable. We write the key (`f ||| p..`),
  which is what the decoder looks up for an `-f` type. Deliberate difference.
- `--SmoothWithCounts` (a smoothing value ending in `u`) is not implemented: refused.
It must not extract, train or serve; it reads a store and writes one table.
"""

from __future__ import annotations

import heapq
import os
import shutil
import tempfile
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import numba as nb
import numpy as np

from training.features import templates as features
from training.atomic import atomic_writer, parents_for
from training.features.batch import PairBatch
from training.errors import InputError, UsageError
from training.features.hashing import combine, finalize, hash_string
from training.moses.text import MosesTextRenderer, unique_rows
from training.moses.types import MosesType, label_source
from training.parallel import DEFAULT_MEMORY, jobs_that_pay, parse_memory, resolve_jobs, task_runner
from training.pgzip import ParallelGzipWriter

DEFAULT_SMOOTHING = 0.5
# Source-phrase keys (f tables) live apart from feature keys.
_F_SEED = hash_string("lexical-source-phrase/v1")


@nb.njit(nogil=True, cache=True)
def _phrase_key(seed, src_tokens, s0, s1, tgt_tokens, t0, t1, with_target):
    """Stable 64-bit identity of a phrase pair (or source phrase) from its token hashes."""
    h = combine(seed, np.uint64(s1 - s0))
    for i in range(s0, s1):
        h = combine(h, src_tokens[i])
    if with_target:
        h = combine(h, np.uint64(t1 - t0))
        for j in range(t0, t1):
            h = combine(h, tgt_tokens[j])
    return finalize(h)


@nb.njit(nogil=True, cache=True)
def _batch_keys(seed, src_tokens, src_offsets, pair_sentence, src_start, src_end, tgt_tokens, tgt_offsets,
                with_target):
    n = pair_sentence.shape[0]
    out = np.empty(n, dtype=np.uint64)
    for i in range(n):
        base = src_offsets[pair_sentence[i]]
        out[i] = _phrase_key(seed, src_tokens, base + src_start[i], base + src_end[i],
                             tgt_tokens, tgt_offsets[i], tgt_offsets[i + 1], with_target)
    return out


@nb.njit(nogil=True, cache=True)
def _first_mismatch(rows, representative_row, src_ids, src_offsets, tgt_ids, tgt_offsets, with_target):
    """Index of the first example whose tokens differ from its group's representative, or -1."""
    for i in range(rows.shape[0]):
        r = representative_row[i]
        a = rows[i]
        b = rows[r]
        if a[2] - a[1] != b[2] - b[1] or (with_target and a[4] - a[3] != b[4] - b[3]):
            return i
        for j in range(a[2] - a[1]):
            if src_ids[src_offsets[a[0]] + a[1] + j] != src_ids[src_offsets[b[0]] + b[1] + j]:
                return i
        if with_target:
            for j in range(a[4] - a[3]):
                if tgt_ids[tgt_offsets[a[0]] + a[3] + j] != tgt_ids[tgt_offsets[b[0]] + b[3] + j]:
                    return i
    return -1


def pair_keys(batch: PairBatch, with_target: bool = True) -> np.ndarray:
    """uint64 identity of every pair of a batch (`with_target=False`: of its source phrase).

    With the target this is `features.pair_keys`, the project's one phrase-pair
    identity, so a served lexical model keyed by it finds the training counts.
    """
    if with_target:
        return features.pair_keys(batch)
    return _batch_keys(_F_SEED, batch.src_tokens, batch.src_offsets, batch.pair_sentence, batch.src_start,
                       batch.src_end, batch.tgt_tokens, batch.tgt_offsets, False)


@dataclass(frozen=True)
class PairCounts:
    """Orientation counts per phrase pair (fe) or source phrase (f)."""

    moses_type: MosesType
    keys: np.ndarray             # uint64 [U], sorted: pair_keys() of each pair
    representative: np.ndarray   # int64 [U], a store example of the pair (its first)
    pair_of_example: np.ndarray  # int64 [n_examples] -> index into keys
    counts: np.ndarray           # float64 [U, n_directions, n_classes]


def _check_token_hashes(store) -> None:
    for vocab, hashes in ((store.src_vocab, store.src_hashes), (store.tgt_vocab, store.tgt_hashes)):
        if np.unique(hashes).size != len(vocab):
            raise InputError("two vocabulary entries share a 64-bit token hash; cannot key phrases",
                             store.path)


def group_pairs(store, keys: np.ndarray, rows: np.ndarray, labels: np.ndarray, moses_type: MosesType
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Examples (in store order) -> (sorted unique keys, index of each key's first example,
    example -> key index, counts float64 [U, D, K]); `labels` int8 [n, D] in the type's
    classes. Refuses a 64-bit key collision (two different phrases under one key)."""
    with_target = moses_type.language == "fe"
    unique, representative, inverse = np.unique(keys, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1).astype(np.int64)
    s = store.sentences
    bad = _first_mismatch(rows, representative[inverse].astype(np.int64), s["src_ids"], s["src_offsets"],
                          s["tgt_ids"], s["tgt_offsets"], with_target)
    if bad >= 0:
        raise InputError(f"64-bit phrase key collision at sentence {rows[bad, 0]}; cannot build the table",
                         store.path)
    n_classes = len(moses_type.classes)
    counts = np.empty((unique.size, len(moses_type.directions), n_classes), dtype=np.float64)
    for d in range(len(moses_type.directions)):
        counts[:, d, :] = np.bincount(inverse * n_classes + labels[:, d],
                                      minlength=unique.size * n_classes).reshape(unique.size, n_classes)
    return unique, representative.astype(np.int64), inverse, counts


def chunk_labels(store, moses_type: MosesType, chunk_labels_array: np.ndarray) -> np.ndarray:
    """A chunk's labels [n, D] in the type's class coding, one column per direction."""
    out = np.empty((chunk_labels_array.shape[0], len(moses_type.directions)), dtype=np.int64)
    for d, direction in enumerate(moses_type.directions):
        column, fold = label_source(store, moses_type, direction)
        labels = chunk_labels_array[:, column]
        out[:, d] = labels if fold is None else fold[labels]
    return out


def count_pairs(store, moses_type: MosesType) -> PairCounts:
    """Count the type's orientation classes per phrase pair and direction, in memory (the
    whole store's keys at once; build_table streams instead)."""
    _check_token_hashes(store)
    with_target = moses_type.language == "fe"
    keys = np.empty(store.n_examples, dtype=np.uint64)
    labels = np.empty((store.n_examples, len(moses_type.directions)), dtype=np.int64)
    for chunk in store.iter_chunks():
        keys[chunk.examples] = pair_keys(chunk.batch, with_target)
        labels[chunk.examples] = chunk_labels(store, moses_type, chunk.labels)
    unique, representative, inverse, counts = group_pairs(store, keys, store.example_rows(), labels, moses_type)
    return PairCounts(moses_type, unique, representative, inverse, counts)


def probabilities(counts: np.ndarray, smoothing: float = DEFAULT_SMOOTHING) -> np.ndarray:
    """Moses's p_k = (c_k + s) / sum_j (c_j + s) per direction; [U, D*K] in Moses's column order."""
    if not smoothing >= 0:
        raise UsageError(f"--smoothing must be a non-negative number, got {smoothing}")
    scores = counts + smoothing
    total = scores.sum(axis=2, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = scores / total
    return p.reshape(counts.shape[0], counts.shape[1] * counts.shape[2])


def format_moses_double(value: float) -> str:
    """C++ `std::ostream << double` with default flags: printf %g, precision 6."""
    return "%g" % value


@nb.njit(nogil=True, cache=True, inline="always")
def _line_less(blob, a0, a1, b0, b1):
    """bytes blob[a0:a1] < blob[b0:b1], as Python compares bytes."""
    for k in range(min(a1 - a0, b1 - b0)):
        x = blob[a0 + k]
        y = blob[b0 + k]
        if x != y:
            return x < y
    return a1 - a0 < b1 - b0


@nb.njit(nogil=True, cache=True)
def _line_starts(blob):
    n = 0
    for b in blob:
        if b == 10:
            n += 1
    starts = np.empty(n + 1, dtype=np.int64)
    starts[0] = 0
    k = 0
    for i in range(blob.shape[0]):
        if blob[i] == 10:
            k += 1
            starts[k] = i + 1
    return starts


@nb.njit(nogil=True, cache=True)
def _prefix_words(blob, starts, n_words):
    """[n_words, lines] uint64: each line's first 8*n_words bytes, big-endian, zero-padded;
    a smaller word tuple means a bytewise smaller line (ties need the full compare)."""
    n = starts.shape[0] - 1
    words = np.zeros((n_words, n), dtype=np.uint64)
    for i in range(n):
        end = starts[i + 1] - 1
        for w in range(n_words):
            value = np.uint64(0)
            for k in range(8):
                p = starts[i] + 8 * w + k
                value = (value << np.uint64(8)) | np.uint64(blob[p] if p < end else 0)
            words[w, i] = value
    return words


@nb.njit(nogil=True, cache=True)
def _merge_sort(blob, starts, order, lo, hi, tmp):
    """Stable bottom-up merge sort of order[lo:hi] (line ids) by the lines' bytes."""
    n = hi - lo
    width = 1
    src = order[lo:hi]
    dst = tmp[lo:hi]
    while width < n:
        for left in range(0, n, 2 * width):
            mid = min(left + width, n)
            right = min(left + 2 * width, n)
            i, j, t = left, mid, left
            while i < mid and j < right:
                a, b = src[i], src[j]
                if _line_less(blob, starts[b], starts[b + 1] - 1, starts[a], starts[a + 1] - 1):
                    dst[t] = b
                    j += 1
                else:
                    dst[t] = a
                    i += 1
                t += 1
            while i < mid:
                dst[t] = src[i]
                i += 1
                t += 1
            while j < right:
                dst[t] = src[j]
                j += 1
                t += 1
        src, dst = dst, src
        width *= 2
    for i in range(n):  # not `order[lo:hi] = src`: that compiles numba's broadcast-error formatting
        order[lo + i] = src[i]


@nb.njit(nogil=True, cache=True)
def _sort_ties(blob, starts, words, order):
    """order is sorted by prefix words; sort each run of equal words by the full lines."""
    n = order.shape[0]
    tmp = np.empty(n, dtype=np.int64)
    lo = 0
    while lo < n:
        hi = lo + 1
        while hi < n:
            same = True
            for w in range(words.shape[0]):
                if words[w, order[hi]] != words[w, order[lo]]:
                    same = False
                    break
            if not same:
                break
            hi += 1
        if hi - lo > 1:
            _merge_sort(blob, starts, order, np.int64(lo), hi, tmp)  # not Literal[int](0): one signature
        lo = hi


@nb.njit(nogil=True, cache=True)
def _gather_lines(blob, starts, order):
    out = np.empty_like(blob)
    pos = 0
    for r in range(order.shape[0]):
        line = order[r]
        for q in range(starts[line], starts[line + 1]):
            out[pos] = blob[q]
            pos += 1
    return out


def sort_lines(blob: np.ndarray) -> np.ndarray:
    """The '\\n'-terminated lines of a byte array, sorted bytewise as Python sorts bytes:
    a lexsort of 24-byte prefixes, then a merge sort of each run of equal prefixes (no
    Python object per line)."""
    starts = _line_starts(blob)
    words = _prefix_words(blob, starts, 3)
    order = np.lexsort(words[::-1]).astype(np.int64)
    _sort_ties(blob, starts, words, order)
    return _gather_lines(blob, starts, order)


def table_lines(store, moses_type: MosesType, keys_first_rows: np.ndarray, probs: np.ndarray,
                renderer: MosesTextRenderer | None = None) -> bytes:
    """Moses's reordering-table lines for pairs given by one example's row each, sorted bytewise."""
    if probs.shape[0] == 0:
        return b""
    combos, tail_index = unique_rows(probs)
    tails = [" ".join(format_moses_double(v) for v in row) for row in combos.tolist()]
    renderer = renderer or MosesTextRenderer(store.corpus_view())
    text = renderer.tailed_lines(keys_first_rows, tails, tail_index, with_target=moses_type.language == "fe")
    return sort_lines(np.frombuffer(text, dtype=np.uint8)).tobytes()


def table_bytes(store, pair_counts: PairCounts, probs: np.ndarray) -> bytes:
    """Moses's reordering-table text of in-memory counts, rows sorted bytewise (Moses's own order)."""
    return table_lines(store, pair_counts.moses_type, store.example_rows()[pair_counts.representative], probs)


@dataclass(frozen=True)
class TableSummary:
    """What build_table wrote: examples counted, table rows, partitions used."""

    moses_type: MosesType
    examples: int
    rows: int
    partitions: int


@dataclass(frozen=True)
class _SpillTask:
    store: str
    moses_type: str
    chunk: int
    spill_dir: str


@dataclass(frozen=True)
class _PartitionTask:
    store: str
    moses_type: str
    partition: int
    smoothing: float
    spill_dir: str
    max_examples: int


#: Bytes a partition task holds per example (records, grouping, rendered and sorted text).
BYTES_PER_EXAMPLE = 200
PARTITION_MIN_EXAMPLES = 250_000
#: Partitions of at most this many examples: smaller ones sort and gather their lines in
#: cache (1.6M examples in 4 partitions took 3.1 s of CPU against 4.3 s in 1; 16M in 33
#: no more than in 7), balance better across workers and leave a shorter .gz tail.
PARTITION_MAX_EXAMPLES = 500_000
#: Examples that pay for a local worker (~1.3 us an example over both passes; a spawned
#: worker costs ~1.5 s to start): below 2 of them, one in-process job (parallel.jobs_that_pay).
WORKER_EXAMPLES = 2_000_000


def _spill_dtype(n_directions: int) -> np.dtype:
    return np.dtype([("key", "<u8"), ("row", "<i4", (5,)), ("label", "i1", (n_directions,))])


def _partition_of_first_token(store, partitions: int) -> np.ndarray:
    """int32 [source vocab]: the partition of phrases starting with each token.

    Partitions are ranges of first tokens in the byte order of `token + ' '`: a table line
    starts with its source phrase, so the lines of partition p all sort before those of
    p+1 and the table is the partitions' sorted lines one after the other. Ranges are cut
    at equal shares of the tokens' corpus frequency (a proxy of their phrase counts)."""
    vocab = store.src_vocab
    src_ids = store.sentences["src_ids"]
    weight = np.zeros(len(vocab), dtype=np.int64)
    for first in range(0, src_ids.shape[0], 1 << 24):
        weight += np.bincount(src_ids[first:first + (1 << 24)], minlength=len(vocab))
    rank_order = sorted(range(len(vocab)), key=lambda i: vocab[i].encode("utf-8") + b" ")
    cumulative = np.cumsum(weight[rank_order]) - weight[rank_order]
    part_in_rank = np.minimum(cumulative * partitions // max(int(weight.sum()), 1), partitions - 1)
    out = np.empty(len(vocab), dtype=np.int32)
    out[rank_order] = part_in_rank
    return out


#: Examples keyed at a time in the spill pass (bounds its PairBatch).
SPILL_SLICE = 1 << 18


def _spill_chunk(task: _SpillTask) -> int:
    """Pass 1, one store chunk: each example's (pair key, row, labels) into its partition's
    file, a slice of the chunk at a time."""
    from training.store.examples import ExampleStore

    store = ExampleStore.open(task.store)
    mtype = MosesType.parse(task.moses_type)
    spill = Path(task.spill_dir)
    part_of_token = np.load(spill / "partition-of-token.npy")
    arrays = store.chunk_arrays(task.chunk)
    n = int(arrays["meta"]["examples"])
    s = store.sentences
    records = np.empty(n, dtype=_spill_dtype(len(mtype.directions)))
    for lo in range(0, n, SPILL_SLICE):
        part = {name: np.ascontiguousarray(arrays[name][lo:lo + SPILL_SLICE])
                for name in ("sentence", "src_start", "src_end", "tgt_start", "tgt_end", "labels")}
        rows = [part[name] for name in ("sentence", "src_start", "src_end", "tgt_start", "tgt_end")]
        out = records[lo:lo + SPILL_SLICE]
        out["key"] = pair_keys(store.batch(*rows), mtype.language == "fe")
        out["row"] = np.stack(rows, axis=1)
        out["label"] = chunk_labels(store, mtype, part["labels"])
    first_token = s["src_ids"][s["src_offsets"][arrays["sentence"]] + arrays["src_start"]]
    partition = part_of_token[first_token]
    order = np.argsort(partition, kind="stable")
    bounds = np.searchsorted(partition[order], np.arange(int(part_of_token.max(initial=0)) + 2))
    for p in range(bounds.size - 1):
        if bounds[p + 1] > bounds[p]:
            np.save(spill / f"p{p:05d}-c{task.chunk:05d}.npy", records[order[bounds[p]:bounds[p + 1]]])
    return n


def _render_lines(store, mtype: MosesType, records: np.ndarray, smoothing: float) -> tuple[bytes, int]:
    """Count, smooth, render and sort the table lines of some examples (every example of
    their pairs); returns the sorted lines and their number."""
    unique, representative, _, counts = group_pairs(store, records["key"], records["row"],
                                                    records["label"].astype(np.int64), mtype)
    rows = records["row"][representative]
    return table_lines(store, mtype, rows, probabilities(counts, smoothing)), int(unique.size)


def _render_partition(task: _PartitionTask) -> int:
    """Pass 2, one partition: count its pairs, smooth, render and sort its lines into a part
    file. A partition larger than max_examples (a frequent first word cannot be split by
    first words) is done in key-hash runs of at most about that size, each sorted to a
    file, and the runs merged: memory stays one run's whatever the partition's size."""
    from training.store.examples import ExampleStore

    store = ExampleStore.open(task.store)
    mtype = MosesType.parse(task.moses_type)
    spill = Path(task.spill_dir)
    files = sorted(spill.glob(f"p{task.partition:05d}-c*.npy"))
    n = sum(np.load(f, mmap_mode="r").shape[0] for f in files)
    n_runs = max(1, -(-n // max(task.max_examples, 1)))
    empty = np.empty(0, dtype=_spill_dtype(len(mtype.directions)))
    out = spill / f"part-{task.partition:05d}.txt"
    if n_runs == 1:
        text, rows = _render_lines(store, mtype, np.concatenate([empty, *map(np.load, files)]), task.smoothing)
        out.write_bytes(text)
    else:
        parts = [np.load(f, mmap_mode="r") for f in files]
        rows = 0
        runs = []
        for r in range(n_runs):
            # all examples of a pair share a key, so a pair lies in one run
            chunk = np.concatenate([empty, *(part[(part["key"] >> np.uint64(40)) % np.uint64(n_runs) == r]
                                             for part in parts)])
            text, count = _render_lines(store, mtype, chunk, task.smoothing)
            rows += count
            runs.append(spill / f"part-{task.partition:05d}.run-{r:05d}")
            runs[-1].write_bytes(text)
        handles = [open(run, "rb") for run in runs]
        try:
            with open(out, "wb") as fh:
                fh.writelines(heapq.merge(*handles, key=lambda line: line[:-1]))
        finally:
            for h in handles:
                h.close()
        for run in runs:
            run.unlink()
        del parts
    for f in files:
        f.unlink()
    return rows


def build_table(store, moses_type: MosesType, out: str | os.PathLike, smoothing: float = DEFAULT_SMOOTHING,
                            *, jobs: int | None = 1, scheduler: str | None = None, memory: str | int = DEFAULT_MEMORY,
                partitions: int | None = None) -> TableSummary:
    """Count, smooth and write one reordering table with bounded memory, as Moses does with
    `sort`: pass 1 spills every example's key to a partition of first source tokens (one
    task per store chunk), pass 2 counts and renders each partition (one task each), and
    the partitions' sorted lines are written one after the other as they come (a .gz is
    deflated meanwhile on `jobs` threads, even when the input is too small for worker
    processes: training/pgzip.py, one gzip member whose bytes
    depend on the text only; why: gzip.GzipFile of the whole text in this process after
    the passes was ~2 s of serial CPU at 16M examples, the end of 2 jobs' critical path,
    and its bytes could not be split among threads). Byte-identical to the in-memory count_pairs + table_bytes
    for any jobs, scheduler and partition count, and so is the .gz. Spill files live
    beside `out` (on a cluster: a directory every worker sees)."""
    if not smoothing >= 0:
        raise UsageError(f"--smoothing must be a non-negative number, got {smoothing}")
    for direction in moses_type.directions:
        label_source(store, moses_type, direction)
    _check_token_hashes(store)
    out = Path(out)
    with parents_for(out):
        return _build_table(store, moses_type, out, smoothing, jobs, scheduler, memory, partitions)


def _build_table(store, moses_type: MosesType, out: Path, smoothing: float, jobs: int | None,
                 scheduler: str | None, memory: str | int, partitions: int | None) -> TableSummary:
    cores = resolve_jobs(jobs)
    jobs = jobs_that_pay(cores, store.n_examples, WORKER_EXAMPLES, scheduler)  # threads cost nothing to start
    per_task = max(parse_memory(memory) // (8 * jobs), 1)  # an eighth: peak stays flat well below it
    max_examples = max(per_task // BYTES_PER_EXAMPLE, 1)
    if partitions is None:
        needed = -(-store.n_examples * BYTES_PER_EXAMPLE // per_task)
        # partitions of at most ~500k examples, one per job too, but none under ~250k examples
        partitions = max(1, needed, -(-store.n_examples // PARTITION_MAX_EXAMPLES),
                         min(jobs, store.n_examples // PARTITION_MIN_EXAMPLES))
    spill = Path(tempfile.mkdtemp(prefix=f".{out.name}.spill-", dir=out.parent if str(out.parent) else "."))
    try:
        np.save(spill / "partition-of-token.npy", _partition_of_first_token(store, partitions))
        name = str(moses_type)
        with task_runner(jobs=jobs, scheduler=scheduler) as runner, atomic_writer(out) as raw:
            examples = runner.run(_spill_chunk, [_SpillTask(str(store.path), name, c, str(spill))
                                                 for c in range(len(store.meta["chunks"]))])
            rows = []
            with ParallelGzipWriter(raw, threads=cores) if out.name.endswith(".gz") else nullcontext(raw) as sink:
                for p, count in enumerate(runner.iter(_render_partition, [
                        _PartitionTask(str(store.path), name, p, smoothing, str(spill), max_examples)
                        for p in range(partitions)])):
                    rows.append(count)  # partitions come in order: write each while the next ones render
                    part = spill / f"part-{p:05d}.txt"
                    with open(part, "rb") as fh:
                        shutil.copyfileobj(fh, sink, 1 << 22)
                    part.unlink()
    finally:
        shutil.rmtree(spill, ignore_errors=True)
    return TableSummary(moses_type, int(sum(examples)), int(sum(rows)), partitions)
