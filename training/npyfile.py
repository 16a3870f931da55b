"""A .npy file written block by block, its length known only at the end.

Blocks go to a side file behind room for the .npy header; `finish` writes the header
into that room (then fsyncs and renames the side file into place), so memory stays one
block however large the array grows and the data is never copied again. (A header that
would not fit the room, which cannot happen below 10^18 rows, is written the old way:
header, then the data copied behind it.) `append_npy` appends the data of a .npy file
another process wrote, copied by the kernel (no pickling, no pass through Python).
Arrays may have trailing dimensions (e.g. [n, 2]); blocks are appended along axis 0.
It must not decide what is written.
"""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path

import numpy as np


def _header(dtype: np.dtype, shape: tuple[int, ...]) -> bytes:
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(out, {"descr": np.lib.format.dtype_to_descr(dtype),
                                               "fortran_order": False, "shape": shape})
    return out.getvalue()


class NpyAppender:
    def __init__(self, path: Path, dtype: np.dtype, tail: tuple[int, ...] = ()):
        self.path, self.dtype, self.tail, self.count = Path(path), np.dtype(dtype), tuple(tail), 0
        self._raw_path = self.path.with_suffix(".raw")
        self._room = len(_header(self.dtype, (10 ** 18 - 1, *self.tail)))
        self._raw = open(self._raw_path, "wb")
        self._raw.write(b"\0" * self._room)

    def append(self, block: np.ndarray) -> None:
        block = np.ascontiguousarray(block, dtype=self.dtype)
        if block.shape[1:] != self.tail:
            raise ValueError(f"{self.path.name}: block of shape {block.shape}, expected (n, {self.tail})")
        self._raw.write(memoryview(block).cast("B") if block.size else b"")
        self.count += int(block.shape[0])

    def append_npy(self, path: str | os.PathLike) -> None:
        """Append the array of the .npy file at `path` (this dtype and tail), copied by the kernel."""
        with open(path, "rb") as src:
            np.lib.format.read_magic(src)
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(src)
            if np.dtype(dtype) != self.dtype or tuple(shape[1:]) != self.tail or fortran:
                raise ValueError(f"{path}: a {dtype} array of shape {shape}, expected {self.dtype} (n, {self.tail})")
            offset, size = src.tell(), os.fstat(src.fileno()).st_size
            self._raw.flush()
            while offset < size:
                offset += os.sendfile(self._raw.fileno(), src.fileno(), offset, size - offset)
            self._raw.seek(0, os.SEEK_END)
        self.count += int(shape[0])

    def finish(self) -> None:
        header = _header(self.dtype, (self.count, *self.tail))
        if len(header) == self._room:
            self._raw.seek(0)
            self._raw.write(header)
            self._raw.flush()
            os.fsync(self._raw.fileno())
            self._raw.close()
            os.replace(self._raw_path, self.path)
            return
        self._raw.close()
        with open(self.path, "wb") as fh, open(self._raw_path, "rb") as raw:
            fh.write(header)
            raw.seek(self._room)
            shutil.copyfileobj(raw, fh, 1 << 24)
            fh.flush()
            os.fsync(fh.fileno())
        self._raw_path.unlink()

    def close(self) -> None:
        self._raw.close()
