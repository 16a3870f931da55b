"""Row sources: how the shrinking solvers hold the examples they pass over.

`shrinking.run_shrinking` states the algorithm; a row source owns the active set (the
example ids `index[:active]`) and the rows and per-example state the family's kernel
reads, and runs one pass of that kernel over the active set in a fresh random order.
Every source offers the same small interface:

- `active`: how many examples are in the active set;
- `run_pass(kernel, tol) -> (active, max_violation, updates)`: one pass;
- `shrunk()`: the source for the passes that follow a pass that left examples active
  (itself, or a compact copy of the active rows);
- `reactivate()`: the source of the full problem with every example active again;
- `write_back()`: bring the full problem's state up to date (before the solver returns).

Memory is what shrinking buys (the SVM paper's "50% reduction"), so a source keeps only
what the current passes need resident:
- `Resident`: the whole matrix, each pass one random order over the active examples
  (the base of `Compacted`; for callers whose rows are small and in memory).
- `Streamed`: a pass visits the full matrix a chunk at a time (CHUNK_NNZ stored entries,
  ~8 MiB of column indices): a chunk is an equal share of randomly drawn blocks of
  1,024 consecutive rows, redrawn every pass, and it is visited in a random order. The
  chunk's rows are read with pread into reusable buffers (features/rowchunks.py) and
  its examples' state is copied beside them and written back after the chunk, so the
  kernel sees a small compact problem and the memory-mapped feature cache is never
  faulted in (a fault maps a whole 2 MB page-cache folio: RESULTS "Issue 4"). Chunked
  visiting is a coarser shuffle than one random order over all rows; for the SVM it
  changed the number of passes by no more than seeds do, and the dual MLR converges
  under it with the driver's stall test (shrinking.py).
- `Compacted`: once the active set of a streamed problem is at most COMPACT_BELOW of
  the rows, its rows and per-example state are copied out and the passes until the next
  reactivation run on that copy (one random order per pass, as `Resident`); it is
  compacted again as it keeps shrinking, and its state is written back on reactivation.
  On a shrunk set the copy is small, contiguous and cache-friendly, and the mapped
  matrix need not stay resident.

A kernel therefore sees different rows/state arrays from one pass to the next and must
keep nothing per example outside `state`. All visiting orders come from one xorshift64*
stream seeded once per solve, so they are a pure function of the seed.
"""

from __future__ import annotations

from collections.abc import Callable

import numba as nb
import numpy as np

from training.features.rowchunks import CHUNK_NNZ, RowReader, chunk_bounds

BLOCK_LOG2 = 10  # rows join chunks in blocks of 1,024 consecutive rows
COMPACT_BELOW = 0.25  # copy the active rows out once they are at most this fraction

Rows = tuple  # (indptr, indices, data) of a CSR matrix, as the kernels take it
# The family's kernel: kernel(rows, state, index, active, tol) runs over index[:active],
# swaps the examples it shrinks behind the new `active` and returns
# (active, max_violation, updates).
Kernel = Callable[[Rows, tuple, np.ndarray, int, float], tuple[int, float, int]]

_MUL = np.uint64(0x2545F4914F6CDD1D)
_S12, _S25, _S27, _S11 = np.uint64(12), np.uint64(25), np.uint64(27), np.uint64(11)
_TWO_M53 = 1.0 / 9007199254740992.0


@nb.njit(nogil=True, cache=True)
def shuffle_prefix(index, n, state):
    """Fisher-Yates shuffle of index[:n] driven by xorshift64* (state[0], never 0).

    Our own generator keeps the order a pure function of the seed, independent of
    numpy's or numba's global random state. uint64 arithmetic only.
    """
    x = state[0]
    if x == np.uint64(0):
        x = np.uint64(1)
    for i in range(n - 1, 0, -1):
        x ^= x >> _S12
        x ^= x << _S25
        x ^= x >> _S27
        r = (x * _MUL) >> _S11  # 53 random bits
        j = int(np.float64(r) * _TWO_M53 * (i + 1))
        index[i], index[j] = index[j], index[i]
    state[0] = x


@nb.njit(nogil=True, cache=True)
def _bucket(index, active, block_chunk, n_chunks, starts):
    """Stable partition of index[:active] by chunk: row i is in block_chunk[i >> BLOCK_LOG2].

    starts[c] = where chunk c begins in index (starts[n_chunks] = active). A counting
    sort: O(active), no comparison sort of the ids.
    """
    counts = np.zeros(n_chunks + 1, dtype=np.int64)
    for s in range(active):
        counts[block_chunk[index[s] >> BLOCK_LOG2] + 1] += 1
    for c in range(n_chunks):
        counts[c + 1] += counts[c]
        starts[c] = counts[c]
    starts[n_chunks] = active
    out = np.empty(active, dtype=index.dtype)
    for s in range(active):
        c = block_chunk[index[s] >> BLOCK_LOG2]
        out[counts[c]] = index[s]
        counts[c] += 1
    for s in range(active):
        index[s] = out[s]


