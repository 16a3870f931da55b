"""The table's .gz deflated on threads: one gzip member that every reader inflates, the
same bytes for any number of threads and however the text was written."""

from __future__ import annotations

import gzip
import io
import shutil
import subprocess
import zlib

import numpy as np
import pytest

from training.pgzip import ParallelGzipWriter


def _gz(data: bytes, threads: int, cut: int, block: int = 4096) -> bytes:
    out = io.BytesIO()
    with ParallelGzipWriter(out, threads=threads, block=block) as writer:
        for lo in range(0, len(data), cut):
            writer.write(data[lo:lo + cut])
    return out.getvalue()


TEXT = b"".join(b"%d ||| w%d x ||| 0.5 0.25 0.25\n" % (i, i % 97) for i in range(20_000))


@pytest.mark.parametrize("data", [b"", b"x", b"a\n" * 2048, TEXT,
                                  np.random.default_rng(0).bytes(50_000)])
def test_the_bytes_depend_on_the_text_only(data):
    one = _gz(data, threads=1, cut=max(len(data), 1))
    assert _gz(data, threads=3, cut=1000) == _gz(data, threads=2, cut=4096) == one
    assert gzip.decompress(one) == data


def test_one_member_that_zlib_and_gzip_read_and_compresses_like_one_stream():
    gz = _gz(TEXT, threads=2, cut=70_000)
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)  # one gzip member, nothing after it
    assert inflater.decompress(gz) == TEXT and inflater.eof and inflater.unused_data == b""
    assert len(gz) < 1.05 * len(gzip.compress(TEXT, mtime=0))
    if shutil.which("gzip"):
        assert subprocess.run(["gzip", "-dc"], input=gz, capture_output=True, check=True).stdout == TEXT
