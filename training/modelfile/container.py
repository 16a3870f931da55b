"""The weight-file container: magic, version, sanity values, JSON metadata, aligned arrays, SHA-256.

Every trainer writes one of these and the server reads it (into memory, never mapped). This module knows bytes, not
models: it stores a metadata dict and named numpy arrays and gives them back exactly,
or raises ModelFileError. What the arrays mean is training/modelfile/model.py's business.
Never pickle; never return anything from a file whose checksum does not match.

Layout (all integers little-endian):

    0    magic, 32 bytes       MAGIC, or INCOMPLETE_MAGIC while the writer is still at work
    32   format version u32, flags u32 (0)
    40   sanity block, 24 bytes: f32 0.0, f32 1.0, f32 -0.5, u32 0x01020304, u64 SANITY_U64
    64   header length u64, data offset u64, data length u64, file length u64
    96   header: UTF-8 JSON {"metadata": {...}, "arrays": [{name, dtype, shape, offset, nbytes}]}
    ...  zero padding to a multiple of 64 = data offset
         arrays, each at a 64-byte-aligned offset relative to the data offset
    end  SHA-256 (32 bytes) of everything before it, computed with MAGIC in place

As in KenLM's binary format, the incomplete magic is written first and replaced only
after the checksum is on disk, so a file cut short by a crash is recognised as such.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from training.atomic import atomic_writer
from training.errors import ModelFileError

MAGIC = b"moses-reorder weight file\n".ljust(32, b"\0")
INCOMPLETE_MAGIC = b"moses-reorder INCOMPLETE file\n".ljust(32, b"\0")
FORMAT_VERSION = 1
SANITY_U64 = 0x0123456789ABCDEF
ALIGN = 64
_PREAMBLE = struct.Struct("<32sII fffIQ QQQQ")
assert _PREAMBLE.size == 96
_SANITY = (0.0, 1.0, -0.5, 0x01020304, SANITY_U64)
_DIGEST = 32
# dtypes a weight file may hold, by their little-endian numpy name.
DTYPES = ("<u8", "<i8", "<u4", "<i4", "<u2", "<i2", "|u1", "|i1", "<f8", "<f4", "<f2")


def _pad(n: int) -> int:
    return -n % ALIGN


@dataclass(frozen=True)
class WeightFile:
    """What `read_weight_file` returns: arrays are read-only views of the file's bytes in memory."""

    path: str
    metadata: dict[str, Any]
    arrays: dict[str, np.ndarray]
    format_version: int
    file_size: int
    sha256: str


def _layout(arrays: dict[str, np.ndarray]) -> tuple[list[dict[str, Any]], list[np.ndarray], int]:
    entries, payload, offset = [], [], 0
    for name in sorted(arrays):
        if not isinstance(name, str) or not name:
            raise ValueError(f"array name {name!r} must be a non-empty string")
        arr = np.asarray(arrays[name])
        dtype = arr.dtype.newbyteorder("<") if arr.dtype.byteorder not in ("|", "<") else arr.dtype
        if dtype.str not in DTYPES:
            raise ValueError(f"array {name!r}: dtype {arr.dtype} cannot be stored in a weight file")
        arr = np.asarray(arr, dtype=dtype, order="C")  # (ascontiguousarray would make 0-d arrays 1-d)
        entries.append({"name": name, "dtype": dtype.str, "shape": list(arr.shape),
                        "offset": offset, "nbytes": int(arr.nbytes)})
        payload.append(arr)
        offset += arr.nbytes + _pad(arr.nbytes)
    return entries, payload, offset


def write_weight_file(path: str | os.PathLike, metadata: dict[str, Any], arrays: dict[str, np.ndarray]) -> str:
    """Write atomically (temp file in the same directory, fsync, rename); return the SHA-256 hex."""
    path = Path(path)
    try:
        entries, payload, data_len = _layout(arrays)
        header = json.dumps({"metadata": metadata, "arrays": entries}, sort_keys=True, ensure_ascii=False,
                            allow_nan=False).encode("utf-8")
    except (ValueError, TypeError) as exc:  # a bad array, or metadata JSON cannot hold (NaN, objects)
        raise ModelFileError(f"cannot be written: {exc}", path) from None
    data_offset = _PREAMBLE.size + len(header)
    data_offset += _pad(data_offset)
    file_len = data_offset + data_len + _DIGEST
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_writer(path) as out:
        digest = hashlib.sha256()

        def emit(chunk: bytes | memoryview, hashed: bool = True) -> None:
            out.write(chunk)
            if hashed:
                digest.update(chunk)

        rest = _PREAMBLE.pack(MAGIC, FORMAT_VERSION, 0, *_SANITY, len(header), data_offset, data_len,
                              file_len)[len(MAGIC):]
        digest.update(MAGIC)
        emit(INCOMPLETE_MAGIC, hashed=False)
        emit(rest)
        emit(header)
        emit(b"\0" * (data_offset - _PREAMBLE.size - len(header)))
        for arr in payload:
            emit(memoryview(arr).cast("B") if arr.nbytes else b"")
            emit(b"\0" * _pad(arr.nbytes))
        hexdigest = digest.hexdigest()
        out.write(digest.digest())
        out.flush()
        os.fsync(out.fileno())
        out.seek(0)
        out.write(MAGIC)  # only now is the file complete
    return hexdigest


def _fail(path: str, message: str) -> ModelFileError:
    return ModelFileError(message, path)


