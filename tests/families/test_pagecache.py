"""pagecache hands back the pages of read-only file mappings and never touches other memory."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from training.families.solvers.pagecache import file_mapped, release, will_need


def _rss_file() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssFile:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no RssFile in /proc/self/status")


def test_only_read_only_file_mappings_count(tmp_path):
    np.save(tmp_path / "a.npy", np.arange(1000, dtype=np.int32))
    mapped = np.load(tmp_path / "a.npy", mmap_mode="r")
    assert file_mapped(mapped) and file_mapped(np.asarray(mapped)[10:20])
    assert not file_mapped(np.load(tmp_path / "a.npy", mmap_mode="r+"))
    assert not file_mapped(np.load(tmp_path / "a.npy", mmap_mode="c"))  # private copy-on-write
    assert not file_mapped(np.arange(10))


def test_anonymous_memory_is_left_alone():
    """MADV_DONTNEED would zero private memory: release must not advise it."""
    a = np.arange(4 << 20, dtype=np.int32)  # 16 MiB, page-spanning
    release(a)
    release(a, 1000, 3 << 20)
    will_need(a)
    assert int(a[123456]) == 123456 and np.array_equal(a[-5:], np.arange((4 << 20) - 5, 4 << 20))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_released_pages_leave_the_resident_set_and_read_back_the_same(tmp_path):
    n = 16 << 20  # 64 MiB of int32
    np.save(tmp_path / "big.npy", np.arange(n, dtype=np.int32))
    mapped = np.asarray(np.load(tmp_path / "big.npy", mmap_mode="r"))
    before = _rss_file()
    assert int(mapped.sum(dtype=np.int64)) == n * (n - 1) // 2  # every page touched
    touched = _rss_file()
    assert touched - before > 48 << 20
    release(mapped, 0, n // 2)
    assert touched - _rss_file() > 24 << 20  # the first half is no longer resident
    release(mapped)
    assert _rss_file() - before < 16 << 20
    assert int(mapped.sum(dtype=np.int64)) == n * (n - 1) // 2  # and reads back from the file
