"""The result cache is a bounded LRU: it never holds more than its capacity, evicts the
least recently used entry, and capacity 0 stores nothing."""

from __future__ import annotations

import pytest

from server.cache import ResultCache


def test_least_recently_used_entry_is_evicted():
    cache = ResultCache(2)
    cache.put(b"a", ("m", 0, 1, 3, b"A"))
    cache.put(b"b", ("m", 0, 1, 3, b"B"))
    assert cache.get(b"a")[-1] == b"A"  # a is now the most recent
    cache.put(b"c", ("m", 0, 1, 3, b"C"))
    assert len(cache) == 2
    assert cache.get(b"b") is None and cache.get(b"a") is not None and cache.get(b"c") is not None


def test_capacity_zero_disables_it():
    cache = ResultCache(0)
    cache.put(b"a", ("m", 0, 1, 3, b"A"))
    assert not cache.enabled and cache.get(b"a") is None and len(cache) == 0
    with pytest.raises(ValueError):
        ResultCache(-1)
