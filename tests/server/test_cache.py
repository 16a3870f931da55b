"""The result cache is a bounded LRU: it never holds more than its capacity in entries nor
more than its byte bound in answers, evicts the least recently used entry, refuses an
answer too large to be worth a quarter of it, and a bound of 0 stores nothing."""

from __future__ import annotations

import pytest

from server.cache import ENTRY_OVERHEAD, ResultCache


def test_least_recently_used_entry_is_evicted():
    cache = ResultCache(2, 1 << 20)
    cache.put(b"a", ("m", 0, 1, 3, b"A"))
    cache.put(b"b", ("m", 0, 1, 3, b"B"))
    assert cache.get(b"a")[-1] == b"A"  # a is now the most recent
    cache.put(b"c", ("m", 0, 1, 3, b"C"))
    assert len(cache) == 2
    assert cache.get(b"b") is None and cache.get(b"a") is not None and cache.get(b"c") is not None


def test_bytes_are_bounded_whatever_the_entry_count():
    answer = 1000
    cache = ResultCache(1024, 4 * (answer + ENTRY_OVERHEAD))
    for i in range(10):
        assert cache.put(bytes([i]), ("m", 0, 1, 3, b"x" * answer))
        assert cache.nbytes <= cache.max_bytes
    assert len(cache) == 4 and cache.nbytes == 4 * (answer + ENTRY_OVERHEAD)
    assert cache.get(bytes([9])) is not None and cache.get(bytes([5])) is None
    cache.put(bytes([9]), ("m", 0, 1, 3, b"y" * 10))  # replacing an entry re-counts it
    assert cache.nbytes == 3 * (answer + ENTRY_OVERHEAD) + 10 + ENTRY_OVERHEAD


def test_an_answer_over_a_quarter_of_the_bound_is_not_cached():
    cache = ResultCache(1024, 4000)
    cache.put(b"small", ("m", 0, 1, 3, b"s"))
    assert not cache.put(b"big", ("m", 0, 1, 3, b"b" * 1000))
    assert cache.get(b"big") is None and cache.get(b"small") is not None


@pytest.mark.parametrize("capacity, max_bytes", [(0, 1 << 20), (16, 0)])
def test_either_bound_zero_disables_it(capacity, max_bytes):
    cache = ResultCache(capacity, max_bytes)
    cache.put(b"a", ("m", 0, 1, 3, b"A"))
    assert not cache.enabled and cache.get(b"a") is None and len(cache) == 0


def test_negative_bounds_are_refused():
    with pytest.raises(ValueError):
        ResultCache(-1, 10)
    with pytest.raises(ValueError):
        ResultCache(10, -1)
