"""Per-example state of the shrinking solvers, read and written a chunk of rows at a time.

The dual solvers keep arrays whose first axis is the example: the labels, the dual
variables (K doubles: the SVM's alpha, the MLR's log alpha) and the row source's
visiting order (rows.py). At 50M examples that is ~2 GB, which must not be resident:
peak memory is set by the model and the --memory budget, never by the corpus
(issue 13). So the state of a problem whose rows are in a file (the mapped feature
cache `train` uses) lives in an unlinked temporary file beside it, every array in its
own region, and the row source reads the state of a chunk's rows with pread into
arrays of its own and writes them back with pwrite after the kernel ran on them, as
it reads the rows (features/rowchunks.py). A problem whose rows are in memory keeps
its state in memory (`MemoryState`) behind the same interface:

- `read(spans, columns=None) -> tuple`: the rows lo..hi-1 of every span, concatenated,
  of every array (or of the arrays numbered in `columns`), as new arrays;
- `write(spans, arrays)`: the inverse;
- `take(ids) -> tuple` / `put(ids, arrays)`: the rows `ids` (sorted) of every array,
  for compact copies; read and written in consecutive pieces of PIECE_ROWS rows;
- `pieces()`: consecutive row ranges of at most PIECE_ROWS rows, to fill or sum the
  state a piece at a time.

The hot loops never see this class: they get the numpy arrays a read returned.
This module must not know about families, stores or features.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Sequence

import numpy as np

from training.features.rowchunks import pread_into, pwrite_from

PIECE_ROWS = 1 << 18  # rows per piece of take/put/pieces: a few MiB of state
_ALIGN = 4096

Spans = Sequence[tuple[int, int]]
Column = tuple  # (dtype, shape of one example's part, e.g. () or (K,))


def _positions(spans: Spans) -> np.ndarray:
    return np.concatenate([np.arange(lo, hi, dtype=np.int64) for lo, hi in spans]) if spans \
        else np.empty(0, dtype=np.int64)


class ExampleState:
    """What both kinds share: the pieces, and take/put in terms of read/write."""

    n: int
    columns: list[tuple[np.dtype, tuple[int, ...]]]

    @property
    def row_bytes(self) -> int:
        """Bytes of state per example (every array)."""
        return sum(int(np.dtype(d).itemsize * np.prod(tail, dtype=np.int64)) for d, tail in self.columns)

    def pieces(self) -> Iterator[tuple[int, int]]:
        for lo in range(0, self.n, PIECE_ROWS):
            yield lo, min(self.n, lo + PIECE_ROWS)

    def take(self, ids: np.ndarray) -> tuple:
        out = [np.empty((ids.shape[0],) + tail, dtype=d) for d, tail in self.columns]
        for lo, hi, a, b in self._runs(ids):
            span = [(int(ids[a]), int(ids[b - 1]) + 1)]
            for o, part in zip(out, self.read(span)):
                o[a:b] = part[ids[a:b] - ids[a]]
        return tuple(out)

    def put(self, ids: np.ndarray, arrays: Sequence[np.ndarray]) -> None:
        for lo, hi, a, b in self._runs(ids):
            span = [(int(ids[a]), int(ids[b - 1]) + 1)]
            parts = self.read(span)
            for part, values in zip(parts, arrays):
                part[ids[a:b] - ids[a]] = values[a:b]
            self.write(span, parts)

    def _runs(self, ids: np.ndarray) -> Iterator[tuple[int, int, int, int]]:
        """(piece lo, hi, first and end position in ids) of every piece holding some ids."""
        cuts = np.searchsorted(ids, np.arange(0, self.n + PIECE_ROWS, PIECE_ROWS))
        for p, (lo, hi) in enumerate(self.pieces()):
            a, b = int(cuts[p]), int(cuts[p + 1])
            if a < b:
                yield lo, hi, a, b

    def read(self, spans: Spans, columns: Sequence[int] | None = None) -> tuple:
        raise NotImplementedError

    def write(self, spans: Spans, arrays: Sequence[np.ndarray], columns: Sequence[int] | None = None) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Release the file (MemoryState: nothing)."""


class MemoryState(ExampleState):
    """State arrays in memory (first axis = example), updated in place by `write`."""

    def __init__(self, arrays: Sequence[np.ndarray]):
        self.arrays = list(arrays)
        self.n = int(self.arrays[0].shape[0]) if self.arrays else 0
        self.columns = [(a.dtype, a.shape[1:]) for a in self.arrays]

    def read(self, spans: Spans, columns: Sequence[int] | None = None) -> tuple:
        at = _positions(spans)
        chosen = range(len(self.arrays)) if columns is None else columns
        return tuple(self.arrays[k][at] for k in chosen)

    def write(self, spans: Spans, arrays: Sequence[np.ndarray], columns: Sequence[int] | None = None) -> None:
        at = _positions(spans)
        chosen = range(len(self.arrays)) if columns is None else columns
        for k, values in zip(chosen, arrays):
            self.arrays[k][at] = values


class FileState(ExampleState):
    """State arrays of n examples in one unlinked temporary file in `directory`, zero at
    the start (a sparse file: nothing is written until a row is)."""

    def __init__(self, n: int, columns: Sequence[Column], directory: str | os.PathLike | None = None):
        self.n = int(n)
        self.columns = [(np.dtype(d), tuple(tail)) for d, tail in columns]
        self._file = tempfile.TemporaryFile(prefix="solver-state-", dir=directory)
        self.fd = self._file.fileno()
        self.offsets, at = [], 0
        for d, tail in self.columns:
            self.offsets.append(at)
            at += -(-self.n * d.itemsize * int(np.prod(tail, dtype=np.int64)) // _ALIGN) * _ALIGN
        os.ftruncate(self.fd, max(at, 1))

    def _stride(self, k: int) -> int:
        d, tail = self.columns[k]
        return d.itemsize * int(np.prod(tail, dtype=np.int64))

    def read(self, spans: Spans, columns: Sequence[int] | None = None) -> tuple:
        total = sum(hi - lo for lo, hi in spans)
        out = []
        for k in (range(len(self.columns)) if columns is None else columns):
            d, tail = self.columns[k]
            values, stride, pos = np.empty((total,) + tail, dtype=d), self._stride(k), 0
            for lo, hi in spans:
                if hi > lo:
                    pread_into(self.fd, values[pos:pos + hi - lo], self.offsets[k] + lo * stride)
                pos += hi - lo
            out.append(values)
        return tuple(out)

    def write(self, spans: Spans, arrays: Sequence[np.ndarray], columns: Sequence[int] | None = None) -> None:
        for k, values in zip(range(len(self.columns)) if columns is None else columns, arrays):
            values, stride, pos = np.ascontiguousarray(values, dtype=self.columns[k][0]), self._stride(k), 0
            for lo, hi in spans:
                if hi > lo:
                    pwrite_from(self.fd, values[pos:pos + hi - lo], self.offsets[k] + lo * stride)
                pos += hi - lo

    def close(self) -> None:
        self._file.close()


def state_beside(rows_file: str | None, n: int, columns: Sequence[Column]) -> ExampleState:
    """Zero state of n examples: in a file in the directory of `rows_file` (the matrix's
    file, so the state is on the disk that holds the matrix), in memory when the rows
    are in memory (rows_file None)."""
    if rows_file is None:
        return MemoryState([np.zeros((n,) + tuple(tail), dtype=d) for d, tail in columns])
    try:
        return FileState(n, columns, os.path.dirname(rows_file) or None)
    except OSError:  # a read-only cache directory: the temporary directory then
        return FileState(n, columns)
