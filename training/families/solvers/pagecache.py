"""Resident pages of read-only file-mapped arrays: ask for them early, give them back.

The feature cache is memory-mapped (vocab.py). Pages a process has touched stay in its
resident set until the kernel needs the memory, so a trainer that reads the whole
matrix once "uses" all of it for the rest of its life. The shrinking solvers read the
full matrix only in chunks and then work on a compact copy of the active rows; they
hand each chunk's pages back once it is done (MADV_DONTNEED: the process forgets the
mapping, the file's pages stay in the page cache for the next reader) and ask for the
next chunk ahead (MADV_WILLNEED: read-ahead instead of one page fault per row).

Only arrays backed by a read-only `np.memmap` are touched: MADV_DONTNEED on private
anonymous memory would zero it. Everything else, and platforms without madvise, make
these calls no-ops.
"""

from __future__ import annotations

import ctypes
import mmap

import numpy as np

_PAGE = mmap.PAGESIZE
_DONTNEED = getattr(mmap, "MADV_DONTNEED", None)
_WILLNEED = getattr(mmap, "MADV_WILLNEED", None)
try:
    _libc = ctypes.CDLL(None, use_errno=True)
    _madvise = _libc.madvise
    _madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    _madvise.restype = ctypes.c_int
except (OSError, AttributeError):  # no libc madvise (not Linux/BSD)
    _madvise = None


def file_mapped(array: np.ndarray) -> bool:
    """True when `array`'s memory is a read-only file mapping (np.load mmap_mode='r')."""
    node = array
    while node is not None:
        if isinstance(node, np.memmap):
            return node.mode == "r"
        node = getattr(node, "base", None)
    return False


def _advise(array: np.ndarray, lo: int, hi: int, advice: int | None) -> None:
    if _madvise is None or advice is None or hi <= lo or array.ndim != 1 or not file_mapped(array):
        return
    if array.strides[0] != array.itemsize:
        return
    start = array.ctypes.data + lo * array.itemsize
    end = array.ctypes.data + hi * array.itemsize
    start -= start % _PAGE  # outward: a neighbour's page is only faulted in again
    _madvise(start, end - start, advice)  # advice only: a failure changes nothing


def release(array: np.ndarray, lo: int = 0, hi: int | None = None) -> None:
    """Drop this process's resident pages of array[lo:hi] (file-mapped arrays only)."""
    _advise(array, lo, array.shape[0] if hi is None else hi, _DONTNEED)


def will_need(array: np.ndarray, lo: int = 0, hi: int | None = None) -> None:
    """Start reading array[lo:hi] from the file ahead of use (file-mapped arrays only)."""
    _advise(array, lo, array.shape[0] if hi is None else hi, _WILLNEED)