@nb.njit(nogil=True, cache=True)
def _gather_rows(indptr, indices, data, ids, offset, lo, hi, out_indptr, out_indices, out_data,
                 copy_data):
    """Copy rows ids[lo:hi] - offset of a chunk into the compact CSR whose row pointers
    out_indptr holds."""
    for r in range(lo, hi):
        i = ids[r] - offset
        pos = out_indptr[r]
        for p in range(indptr[i], indptr[i + 1]):
            out_indices[pos] = indices[p]
            if copy_data:
                out_data[pos] = data[p]
            pos += 1


@nb.njit(nogil=True, cache=True)
def _to_local(part, ids, out):
    """out[s] = position of part[s] in the sorted ids (every part[s] is one of them)."""
    for s in range(part.shape[0]):
        out[s] = np.searchsorted(ids, part[s])


def row_chunks(indptr: np.ndarray, n: int, chunk_nnz: int) -> int:
    """How many chunks of about chunk_nnz stored entries the rows 0..n-1 make."""
    nnz = int(indptr[n] - indptr[0]) if n else 0
    n_blocks = -(-n // (1 << BLOCK_LOG2))
    return max(1, min(n_blocks, -(-nnz // max(chunk_nnz, 1))))


def block_chunks(n: int, n_chunks: int, rng_state: np.ndarray | None = None) -> np.ndarray:
    """Chunk of every block of rows: consecutive runs of blocks, or (rng_state given) an
    equal share of randomly drawn blocks per chunk."""
    n_blocks = -(-n // (1 << BLOCK_LOG2))
    perm = np.arange(n_blocks, dtype=np.int64)
    if rng_state is not None:
        shuffle_prefix(perm, n_blocks, rng_state)
    chunk = np.empty(n_blocks, dtype=np.int64)
    chunk[perm] = np.arange(n_blocks, dtype=np.int64) * n_chunks // max(n_blocks, 1)
    return chunk


def _row_spans(block_chunk: np.ndarray, c: int, n: int) -> list[tuple[int, int]]:
    """Row ranges [lo, hi) of chunk c: its blocks, adjacent ones merged."""
    blocks = np.flatnonzero(block_chunk == c)
    if blocks.size == 0:
        return []
    breaks = np.flatnonzero(np.diff(blocks) != 1) + 1
    return [(int(run[0]) << BLOCK_LOG2, min(n, (int(run[-1]) + 1) << BLOCK_LOG2))
            for run in np.split(blocks, breaks)]


def _copy_rows(rows: Rows, keep: np.ndarray) -> Rows:
    """rows[keep] (keep sorted) as a new CSR, read in consecutive chunks with pread: a
    mapped file is read once and never faulted in."""
    indptr, indices, data = rows
    n = indptr.shape[0] - 1
    bounds = chunk_bounds(indptr, CHUNK_NNZ, 0, n)
    cuts = np.searchsorted(keep, bounds)  # keep[cuts[c]:cuts[c+1]] lie in chunk c
    out_indptr = np.zeros(keep.shape[0] + 1, dtype=np.int64)
    copy_data = data.ndim == 1 and data.strides[0] != 0
    with RowReader(rows) as reader:
        for c in range(bounds.shape[0] - 1):  # the rows' lengths: row pointers only
            a, b = int(bounds[c]), int(bounds[c + 1])
            out_indptr[cuts[c] + 1:cuts[c + 1] + 1] = reader.row_nnz(a, b)[keep[cuts[c]:cuts[c + 1]] - a]
        np.cumsum(out_indptr, out=out_indptr)
        nnz = int(out_indptr[-1])
        out_indices = np.empty(nnz, dtype=indices.dtype)
        if copy_data:
            out_data = np.empty(nnz, dtype=data.dtype)
        else:  # a broadcast constant (matrix.py's all-ones data) stays one
            out_data = np.broadcast_to(data[:1] if data.shape[0] else np.ones(1, data.dtype), (nnz,))
        scratch = out_data if copy_data else np.empty(1, dtype=data.dtype)
        for c in range(bounds.shape[0] - 1):
            if cuts[c] == cuts[c + 1]:
                continue
            a, b = int(bounds[c]), int(bounds[c + 1])
            part = reader.read([(a, b)])
            _gather_rows(*part, keep, a, int(cuts[c]), int(cuts[c + 1]), out_indptr, out_indices,
                         scratch, copy_data)
    return out_indptr, out_indices, out_data


class Resident:
    """The whole matrix in memory; a pass visits the active set in one random order.

    rows: the CSR arrays of the examples; state: the family's per-example arrays (first
    axis = example), updated in place; seed: the visiting orders.
    """

    def __init__(self, rows: Rows, state: tuple, seed: int):
        n = rows[0].shape[0] - 1
        self.rows, self.state = rows, state
        self.rng = np.array([np.uint64(seed) ^ np.uint64(0x9E3779B97F4A7C15)], dtype=np.uint64)
        self.index = np.arange(n, dtype=np.int32 if n < 2**31 else np.int64)  # n x 4 bytes, not 8
        self.active = n

    def run_pass(self, kernel: Kernel, tol: float) -> tuple[int, float, int]:
        shuffle_prefix(self.index, self.active, self.rng)
        self.active, max_violation, updates = kernel(self.rows, self.state, self.index,
                                                     self.active, tol)
        return self.active, max_violation, updates

    def shrunk(self) -> "Resident":
        return self

    def reactivate(self) -> "Resident":
        self.active = self.index.shape[0]  # index keeps its order: every pass shuffles it
        return self

    def write_back(self) -> None:
        """Nothing to do: the state is the full problem's."""


class Streamed(Resident):
    """The whole matrix, possibly memory-mapped, visited a chunk of rows at a time; the
    passes of a small enough active set run on a `Compacted` copy of it."""

    def __init__(self, rows: Rows, state: tuple, seed: int):
        super().__init__(rows, state, seed)
        self.reader = RowReader(rows)

    def run_pass(self, kernel: Kernel, tol: float) -> tuple[int, float, int]:
        """Chunks in random order and a random order inside each; a chunk's rows and
        state are read into buffers, so only about one chunk is resident at a time."""
        rows, state, index, active, rng_state = (self.rows, self.state, self.index,
                                                 self.active, self.rng)
        indptr = rows[0]
        n = indptr.shape[0] - 1
        n_chunks = row_chunks(indptr, n, CHUNK_NNZ)
        block_chunk = block_chunks(n, n_chunks, rng_state)
        starts = np.empty(n_chunks + 1, dtype=np.int64)
        _bucket(index, active, block_chunk, n_chunks, starts)
        order = np.arange(n_chunks, dtype=np.int64)
        shuffle_prefix(order, n_chunks, rng_state)
        kept = np.zeros(n_chunks, dtype=np.int64)
        max_violation, updates = 0.0, 0
        for c in order.tolist():
            a, b = int(starts[c]), int(starts[c + 1])
            if a == b:
                continue
            part = index[a:b]
            shuffle_prefix(part, b - a, rng_state)
            spans = _row_spans(block_chunk, c, n)
            ids = np.concatenate([np.arange(lo, hi, dtype=np.int64) for lo, hi in spans])
            local = np.empty(b - a, dtype=index.dtype)
            _to_local(part, ids, local)
            chunk_state = tuple(s_[ids] for s_ in state)
            kept[c], violation, done = kernel(self.reader.read(spans), chunk_state, local,
                                              b - a, tol)
            part[:] = ids[local]
            for full, local_state in zip(state, chunk_state):
                full[ids] = local_state
            max_violation = max(max_violation, violation)
            updates += done
        # Active examples of every chunk to the front, the shrunk ones behind them.
        spans = [(int(starts[c]), int(starts[c + 1]), int(kept[c])) for c in range(n_chunks)]
        reordered = np.concatenate([index[a:a + k] for a, _, k in spans]
                                   + [index[a + k:b] for a, b, k in spans])
        index[:active] = reordered
        self.active = int(kept.sum())
        return self.active, max_violation, updates

    def shrunk(self) -> Resident:
        if self.active > COMPACT_BELOW * self.index.shape[0]:
            return self
        keep = np.sort(self.index[:self.active])
        return Compacted(self, self.rows, self.state, keep, keep)


class Compacted(Resident):
    """The active rows of a `Streamed` problem copied out with their per-example state.

    `full` is the streamed source to return to on reactivation; `ids` are the copied
    rows' numbers in the full problem, where `write_back` puts their state.
    """

    def __init__(self, full: Streamed, rows: Rows, state: tuple, keep: np.ndarray,
                 ids: np.ndarray):
        """Copy rows[keep] and state[keep] (keep sorted); `ids`: their full-problem numbers."""
        self.full, self.ids, self.rng = full, ids, full.rng
        self.rows = _copy_rows(rows, keep)
        self.state = tuple(a[keep] for a in state)
        self.index = np.arange(keep.shape[0], dtype=np.int32)
        self.active = keep.shape[0]

    def shrunk(self) -> Resident:
        """A smaller copy holding only the rows still active, once they are few enough."""
        if self.active > COMPACT_BELOW * self.index.shape[0]:
            return self
        self.write_back()
        keep = np.sort(self.index[:self.active])
        return Compacted(self.full, self.rows, self.state, keep, self.ids[keep])

    def reactivate(self) -> Resident:
        self.write_back()
        return self.full.reactivate()

    def write_back(self) -> None:
        for full, part in zip(self.full.state, self.state):
            full[self.ids] = part
