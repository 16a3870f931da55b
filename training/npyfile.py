"""A .npy file written block by block, its length known only at the end.

Blocks go to a raw side file; `finish` writes the .npy header and copies the raw bytes
behind it (then fsyncs), so memory stays one block however large the array grows.
Arrays may have trailing dimensions (e.g. [n, 2]); blocks are appended along axis 0.
It must not decide what is written.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np


class NpyAppender:
    def __init__(self, path: Path, dtype: np.dtype, tail: tuple[int, ...] = ()):
        self.path, self.dtype, self.tail, self.count = Path(path), np.dtype(dtype), tuple(tail), 0
        self._raw_path = self.path.with_suffix(".raw")
        self._raw = open(self._raw_path, "wb")

    def append(self, block: np.ndarray) -> None:
        block = np.ascontiguousarray(block, dtype=self.dtype)
        if block.shape[1:] != self.tail:
            raise ValueError(f"{self.path.name}: block of shape {block.shape}, expected (n, {self.tail})")
        self._raw.write(block.tobytes())
        self.count += int(block.shape[0])

    def finish(self) -> None:
        self._raw.close()
        header = {"descr": np.lib.format.dtype_to_descr(self.dtype), "fortran_order": False,
                  "shape": (self.count, *self.tail)}
        with open(self.path, "wb") as fh, open(self._raw_path, "rb") as raw:
            np.lib.format.write_array_header_1_0(fh, header)
            shutil.copyfileobj(raw, fh, 1 << 24)
            fh.flush()
            os.fsync(fh.fileno())
        self._raw_path.unlink()

    def close(self) -> None:
        self._raw.close()
