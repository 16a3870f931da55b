"""Rows of a CSR matrix read a chunk at a time into reusable buffers (pread, not page faults).

The feature cache (matrix.py) is memory-mapped, and every stage downstream of it (the
solvers, the primal MaxEnt, naive Bayes, calibration, eval) reads it a chunk of rows at
a time. Faulting a mapping in does not bound memory: the pages stay in the process's
resident set, and when the kernel holds the file in large page-cache folios (2 MB on
Linux 6.x) one fault maps the whole folio (benchmarks/RESULTS.md, "Issue 4"). So a
chunk of a file-mapped array is copied into a buffer of this process with `os.preadv`
at the array's file offset: what stays resident is the buffer, its size set by the
chunk, never by the matrix. Arrays in ordinary memory are sliced instead (views; a
rebased indptr is the only copy).

`RowReader(X)` reads any set of row ranges; `iter_row_chunks(X, chunk_nnz)` walks
consecutive row ranges of about `chunk_nnz` stored entries. A chunk's arrays are valid
until the next read from the same reader (the buffers are reused). This module must not
know about stores, labels or families.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Iterator, Sequence

import numpy as np
import scipy.sparse as sp

CHUNK_NNZ = 1 << 21  # stored entries per chunk: 8 MiB of int32 column indices

Rows = tuple  # (indptr, indices, data) of a CSR matrix


def file_of(array: np.ndarray) -> tuple[str, int] | None:
    """(file name, byte offset of array[0]) when `array` is a contiguous 1-d view of a
    read-only np.memmap (np.load(mmap_mode="r")), else None."""
    if array.ndim != 1 or (array.shape[0] > 1 and array.strides[0] != array.itemsize):
        return None
    node = array
    while node is not None and not isinstance(node, np.memmap):
        node = getattr(node, "base", None)
    if node is None or node.mode != "r" or node.filename is None:
        return None
    start = node.offset + (array.__array_interface__["data"][0] - node.__array_interface__["data"][0])
    return str(node.filename), int(start)


def pread_into(fd: int, out: np.ndarray, offset: int) -> None:
    """Fill the contiguous array `out` with the bytes of file `fd` from byte `offset`."""
    view = memoryview(out).cast("B")
    done = 0
    while done < len(view):
        got = os.preadv(fd, [view[done:]], offset + done)
        if got <= 0:
            raise OSError(f"short read from {fd=} at byte {offset + done}")
        done += got


def pwrite_from(fd: int, values: np.ndarray, offset: int) -> None:
    """Write the contiguous array `values` to file `fd` at byte `offset`."""
    view = memoryview(values).cast("B")
    done = 0
    while done < len(view):
        done += os.pwritev(fd, [view[done:]], offset + done)


class ArrayReader:
    """Slices of one 1-d array: pread from its file, or views of it in memory."""

    def __init__(self, array: np.ndarray):
        self.array = array
        found = file_of(array)
        self.fd = os.open(found[0], os.O_RDONLY) if found else None
        self.offset = found[1] if found else 0
        self._closer = weakref.finalize(self, os.close, self.fd) if found else None
        self.buffer = np.empty(0, dtype=array.dtype)

    def read(self, spans: Sequence[tuple[int, int]], extra: int = 0) -> np.ndarray:
        """array[lo:hi] of every span, concatenated, in a buffer reused by the next call
        (`extra` spare elements behind them, for the caller)."""
        total = sum(hi - lo for lo, hi in spans)
        if self.fd is None and len(spans) == 1 and not extra:
            lo, hi = spans[0]
            return self.array[lo:hi]
        if self.buffer.shape[0] < total + extra:
            self.buffer = np.empty(int((total + extra) * 1.25) + 16, dtype=self.array.dtype)
        out = self.buffer[:total + extra]
        pos = 0
        size = self.array.itemsize
        for lo, hi in spans:
            if self.fd is None:
                out[pos:pos + hi - lo] = self.array[lo:hi]
            else:
                pread_into(self.fd, out[pos:pos + hi - lo], self.offset + lo * size)
            pos += hi - lo
        return out

    def close(self) -> None:
        if self._closer is not None:
            self._closer()
            self.fd = None


class RowReader:
    """Reads row ranges of a CSR matrix (scipy CSR or an (indptr, indices, data) tuple)
    as a compact CSR of their own: (indptr from 0, indices, data).

    `data` of a binary feature matrix is one broadcast 1.0 (stride 0, matrix.py) and
    stays one; any other data is read like the indices.
    """

    def __init__(self, X: sp.csr_matrix | Rows):
        indptr, indices, data = (X.indptr, X.indices, X.data) if sp.issparse(X) else X
        self.n_rows = int(indptr.shape[0] - 1)
        self._indptr, self._indices = ArrayReader(indptr), ArrayReader(indices)
        self._ones = data.ndim == 1 and data.shape[0] > 0 and data.strides[0] == 0
        self._one = data[:1] if self._ones else None
        self._data = None if self._ones or data.shape[0] == 0 else ArrayReader(data)
        self._dtype = data.dtype

    def read(self, spans: Sequence[tuple[int, int]]) -> Rows:
        """Rows lo..hi-1 of every span (in the order given) as one CSR triple."""
        spans = [(int(lo), int(hi)) for lo, hi in spans if hi > lo]
        if not spans:
            return np.zeros(1, dtype=np.int64), np.empty(0, dtype=np.int32), np.empty(0, dtype=self._dtype)
        ptr = self._indptr.read([(lo, hi + 1) for lo, hi in spans]).astype(np.int64)
        lengths = np.array([hi - lo + 1 for lo, hi in spans], dtype=np.int64)
        last = np.cumsum(lengths) - 1
        first = last - lengths + 1
        begins, ends = ptr[first], ptr[last]
        row_nnz = np.diff(ptr)
        if len(spans) > 1:  # drop the steps from one span's end to the next one's start
            row_nnz = np.delete(row_nnz, last[:-1])
        indptr = np.zeros(row_nnz.shape[0] + 1, dtype=np.int64)
        np.cumsum(row_nnz, out=indptr[1:])
        entry_spans = list(zip(begins.tolist(), ends.tolist()))
        indices = self._indices.read(entry_spans)
        if self._ones:
            data = np.broadcast_to(self._one, (indices.shape[0],))
        elif self._data is None:
            data = np.empty(0, dtype=self._dtype)
        else:
            data = self._data.read(entry_spans)
        return indptr, indices, data

    def row_nnz(self, lo: int, hi: int) -> np.ndarray:
        """Stored entries of rows lo..hi-1 (reads only the row pointers)."""
        return np.diff(self._indptr.read([(int(lo), int(hi) + 1)]).astype(np.int64))

    def close(self) -> None:
        for reader in (self._indptr, self._indices, self._data):
            if reader is not None:
                reader.close()

    def __enter__(self) -> "RowReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def chunk_bounds(indptr: np.ndarray, chunk_nnz: int = CHUNK_NNZ, lo: int = 0, hi: int | None = None
                 ) -> np.ndarray:
    """Row boundaries [lo, ..., hi] that cut rows lo..hi-1 into consecutive chunks of
    about chunk_nnz stored entries at the mean row length (reads two entries of indptr,
    which may be a mapped file that must not be faulted in whole)."""
    hi = int(indptr.shape[0] - 1) if hi is None else int(hi)
    if hi <= lo:
        return np.array([lo], dtype=np.int64)
    nnz = int(indptr[hi]) - int(indptr[lo])
    rows = max(1, int(max(int(chunk_nnz), 1) * (hi - lo) // max(nnz, 1)))
    return np.append(np.arange(lo, hi, rows, dtype=np.int64), np.int64(hi))


def iter_row_chunks(X: sp.csr_matrix | Rows, chunk_nnz: int = CHUNK_NNZ, lo: int = 0,
                    hi: int | None = None) -> Iterator[tuple[int, int, Rows]]:
    """(first row, end row, CSR triple of those rows) for consecutive chunks of rows lo..hi-1."""
    indptr = X.indptr if sp.issparse(X) else X[0]
    bounds = chunk_bounds(indptr, chunk_nnz, lo, hi)
    with RowReader(X) as reader:
        for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            yield a, b, reader.read([(a, b)])