def _aligned_buffer(size: int) -> np.ndarray:
    """A uint8 buffer of `size` bytes starting on an ALIGN boundary (as a page-aligned
    mapping would), so every array's 64-byte file alignment is an address alignment too."""
    raw = np.empty(size + ALIGN, dtype=np.uint8)
    skip = -raw.ctypes.data % ALIGN
    return raw[skip:skip + size]


def _check_preamble(spath: str, preamble: bytes, size: int) -> tuple[int, int, int, int]:
    """(version, header length, data offset, data length) of a file of `size` bytes whose first
    _PREAMBLE.size bytes are `preamble`, or ModelFileError saying what is wrong with them."""
    magic = preamble[:len(MAGIC)]
    if magic == INCOMPLETE_MAGIC:
        raise _fail(spath, "incomplete weight file (its writer did not finish); write it again")
    if magic != MAGIC:
        raise _fail(spath, "not a moses-reorder weight file (wrong magic bytes)")
    (_, version, flags, s0, s1, s2, s3, s4, header_len, data_offset, data_len,
     file_len) = _PREAMBLE.unpack_from(preamble, 0)
    if version > FORMAT_VERSION:
        raise _fail(spath, f"weight file format {version} is newer than this software reads "
                           f"({FORMAT_VERSION}); upgrade moses-reorder")
    if version < 1:
        raise _fail(spath, f"weight file format {version} is not valid")
    if (s0, s1, s2, s3, s4) != _SANITY:
        raise _fail(spath, "sanity values do not match: the file was written with another byte order "
                           "or number format, or is corrupt")
    if file_len != size:
        what = "truncated" if file_len > size else "has trailing bytes"
        raise _fail(spath, f"weight file {what}: header says {file_len} bytes, file has {size}")
    if (flags != 0 or data_offset % ALIGN or data_offset < _PREAMBLE.size + header_len
            or data_offset + data_len + _DIGEST != file_len):
        raise _fail(spath, "inconsistent weight-file header (corrupt file)")
    return version, header_len, data_offset, data_len


def read_weight_file(path: str | os.PathLike) -> WeightFile:
    """Read a weight file into memory and check it completely before returning anything from it.

    The file is read, not mapped: the arrays returned are views of a private copy, so a
    file truncated or copied over in place afterwards (an operator's `cp` onto a served
    model) can neither crash the reader with SIGBUS nor change what it validated. Model
    files are small (megabytes to a few hundred MB), and the checksum is over exactly
    the bytes that are used. The preamble (magic, version, sanity values, lengths) is read
    and checked first, so a foreign file of any size costs 96 bytes of reading, not its size.
    """
    spath = os.fspath(path)
    try:
        with open(spath, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            preamble = f.read(_PREAMBLE.size)
            if size < _PREAMBLE.size + _DIGEST:
                head = preamble[:len(MAGIC)]
                if head and (MAGIC.startswith(head) or INCOMPLETE_MAGIC.startswith(head)):
                    raise _fail(spath, f"truncated weight file ({size} bytes); write it again")
                raise _fail(spath, "not a moses-reorder weight file (too short, wrong magic bytes)")
            version, header_len, data_offset, data_len = _check_preamble(spath, preamble, size)
            mm = _aligned_buffer(size)
            mm[:len(preamble)] = np.frombuffer(preamble, dtype=np.uint8)
            got = len(preamble) + f.readinto(memoryview(mm)[len(preamble):])
            if got != size or f.read(1):
                raise _fail(spath, "the weight file changed size while it was read; read it again")
    except OSError as exc:
        raise _fail(spath, f"cannot read weight file: {exc.strerror or exc}") from exc
    view = memoryview(mm)
    digest = hashlib.sha256(view[:size - _DIGEST]).digest()
    if digest != bytes(view[size - _DIGEST:]):
        raise _fail(spath, "SHA-256 mismatch: the weight file is corrupt")
    try:
        header = json.loads(bytes(view[_PREAMBLE.size:_PREAMBLE.size + header_len]).decode("utf-8"))
        metadata, entries = header["metadata"], header["arrays"]
        if not isinstance(metadata, dict) or not isinstance(entries, list):
            raise TypeError("metadata must be an object and arrays a list")
        arrays = {}
        for e in entries:
            name, dtype, shape, offset, nbytes = e["name"], e["dtype"], e["shape"], e["offset"], e["nbytes"]
            if dtype not in DTYPES or name in arrays:
                raise ValueError(f"array {name!r}: bad dtype or duplicate name")
            if not all(isinstance(d, int) and d >= 0 for d in shape):
                raise ValueError(f"array {name!r}: bad shape")
            count = int(np.prod(shape, dtype=np.int64)) if shape else 1
            itemsize = np.dtype(dtype).itemsize
            if (not isinstance(offset, int) or offset < 0 or offset % ALIGN or nbytes != count * itemsize
                    or offset + nbytes > data_len):
                raise ValueError(f"array {name!r}: bad offset or size")
            arr = np.frombuffer(mm, dtype=np.dtype(dtype), count=count, offset=data_offset + offset)
            arr.flags.writeable = False  # views of the one private copy: nobody writes to it
            arrays[name] = arr.reshape(tuple(shape))
    except (ValueError, TypeError, KeyError, UnicodeDecodeError, RecursionError) as exc:
        raise _fail(spath, f"bad weight-file header: {exc}") from exc
    return WeightFile(spath, metadata, arrays, version, size, digest.hex())
