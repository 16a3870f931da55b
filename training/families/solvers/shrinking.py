"""The outer loop shared by the two shrinking dual solvers (svm, dual-mlr).

Both papers' algorithms visit the examples of an active set in a fresh random order,
drop an example once its optimality violation v_i is at most a tolerance (SVM paper
eq. 12, dual-MLR paper eq. 16) and stop when no example is left. Removing an example
for good is a heuristic: later updates of w can make it violated again. Like
LIBLINEAR's Solver_MCSVM_CS we therefore cool a tolerance: it starts at max(10 eps, 1);
whenever a pass over the active set finds every visited v_i below it (or the active set
runs empty), every example is reactivated and the tolerance halves (down to eps).
Training stops when a pass over *all* examples finds every v_i < eps (eq. 12 / eq. 16
with tolerance eps for all i), or after max_passes.

Memory is what shrinking buys (the SVM paper's "50% reduction"), so the loop keeps only
what the current passes need resident:
- A pass over the full matrix visits it a chunk at a time (CHUNK_NNZ stored entries,
  ~8 MiB of column indices): a chunk is an equal share of randomly drawn blocks of
  1,024 consecutive rows, redrawn every pass, and it is visited in a random order. The
  next chunk is read ahead and a finished one's pages of the memory-mapped feature
  cache are handed back (pagecache.py), so the mapped matrix is never resident as a
  whole.
- Once the active set is at most COMPACT_BELOW of the rows, its rows and per-example
  state are copied out (`_Compact`) and the passes until the next reactivation run on
  that copy; it is compacted again as it keeps shrinking, and written back on
  reactivation.
Chunked visiting is a coarser shuffle than one random order over all rows, used only
until the active set is compacted (the first passes and those after a reactivation).
For the SVM it changed the number of passes by no more than seeds do. The dual MLR
runs with stream=False: its exponentiated gradient has a slow tail (one EG step per
visit), and on ja-en S6 at eps 0.01 that tail stalled under streaming.

This module only drives passes; the per-example work is the family's numba kernel
`run_pass(rows, state, index, active, tol) -> (active, max_violation, updates)`. It must
not know about stores or features.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numba as nb
import numpy as np
from tqdm.auto import tqdm

from training.families.solvers.pagecache import release, will_need

CHUNK_NNZ = 1 << 21  # stored entries per chunk of a full pass: 8 MiB of int32 column indices
BLOCK_LOG2 = 10  # rows join chunks in blocks of 1,024 consecutive rows
COMPACT_BELOW = 0.25  # copy the active rows out once they are at most this fraction

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
def _row_lengths(indptr, ids, out_indptr):
    out_indptr[0] = 0
    for r in range(ids.shape[0]):
        i = ids[r]
        out_indptr[r + 1] = out_indptr[r] + indptr[i + 1] - indptr[i]


@nb.njit(nogil=True, cache=True)
def _gather_rows(indptr, indices, data, ids, lo, hi, out_indptr, out_indices, out_data, copy_data):
    """Copy rows ids[lo:hi] into the compact CSR whose row pointers out_indptr holds."""
    for r in range(lo, hi):
        i = ids[r]
        pos = out_indptr[r]
        for p in range(indptr[i], indptr[i + 1]):
            out_indices[pos] = indices[p]
            if copy_data:
                out_data[pos] = data[p]
            pos += 1


Rows = tuple  # (indptr, indices, data) of a CSR matrix, as the kernels take it
PassFn = Callable[[Rows, tuple, np.ndarray, int, float], tuple[int, float, int]]


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


def _read_ahead(rows: Rows, spans: list[tuple[int, int]]) -> None:
    indptr, indices, _ = rows
    for lo, hi in spans:
        will_need(indices, int(indptr[lo]), int(indptr[hi]))
        will_need(indptr, lo, hi + 1)


def stream_chunks(rows: Rows, block_chunk: np.ndarray, order: np.ndarray):
    """Yield the chunks of `order` one by one; the next one's rows are read ahead, and
    after each chunk every mapped page of the matrix is handed back (pagecache.py).

    All of them, not only the chunk's own: a page fault maps the neighbouring pages too
    (the kernel's fault-around), which belong to other chunks of randomly drawn blocks.
    """
    indptr, indices, _ = rows
    n = indptr.shape[0] - 1
    spans = [_row_spans(block_chunk, int(c), n) for c in order]
    if spans:
        _read_ahead(rows, spans[0])
    for t, c in enumerate(order):
        if t + 1 < len(spans):
            _read_ahead(rows, spans[t + 1])
        yield int(c)
        release(indices)
        release(indptr)


class _Compact:
    """The active rows copied out of the matrix, with their per-example state.

    Between two reactivations the passes only visit active examples; on a shrunk set a
    copy of their rows is small, contiguous and cache-friendly, and the mapped matrix
    need not stay resident. `ids` are the rows' numbers in the full problem.
    """

    def __init__(self, rows: Rows, state: tuple, keep: np.ndarray, ids: np.ndarray):
        """Copy rows[keep] and state[keep] (keep sorted); `ids`: their full-problem numbers."""
        indptr, indices, data = rows
        self.ids = ids
        out_indptr = np.empty(keep.shape[0] + 1, dtype=np.int64)
        _row_lengths(indptr, keep, out_indptr)
        nnz = int(out_indptr[-1])
        out_indices = np.empty(nnz, dtype=indices.dtype)
        copy_data = data.ndim == 1 and data.strides[0] != 0
        if copy_data:
            out_data = np.empty(nnz, dtype=data.dtype)
        else:  # a broadcast constant (vocab.py's all-ones data) stays one
            out_data = np.broadcast_to(data[:1] if data.shape[0] else np.ones(1, data.dtype), (nnz,))
        scratch = out_data if copy_data else np.empty(1, dtype=data.dtype)
        # Sorted rows, consecutive chunks: a mapped file is read once and given back.
        n = indptr.shape[0] - 1
        n_chunks = row_chunks(indptr, n, CHUNK_NNZ)
        block_chunk = block_chunks(n, n_chunks)
        bounds = np.searchsorted(block_chunk[keep >> BLOCK_LOG2], np.arange(n_chunks + 1))
        for c in stream_chunks(rows, block_chunk, np.arange(n_chunks)):
            _gather_rows(indptr, indices, data, keep, bounds[c], bounds[c + 1], out_indptr,
                         out_indices, scratch, copy_data)
        self.rows = (out_indptr, out_indices, out_data)
        self.state = tuple(a[keep] for a in state)
        self.index = np.arange(keep.shape[0], dtype=np.int32)
        self.active = keep.shape[0]

    def write_back(self, state: tuple) -> None:
        for full, part in zip(state, self.state):
            full[self.ids] = part

    def shrink(self, state: tuple) -> "_Compact":
        """A smaller copy holding only the rows still active."""
        self.write_back(state)
        keep = np.sort(self.index[:self.active])
        return _Compact(self.rows, self.state, keep, self.ids[keep])


def _chunked_pass(run_pass: PassFn, rows: Rows, state: tuple, index: np.ndarray, active: int,
                  tol: float, rng_state: np.ndarray, chunk_nnz: int) -> tuple[int, float, int]:
    """A pass over the full matrix a chunk of rows at a time, chunks in random order and
    a random order inside each, so only about one chunk of it is resident at a time."""
    indptr = rows[0]
    n = indptr.shape[0] - 1
    n_chunks = row_chunks(indptr, n, chunk_nnz)
    block_chunk = block_chunks(n, n_chunks, rng_state)
    starts = np.empty(n_chunks + 1, dtype=np.int64)
    _bucket(index, active, block_chunk, n_chunks, starts)
    order = np.arange(n_chunks, dtype=np.int64)
    shuffle_prefix(order, n_chunks, rng_state)
    kept = np.zeros(n_chunks, dtype=np.int64)
    max_violation, updates = 0.0, 0
    for c in stream_chunks(rows, block_chunk, order):
        a, b = int(starts[c]), int(starts[c + 1])
        if a == b:
            continue
        part = index[a:b]
        shuffle_prefix(part, b - a, rng_state)
        kept[c], violation, done = run_pass(rows, state, part, b - a, tol)
        max_violation = max(max_violation, violation)
        updates += done
    # Active examples of every chunk to the front, the shrunk ones behind them.
    spans = [(int(starts[c]), int(starts[c + 1]), int(kept[c])) for c in range(n_chunks)]
    reordered = np.concatenate([index[a:a + k] for a, _, k in spans]
                               + [index[a + k:b] for a, b, k in spans])
    index[:active] = reordered
    return int(kept.sum()), max_violation, updates


def run_shrinking(run_pass: PassFn, objective: Callable[[], float], rows: Rows, state: tuple,
                  eps: float, max_passes: int, seed: int, verbose: bool = False,
                  desc: str = "passes", stream: bool = True) -> tuple[list[dict], bool]:
    """Run passes until the certificate above holds or `max_passes` is reached.

    rows: the CSR arrays of the examples; state: the family's per-example arrays (first
    axis = example), kept in step with the rows when the active set is compacted and
    written back before this returns. run_pass(rows, state, index, active, tol) is the
    family's kernel over index[:active] (see the module docstring). stream=False: one
    random order over all rows per pass and no compact copies (the matrix stays
    resident), for a solver whose convergence suffers from chunked visiting.

    Returns (history, converged). history has one dict per pass: pass number, the
    active fraction at the start of the pass, the shrinking tolerance, the largest
    violation seen, the number of updated examples, the objective after the pass and
    the cumulative seconds (the papers' Figure 1).
    """
    n = rows[0].shape[0] - 1
    chunk_nnz, compact_below = CHUNK_NNZ, COMPACT_BELOW
    rng_state = np.array([np.uint64(seed) ^ np.uint64(0x9E3779B97F4A7C15)], dtype=np.uint64)
    index = np.arange(n, dtype=np.int32 if n < 2**31 else np.int64)  # n x 4 bytes, not 8
    active = n
    compact: _Compact | None = None
    tol = max(10.0 * eps, 1.0) if eps < 1.0 else eps
    from_all = True
    history: list[dict] = []
    converged = False
    start = time.perf_counter()
    bar = tqdm(total=max_passes, desc=desc, unit="pass", disable=not verbose, leave=False)
    try:
        for p in range(1, max_passes + 1):
            active_before = active
            if compact is None and stream:
                active, max_violation, updates = _chunked_pass(
                    run_pass, rows, state, index, active, tol, rng_state, chunk_nnz)
            elif compact is None:
                shuffle_prefix(index, active, rng_state)
                active, max_violation, updates = run_pass(rows, state, index, active, tol)
            else:
                shuffle_prefix(compact.index, compact.active, rng_state)
                compact.active, max_violation, updates = run_pass(
                    compact.rows, compact.state, compact.index, compact.active, tol)
                active = compact.active
            history.append({
                "pass": p,
                "active": active_before / n if n else 0.0,
                "tol": tol,
                "max_violation": float(max_violation),
                "updates": int(updates),
                "objective": float(objective()),
                "seconds": time.perf_counter() - start,
            })
            bar.update(1)
            bar.set_postfix(active=f"{active_before / max(n, 1):.3f}", tol=f"{tol:.3g}",
                            viol=f"{max_violation:.3g}")
            if active == 0 or max_violation < tol:
                if from_all and max_violation < eps:
                    converged = True
                    break
                # Everything looked optimal at this tolerance: check all examples again
                # with a tighter one (LIBLINEAR-style cooling).
                if compact is not None:
                    compact.write_back(state)
                    compact = None
                active = n
                tol = max(tol / 2.0, eps)
                from_all = True
                continue
            from_all = False
            if not stream:
                continue
            if compact is None and active <= compact_below * n:
                ids = np.sort(index[:active])
                compact = _Compact(rows, state, ids, ids)
            elif compact is not None and active <= compact_below * compact.ids.shape[0]:
                compact = compact.shrink(state)
    finally:
        bar.close()
        if compact is not None:
            compact.write_back(state)
    return history, converged
