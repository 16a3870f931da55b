"""A gzip file deflated on several threads, the same bytes for any number of threads.

pigz's layout: the text is cut into blocks of BLOCK bytes at fixed offsets of the
uncompressed text; each block is deflated on its own, with the previous block's last
32 KiB as its dictionary (so it compresses about as well as one stream: matches may
reach back across the cut) and ends with a sync flush (a byte-aligned empty stored
block), and an empty final block closes the stream. The blocks' raw deflate data, one
after the other, are one deflate stream, so the file is ONE gzip member (header, that
stream, CRC-32 and length of the whole text) that every reader inflates like any other:
Python's gzip, zcat, and Moses's util::ReadCompressed / InputFileStream (zlib's inflate
with gzip detection) all read it; no reader needs to support multi-member files.

The bytes depend on the text, BLOCK and the level only: never on the threads, nor on how
the text was cut into write() calls. zlib releases the GIL while it deflates, so the
threads compress in parallel with each other and with whatever the writing thread does
meanwhile (lexical renders its next partitions). Memory: about 2 x threads blocks.
It must not know what it compresses.
"""

from __future__ import annotations

import struct
import zlib
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import BinaryIO

#: Uncompressed bytes per independently deflated block (pigz uses 128 KiB).
BLOCK = 1 << 20
_WINDOW = 32 << 10  # deflate's window: the dictionary handed to the next block
# The gzip header of Python's GzipFile(filename="", mtime=0) at levels 2-8: no name, no
# time, xfl 0, OS unknown.
_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
_FINAL_EMPTY_BLOCK = b"\x03\x00"  # BFINAL=1, fixed Huffman, end-of-block


def _deflate(block: bytes, dictionary: bytes, level: int) -> bytes:
    if dictionary:
        c = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS, zlib.DEF_MEM_LEVEL,
                             zlib.Z_DEFAULT_STRATEGY, dictionary)
    else:
        c = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
    return c.compress(block) + c.flush(zlib.Z_SYNC_FLUSH)


class ParallelGzipWriter:
    """write(bytes) then close(): a gzip stream on `fileobj` (left open), deflated by
    `threads` threads (1: in the calling thread, the same bytes)."""

    def __init__(self, fileobj: BinaryIO, threads: int = 1, level: int = 6, block: int | None = None):
        self._out, self._level, self._block = fileobj, int(level), int(block or BLOCK)
        self._pool = ThreadPoolExecutor(max_workers=threads) if threads > 1 else None
        self._window = 2 * max(1, threads)
        self._pending: deque = deque()
        self._buffer = bytearray()
        self._dictionary = b""
        self._crc = 0
        self._size = 0
        self._out.write(_HEADER)

    def write(self, data) -> int:
        view = memoryview(data).cast("B")
        self._crc = zlib.crc32(view, self._crc)
        self._size += view.nbytes
        self._buffer += view
        if len(self._buffer) >= self._block:
            whole = len(self._buffer) // self._block * self._block
            for lo in range(0, whole, self._block):
                self._submit(bytes(self._buffer[lo:lo + self._block]))
            del self._buffer[:whole]
        return view.nbytes

    def _submit(self, block: bytes) -> None:
        dictionary, self._dictionary = self._dictionary, block[-_WINDOW:]
        if self._pool is None:
            self._out.write(_deflate(block, dictionary, self._level))
            return
        self._pending.append(self._pool.submit(_deflate, block, dictionary, self._level))
        while len(self._pending) > self._window or (self._pending and self._pending[0].done()):
            self._out.write(self._pending.popleft().result())

    def close(self) -> None:
        """Deflate what is left, end the stream and write the trailer (fileobj stays open)."""
        try:
            if self._buffer:
                self._submit(bytes(self._buffer))
                self._buffer.clear()
            while self._pending:
                self._out.write(self._pending.popleft().result())
            self._out.write(_FINAL_EMPTY_BLOCK + struct.pack("<II", self._crc, self._size & 0xFFFFFFFF))
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> "ParallelGzipWriter":
        return self

    def __exit__(self, exc_type, *_) -> None:
        if exc_type is None:
            self.close()
        elif self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
