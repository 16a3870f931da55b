"""A bounded LRU cache of serialized Score responses.

A tuning run (MERT, MIRA) decodes the same dev set every iteration, so the same
sentence with the same phrase pairs is asked for again and again. The key is the digest
of the request bytes (which name the model and the requested version); an entry also
records the version that answered, and the service uses it only while the request still
resolves to that version -- in effect the key is (model, version served, digest), a new
version never sees the old version's answers, and a repeat is answered without parsing.
It stores response bytes (with the few facts needed to check that the entry's version
is still the one the request resolves to), never model objects; capacity 0 disables it.
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
        self._entries: OrderedDict[bytes, tuple] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.capacity > 0

    def get(self, key: bytes) -> tuple | None:
        if not self.capacity:
            return None
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def put(self, key: bytes, value: tuple) -> None:
        if not self.capacity:
            return
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)
