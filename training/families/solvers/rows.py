"""Row sources: how the shrinking solvers hold the examples they pass over.

`shrinking.run_shrinking` states the algorithm; a row source owns the active set and
the rows and per-example state the family's kernel reads, and runs one pass of that
kernel over the active set in a fresh random order. Every source offers the same small
interface:

- `active`: how many examples are in the active set;
- `run_pass(kernel, tol) -> (active, max_violation, updates)`: one pass;
- `shrunk()`: the source for the passes that follow a pass that left examples active
  (itself, or a compact copy of the active rows);
- `reactivate()`: the source of the full problem with every example active again;
- `write_back()`: bring the full problem's state up to date (before the solver returns).

Memory is what shrinking buys (the SVM paper's "50% reduction"), and at 50M examples
nothing per example may stay resident (issue 13), so a source keeps only what the
current passes need:
- `Streamed`: the full problem. A pass visits the matrix a chunk at a time (CHUNK_NNZ
  stored entries, ~8 MiB of column indices, at the default --memory of 4G; in
  proportion to the budget otherwise): a chunk is an equal share of randomly drawn
  blocks of 1,024 consecutive rows, redrawn every pass, and it is visited in a random
  order. The chunk's rows are read with pread into reusable buffers
  (features/rowchunks.py), and its examples' state (the family's arrays and the
  visiting order, state.py: in a file beside a mapped matrix) is read beside them and
  written back after the chunk, so the kernel sees a small compact problem, the
  memory-mapped feature cache is never faulted in (a fault maps a whole 2 MB page-cache
  folio: RESULTS "Issue 4") and no array of every example is held. Chunked visiting
  is a coarser shuffle than one random order over all rows; for the SVM it changed the
  number of passes by no more than seeds do, and the dual MLR converges under it with
  the driver's stall test (shrinking.py).
- `Resident`: the full problem of a solver that asks for it (the dual MLR) when its
  rows and state take at most RESIDENT_SHARE of the budget (`fits_in_memory`): the
  rows copied in with pread (`rows_in_memory`), the state in memory, one random order
  over the active set a pass and shrunk examples kept behind it in one index array
  (78832e3's solver). On the 45k-pair ja-en store (S7, one direction, EG steps) the
  streamed solve took 20.5 CPU s against these passes' 10.8 (issue 30): 71 passes
  instead of 58 under the chunked order, and per pass a Python loop over the chunks
  reading and writing each one's state and order keys and sorting the keys.
- `Compacted`: once the active set of a streamed problem is at most COMPACT_BELOW of
  the rows (or the family's own fraction: the dual MLR's is lower, dual_mlr.py) and a copy of its rows and state fits COMPACT_SHARE of the memory budget,
  they are copied out and the passes until the next reactivation run on that copy (one
  random order per pass, `Resident`); it is compacted again as it keeps shrinking,
  and its state is written back on reactivation. On a shrunk set the copy is small,
  contiguous and cache-friendly. A copy that would not fit is not made: the passes keep
  streaming (the same algorithm, a chunked visiting order).

A kernel therefore sees different rows/state arrays from one pass to the next and must
keep nothing per example outside `state`. All visiting orders come from one xorshift64*
stream seeded once per solve, so they are a pure function of the seed.
"""

from __future__ import annotations

from collections.abc import Callable

import numba as nb
import numpy as np

from training.features.rowchunks import CHUNK_NNZ, RowReader, chunk_bounds, file_of
from training.families.solvers.state import FileState, MemoryState, ExampleState, state_beside
from training.parallel import DEFAULT_MEMORY, parse_memory

BLOCK_LOG2 = 10  # rows join chunks in blocks of 1,024 consecutive rows
COMPACT_BELOW = 0.25  # copy the active rows out once they are at most this fraction
COMPACT_SHARE = 0.5  # ... and the copy takes at most this share of the memory budget
# A whole problem within this share of the budget is solved resident (rows_in_memory):
# 512 MiB at the default 4G, ~4.7M examples of ja-en S6 (108 bytes an example with the
# dual MLR's log alpha). The 16M-example store (1.5 GB) keeps streaming with its peak
# of issue 13 (737 MiB); the everyday 1.4M-example one (158 MB) stays resident (issue 30).
RESIDENT_SHARE = 0.125

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


