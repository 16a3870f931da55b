"""Open-addressing hash tables over 64-bit feature keys, in numba.

Two users: the scorer maps a request's keys to rows of the weight matrix
(`KeyIndex`), and the vocabulary builder counts keys over the training data
(`KeyCounter`). Keys are already finalized hashes (training/features/templates.py), so their low
bits are uniform and serve directly as the slot. This module must not know about
features or models; it only maps uint64 -> int.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from training.jitcache import readonly

EMPTY = np.int32(-1)


def _capacity(n: int) -> int:
    """A power of two with load factor <= 1/2."""
    return 1 << max(4, int(2 * max(n, 1) - 1).bit_length())


@nb.njit(nogil=True, cache=True)
def _build_index(keys, slots):
    mask = np.uint64(slots.shape[0] - 1)
    for row in range(keys.shape[0]):
        s = keys[row] & mask
        while slots[s] != -1:
            s = (s + np.uint64(1)) & mask
        slots[s] = row


@nb.njit(nogil=True, cache=True, inline="always")
def find_row(keys, slots, mask, q):
    """Row of key q, or -1. `mask` is np.uint64(slots.shape[0] - 1)."""
    s = q & mask
    r = slots[s]
    while r != -1 and keys[r] != q:
        s = (s + np.uint64(1)) & mask
        r = slots[s]
    return r


@nb.njit(nogil=True, cache=True)
def _lookup(keys, slots, query, out):
    mask = np.uint64(slots.shape[0] - 1)
    for i in range(query.shape[0]):
        out[i] = find_row(keys, slots, mask, query[i])


class KeyIndex:
    """Distinct keys -> their position in `keys` (-1 when absent).

    Slots hold int32 row numbers only (4 bytes a slot) and compare against the key array
    itself, which may be a read-only view of a mapped weight file.
    """

    def __init__(self, keys: np.ndarray):
        if keys.shape[0] >= np.iinfo(np.int32).max:
            raise ValueError("too many keys for an int32 index")
        self.keys = readonly(keys)  # a model file's keys are; training's are not: one signature
        self.slots = np.full(_capacity(keys.shape[0]), EMPTY, dtype=np.int32)
        _build_index(keys, self.slots)

    def lookup(self, query: np.ndarray) -> np.ndarray:
        out = np.empty(query.shape[0], dtype=np.int32)
        _lookup(self.keys, self.slots, query, out)
        return out

    @property
    def nbytes(self) -> int:
        return int(self.slots.nbytes)


@nb.njit(nogil=True, cache=True)
def _count(table_keys, table_counts, keys, used, limit):
    """Add keys; stop early (returning the position) when the table gets too full."""
    mask = np.uint64(table_keys.shape[0] - 1)
    for i in range(keys.shape[0]):
        q = keys[i]
        s = q & mask
        while table_counts[s] != 0 and table_keys[s] != q:
            s = (s + np.uint64(1)) & mask
        if table_counts[s] == 0:
            if used >= limit:
                return i, used
            table_keys[s] = q
            used += 1
        table_counts[s] += 1
    return keys.shape[0], used


class KeyCounter:
    """Occurrence counts of uint64 keys (uint32 each), growing as needed."""

    def __init__(self, capacity: int = 1 << 20):
        self._keys = np.zeros(_capacity(capacity // 2), dtype=np.uint64)
        self._counts = np.zeros(self._keys.shape[0], dtype=np.uint32)
        self.n_distinct = 0

    def add(self, keys: np.ndarray) -> None:
        start = 0
        while start < keys.shape[0]:
            done, self.n_distinct = _count(self._keys, self._counts, keys[start:], self.n_distinct,
                                           self._keys.shape[0] // 2)
            start += done
            if start < keys.shape[0]:
                self._grow()

    def _grow(self) -> None:
        occupied = self._counts != 0
        old_keys, old_counts = self._keys[occupied], self._counts[occupied]
        self._keys = np.zeros(self._keys.shape[0] * 2, dtype=np.uint64)
        self._counts = np.zeros(self._keys.shape[0], dtype=np.uint32)
        _reinsert(self._keys, self._counts, old_keys, old_counts)

    def items(self) -> tuple[np.ndarray, np.ndarray]:
        """(keys sorted ascending, counts)."""
        occupied = self._counts != 0
        keys, counts = self._keys[occupied], self._counts[occupied]
        order = np.argsort(keys, kind="stable")
        return keys[order], counts[order]

    def kept(self, threshold: int) -> np.ndarray:
        """Sorted keys seen more than `threshold` times."""
        keep = self._counts > threshold
        return np.sort(self._keys[keep])

    @property
    def nbytes(self) -> int:
        return int(self._keys.nbytes + self._counts.nbytes)


@nb.njit(nogil=True, cache=True)
def _reinsert(table_keys, table_counts, keys, counts):
    mask = np.uint64(table_keys.shape[0] - 1)
    for i in range(keys.shape[0]):
        s = keys[i] & mask
        while table_counts[s] != 0:
            s = (s + np.uint64(1)) & mask
        table_keys[s] = keys[i]
        table_counts[s] = counts[i]
