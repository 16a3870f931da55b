"""A bounded LRU cache of serialized Score responses.

A tuning run (MERT, MIRA) decodes the same dev set every iteration, so the same
sentence with the same phrase pairs is asked for again and again. The key is (model,
version actually served, digest of the request bytes): a new version never sees the
old version's answers, and a byte-identical request gets a byte-identical answer.
It stores response bytes, never model objects; capacity 0 disables it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict


class ResultCache:
    """Thread-safe LRU over at most `capacity` entries (one per distinct request)."""

    def __init__(self, capacity: int):
        if capacity < 0:
            raise ValueError(f"cache capacity must be >= 0, got {capacity}")
        self.capacity = capacity
        self._entries: OrderedDict[tuple, bytes] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.capacity > 0

    def get(self, key: tuple) -> bytes | None:
        if not self.capacity:
            return None
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def put(self, key: tuple, value: bytes) -> None:
        if not self.capacity:
            return
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)