def row_chunks(indptr: np.ndarray, n: int, chunk_nnz: int) -> int:
    """How many chunks of about chunk_nnz stored entries the rows 0..n-1 make."""
    nnz = int(indptr[n] - indptr[0]) if n else 0
    n_blocks = -(-n // (1 << BLOCK_LOG2))
    return max(1, min(n_blocks, -(-nnz // max(chunk_nnz, 1))))


def block_chunks(n: int, n_chunks: int, rng_state: np.ndarray | None = None) -> np.ndarray:
    """Chunk of every block of rows: consecutive runs of blocks, or (rng_state given) an
    equal share of randomly drawn blocks per chunk."""
    n_blocks = -(-n // (1 << BLOCK_LOG2))
    perm = np.arange(n_blocks, dtype=np.int32)  # int32 like every index shuffled: one signature
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


def holds_values(array: np.ndarray) -> bool:
    """False for a broadcast constant (the feature cache's all-ones data): one value
    whatever its length, nothing to copy or count."""
    return array.ndim == 1 and array.strides[0] != 0


def _copy_rows(rows: Rows, keep: np.ndarray, chunk_nnz: int) -> Rows:
    """rows[keep] (keep sorted) as a new CSR, read in consecutive chunks with pread: a
    mapped file is read once and never faulted in."""
    indptr, indices, data = rows
    n = indptr.shape[0] - 1
    bounds = chunk_bounds(indptr, chunk_nnz, 0, n)
    cuts = np.searchsorted(keep, bounds)  # keep[cuts[c]:cuts[c+1]] lie in chunk c
    out_indptr = np.zeros(keep.shape[0] + 1, dtype=np.int64)
    copy_data = holds_values(data)
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


def solver_state(rows: Rows, columns: list[tuple]) -> ExampleState:
    """Zero per-example state (columns: (dtype, shape of one example's part)) for the
    examples of `rows`: in a file beside the matrix when the rows are in a file, in
    memory when they are in memory (state.py)."""
    found = file_of(rows[1])
    return state_beside(found[0] if found else None, rows[0].shape[0] - 1, columns)


def chunk_entries(memory: int | str | None) -> int:
    """Stored entries per streamed chunk for a memory budget: CHUNK_NNZ at the default
    budget (8 MiB of column indices for 4G), in proportion to the budget otherwise."""
    budget = parse_memory(DEFAULT_MEMORY if memory is None else memory)
    return max(1, CHUNK_NNZ * budget // parse_memory(DEFAULT_MEMORY))


def visiting_rng(seed: int) -> np.ndarray:
    """The xorshift64* state every visiting order of a solve is drawn from."""
    return np.array([np.uint64(seed) ^ np.uint64(0x9E3779B97F4A7C15)], dtype=np.uint64)


def problem_bytes(rows: Rows, row_bytes: int, active: int | None = None) -> int:
    """About what `active` examples (default all) take in memory: their rows at the mean
    row length, row pointers, one visiting-order entry and `row_bytes` of state each."""
    indptr, indices, data = rows
    n = indptr.shape[0] - 1
    entry = indices.itemsize + (data.itemsize if holds_values(data) else 0)
    nnz = int(indptr[n]) - int(indptr[0])
    per_row = nnz / max(n, 1) * entry + 8 + 4 + row_bytes
    return int((n if active is None else active) * per_row)


def fits_in_memory(rows: Rows, row_bytes: int, memory: int | str | None) -> bool:
    """Whether the whole problem (its rows and `row_bytes` of state per example) takes at
    most RESIDENT_SHARE of the memory budget."""
    budget = parse_memory(DEFAULT_MEMORY if memory is None else memory)
    return problem_bytes(rows, row_bytes) <= RESIDENT_SHARE * budget


def rows_in_memory(rows: Rows, memory: int | str | None = None) -> Rows:
    """The rows themselves when they are in memory; a copy read with pread, chunk by
    chunk, when they are in a file (a mapped matrix is then never faulted in)."""
    if file_of(rows[1]) is None:
        return rows
    n = rows[0].shape[0] - 1
    return _copy_rows(rows, np.arange(n, dtype=np.int64), chunk_entries(memory))


class Resident:
    """Rows and per-example state in memory; a pass visits the active set in one random
    order, shrunk examples wait behind `active` in the one index array and a
    reactivation makes them active again (the solver of 78832e3). As the full problem
    it is the source of a problem that fits the memory budget (fits_in_memory,
    rows_in_memory): no state file, no chunks, nothing read or written per pass.
    (The base of `Compacted`.)

    rows: the CSR arrays of the examples; state: the family's per-example arrays (first
    axis = example), updated in place; rng: the xorshift64* state of the visiting orders.
    """

    def __init__(self, rows: Rows, state: tuple, rng: np.ndarray):
        n = rows[0].shape[0] - 1
        self.rows, self.state, self.rng = rows, state, rng
        self.index = np.arange(n, dtype=np.int32 if n < 2**31 else np.int64)  # n x 4 bytes, not 8
        self.active = n

    def run_pass(self, kernel: Kernel, tol: float) -> tuple[int, float, int]:
        shuffle_prefix(self.index, self.active, self.rng)
        self.active, max_violation, updates = kernel(self.rows, self.state, self.index,
                                                     self.active, tol)
        return self.active, max_violation, updates

    def shrunk(self) -> "Resident":
        """The same index array: the shrunk examples wait behind `active`."""
        return self

    def reactivate(self) -> "Resident":
        self.active = self.index.shape[0]
        return self

    def write_back(self) -> None:
        """Nothing to do: the state arrays are the problem's own."""

    def close(self) -> None:
        """Nothing to release."""


class Streamed:
    """The whole problem, its rows possibly memory-mapped and its state in a file,
    visited a chunk of rows at a time; the passes of a small enough active set run on a
    `Compacted` copy of it.

    rows: the CSR arrays; state: the family's per-example state (state.py, or a tuple
    of in-memory arrays); seed: the visiting orders; memory: the budget (--memory) that
    sizes the chunks and decides whether a compact copy is made; compact_below: the
    active fraction at which it is made (COMPACT_BELOW unless the family says otherwise).

    The visiting order (the permutation of the examples a pass starts from, which the
    in-memory solver kept as an index array of every example) is per-example state too:
    `order` holds for each example the key (tier, chunk, position) of its place in it,
    written with the chunk's state. Sorting a chunk's active examples by key gives them
    in the order an index array would hold them, so the passes (and the iterates) are
    those of the index-array solver, with nothing per example resident.
    """

    def __init__(self, rows: Rows, state, seed: int, memory: int | str | None = None,
                 compact_below: float | None = None):
        self.rows = rows
        self.n = n = rows[0].shape[0] - 1
        self.state = state if isinstance(state, ExampleState) else MemoryState(state)
        self.rng = visiting_rng(seed)
        self.memory = parse_memory(DEFAULT_MEMORY if memory is None else memory)
        self.chunk_nnz = chunk_entries(self.memory)
        self.compact_below = COMPACT_BELOW if compact_below is None else compact_below
        self.reader = RowReader(rows)
        # order keys: (tier << 32 | chunk, position); all zero = the examples in id order
        self.order = solver_state(rows, [(np.int64, ()), (np.int64, ())]) \
            if isinstance(self.state, FileState) else MemoryState([np.zeros(n, np.int64), np.zeros(n, np.int64)])
        self.index_dtype = np.int32 if n < 2**31 else np.int64
        self.generation = 0
        self.limit: int | None = None  # an example is active when its key's high part < limit
        self.active = n

    def run_pass(self, kernel: Kernel, tol: float) -> tuple[int, float, int]:
        """Chunks in random order and a random order inside each; a chunk's rows and
        state are read into buffers, so only about one chunk is resident at a time."""
        rng_state, n = self.rng, self.n
        n_chunks = row_chunks(self.rows[0], n, self.chunk_nnz)
        block_chunk = block_chunks(n, n_chunks, rng_state)
        order = np.arange(n_chunks, dtype=np.int32)
        shuffle_prefix(order, n_chunks, rng_state)
        self.generation += 1
        kept_tier = np.int64(-2 * self.generation) << np.int64(32)  # kept: before the shrunk
        shrunk_tier = kept_tier + (np.int64(1) << np.int64(32))     # ones, both before earlier keys
        max_violation, updates, active = 0.0, 0, 0
        for c in order.tolist():
            spans = _row_spans(block_chunk, c, n)
            high, low = self.order.read(spans)
            chosen = np.arange(high.shape[0]) if self.limit is None else np.flatnonzero(high < self.limit)
            m = chosen.shape[0]
            if m == 0:
                continue
            # the chunk's active examples in the order of the last pass (stable: ties are
            # the untouched start, in id order), then shuffled
            local = chosen[np.lexsort((low[chosen], high[chosen]))].astype(self.index_dtype)
            shuffle_prefix(local, m, rng_state)
            chunk_state = self.state.read(spans)
            kept, violation, done = kernel(self.reader.read(spans), chunk_state, local, m, tol)
            self.state.write(spans, chunk_state)
            high[local[:kept]] = kept_tier + c
            high[local[kept:]] = shrunk_tier + c
            low[local] = np.arange(m, dtype=np.int64)
            self.order.write(spans, (high, low))
            active += kept
            max_violation = max(max_violation, violation)
            updates += done
        self.limit = int(shrunk_tier)
        self.active = active
        return self.active, max_violation, updates

    def shrunk(self) -> "Streamed | Compacted":
        """A compact copy of the active rows once they are at most compact_below of the
        rows and the copy fits COMPACT_SHARE of the memory budget; else self."""
        if self.active > self.compact_below * self.n or self.compact_bytes() > COMPACT_SHARE * self.memory:
            return self
        keep = self.active_ids()
        return Compacted(self, _copy_rows(self.rows, keep, self.chunk_nnz), self.state.take(keep), keep)

    def compact_bytes(self) -> int:
        """About what a compact copy of the active examples takes (problem_bytes)."""
        return problem_bytes(self.rows, self.state.row_bytes, self.active)

    def active_ids(self) -> np.ndarray:
        """The active examples' numbers, sorted (read from the order keys a piece at a time)."""
        if self.limit is None:
            return np.arange(self.n, dtype=np.int64)
        found = [lo + np.flatnonzero(self.order.read([(lo, hi)], columns=[0])[0] < self.limit)
                 for lo, hi in self.order.pieces()]
        return np.concatenate(found) if found else np.empty(0, dtype=np.int64)

    def reactivate(self) -> "Streamed":
        self.limit = None  # the order keys keep the order: every pass shuffles it
        self.active = self.n
        return self

    def write_back(self) -> None:
        """Nothing to do: the state is the full problem's."""

    def close(self) -> None:
        self.reader.close()
        self.order.close()


class Compacted(Resident):
    """The active rows of a `Streamed` problem copied out with their per-example state.

    `full` is the streamed source to return to on reactivation; `ids` are the copied
    rows' numbers in the full problem, where `write_back` puts their state.
    """

    def __init__(self, full: Streamed, rows: Rows, state: tuple, ids: np.ndarray):
        super().__init__(rows, state, full.rng)
        self.full, self.ids = full, ids

    def shrunk(self) -> Resident:
        """A smaller copy holding only the rows still active, once they are few enough."""
        if self.active > self.full.compact_below * self.index.shape[0]:
            return self
        self.write_back()
        keep = np.sort(self.index[:self.active])
        return Compacted(self.full, _copy_rows(self.rows, keep, self.full.chunk_nnz),
                         tuple(a[keep] for a in self.state), self.ids[keep])

    def nbytes(self) -> int:
        """What the copy holds: its rows, state, visiting index and row numbers."""
        arrays = (*self.rows, *self.state, self.index, self.ids)
        return sum(int(a.nbytes) for a in arrays if a.ndim != 1 or holds_values(a))

    def reactivate(self) -> Streamed:
        self.write_back()
        return self.full.reactivate()

    def write_back(self) -> None:
        self.full.state.put(self.ids, self.state)

    def close(self) -> None:
        self.full.close()
