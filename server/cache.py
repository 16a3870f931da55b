"""A bounded LRU cache of serialized Score responses, bounded in entries and in bytes.

A tuning run (MERT, MIRA) decodes the same dev set every iteration, so the same
sentence with the same phrase pairs is asked for again and again. The key is the digest
of the request bytes (which name the model and the requested version); an entry also
records the version that answered, and the service uses it only while the request still
resolves to that version -- in effect the key is (model, version served, digest), a new
version never sees the old version's answers, and a repeat is answered without parsing.
It stores response bytes (with the few facts needed to check that the entry's version
is still the one the request resolves to), never model objects.

Answers range from a few hundred bytes (a short sentence) to several MiB (200,000 pairs
x 6 outputs x 4 bytes = 4.6 MiB), so an entry count alone does not bound memory: the
cache also holds at most `max_bytes` of answers, evicting least recently used entries,
and never stores an answer larger than a quarter of that. Either bound 0 disables it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

# What one entry costs besides its answer bytes: the key, the tuple, the dict slot.
ENTRY_OVERHEAD = 256


def entry_bytes(value: tuple) -> int:
    """The memory an entry is charged: its answer (the last element) plus ENTRY_OVERHEAD."""
    return len(value[-1]) + ENTRY_OVERHEAD


class ResultCache:
    """Thread-safe LRU over at most `capacity` entries and `max_bytes` bytes of answers."""

    def __init__(self, capacity: int, max_bytes: int):
        if capacity < 0:
            raise ValueError(f"cache capacity must be >= 0, got {capacity}")
        if max_bytes < 0:
            raise ValueError(f"cache byte bound must be >= 0, got {max_bytes}")
        self.capacity = capacity
        self.max_bytes = max_bytes
        self.nbytes = 0
        self._entries: OrderedDict[bytes, tuple] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.capacity > 0 and self.max_bytes > 0

    def get(self, key: bytes) -> tuple | None:
        if not self.enabled:
            return None
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def put(self, key: bytes, value: tuple) -> bool:
        """Store `value` (whose last element is the answer bytes); False if it is too large
        to cache (over a quarter of max_bytes: one huge answer must not flush the cache)."""
        size = entry_bytes(value)
        if not self.enabled or size * 4 > self.max_bytes:
            return False
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self.nbytes -= entry_bytes(old)
            self._entries[key] = value
            self.nbytes += size
            while len(self._entries) > self.capacity or self.nbytes > self.max_bytes:
                _, evicted = self._entries.popitem(last=False)
                self.nbytes -= entry_bytes(evicted)
        return True

    def __len__(self) -> int:
        return len(self._entries)
