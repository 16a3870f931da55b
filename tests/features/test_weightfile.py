"""The weight-file container: exact round trip, atomic writes, and one clear error for bad files."""

from __future__ import annotations

import json
import os
import shutil
import stat
import struct
import tempfile
from pathlib import Path

import numpy as np
import pytest

from training.errors import ModelFileError
from training.modelfile.container import FORMAT_VERSION, INCOMPLETE_MAGIC, MAGIC, read_weight_file, write_weight_file


def small_arrays(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {
        "keys": np.unique(rng.integers(0, 2**64 - 1, size=7, dtype=np.uint64, endpoint=True)),
        "weights": rng.normal(size=(4, 3)).astype(np.float32),
        "half": rng.normal(size=(2, 5)).astype(np.float16),
        "bias": np.array([0.5, -1.0, 2.0], dtype=np.float32),
        "empty": np.zeros((0, 3), dtype=np.int32),
        "scalar": np.array(3.25, dtype=np.float64),
    }


META = {"family": "test", "nested": {"a": [1, 2, 3]}, "text": "日本語 ok"}


def assert_same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    assert sorted(a) == sorted(b)
    for name in a:
        assert a[name].dtype == b[name].dtype and a[name].shape == b[name].shape, name
        assert a[name].tobytes() == b[name].tobytes(), name


def test_round_trip_exact_and_aligned(tmp_path):
    arrays = small_arrays(np.random.default_rng(1))
    path = tmp_path / "m.mrw"
    digest = write_weight_file(path, META, arrays)
    wf = read_weight_file(path)
    assert wf.metadata == META and wf.format_version == FORMAT_VERSION and wf.sha256 == digest
    assert_same(arrays, wf.arrays)
    raw = path.read_bytes()
    assert raw.startswith(MAGIC) and wf.file_size == len(raw)
    for arr in wf.arrays.values():
        assert not arr.flags.writeable
        if arr.size:  # the mapping starts on a page, so file offsets and addresses align alike
            assert arr.__array_interface__["data"][0] % 64 == 0
    # Offsets are multiples of 64 from the (64-aligned) data start.
    header_len, data_offset = struct.unpack_from("<QQ", raw, 64)
    header = json.loads(raw[96:96 + header_len])
    assert data_offset % 64 == 0 and all(e["offset"] % 64 == 0 for e in header["arrays"])


def test_atomic_write_leaves_no_temp_and_replaces(tmp_path):
    path = tmp_path / "m.mrw"
    write_weight_file(path, {"v": 1}, {"a": np.arange(3, dtype=np.int64)})
    write_weight_file(path, {"v": 2}, {"a": np.arange(5, dtype=np.int64)})
    assert os.listdir(tmp_path) == ["m.mrw"]
    assert read_weight_file(path).metadata == {"v": 2}
    umask = os.umask(0o022)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask  # readable by a server user, not 0600


def test_refuses_unstorable_data(tmp_path):
    # the project's model-file error, naming the file (issue 49), not a bare ValueError
    with pytest.raises(ModelFileError, match="dtype object cannot be stored"):
        write_weight_file(tmp_path / "x", {}, {"obj": np.array([object()])})
    with pytest.raises(ModelFileError):
        write_weight_file(tmp_path / "x", {"nan": float("nan")}, {})
    assert not os.listdir(tmp_path)


@pytest.fixture()
def good_file(tmp_path):
    path = tmp_path / "m.mrw"
    write_weight_file(path, META, small_arrays(np.random.default_rng(2)))
    return path


def error_for(path, data: bytes) -> str:
    path.write_bytes(data)
    with pytest.raises(ModelFileError) as info:
        read_weight_file(path)
    assert str(path) in str(info.value)
    return str(info.value)


def test_incomplete_file(good_file):
    raw = good_file.read_bytes()
    assert "incomplete" in error_for(good_file, INCOMPLETE_MAGIC + raw[len(INCOMPLETE_MAGIC):])


def test_truncated_file(good_file):
    raw = good_file.read_bytes()
    assert "truncated" in error_for(good_file, raw[:-1])
    assert "truncated" in error_for(good_file, raw[:40])
    assert "not a moses-reorder weight file" in error_for(good_file, b"")


def test_foreign_file(good_file):
    assert "not a moses-reorder weight file" in error_for(good_file, b"\x1f\x8b" + b"\0" * 500)
    assert "not a moses-reorder weight file" in error_for(good_file, b"mono swap other\n" * 20)


def test_future_version(good_file):
    raw = bytearray(good_file.read_bytes())
    struct.pack_into("<I", raw, 32, FORMAT_VERSION + 1)
    assert "newer" in error_for(good_file, bytes(raw))


def test_wrong_byte_order_sanity(good_file):
    raw = bytearray(good_file.read_bytes())
    struct.pack_into(">f", raw, 44, 1.0)  # the 1.0 sanity value written big-endian
    assert "sanity" in error_for(good_file, bytes(raw))


def test_corrupt_payload(good_file):
    raw = bytearray(good_file.read_bytes())
    raw[-40] ^= 0x01
    assert "SHA-256" in error_for(good_file, bytes(raw))


def test_missing_file(tmp_path):
    with pytest.raises(ModelFileError, match="cannot read"):
        read_weight_file(tmp_path / "nope")


def test_fuzz_truncations_and_flips(tmp_path):
    """Thousands of damaged copies: each one fails with ModelFileError or reads back identical."""
    rng = np.random.default_rng(3)
    arrays = small_arrays(rng)
    path = tmp_path / "m.mrw"
    write_weight_file(path, META, arrays)
    raw = path.read_bytes()
    # Damaged copies go to memory-backed storage when there is some: on a journalled disk,
    # rewriting a file 3000 times costs more than the whole rest of this test.
    scratch = Path(tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else tmp_path))
    bad = scratch / "bad.mrw"
    fd = os.open(bad, os.O_RDWR | os.O_CREAT)
    outcomes = {"error": 0, "identical": 0}
    for case in range(3000):
        data = bytearray(raw)
        kind = case % 3
        if kind == 0:
            data = data[:int(rng.integers(0, len(raw)))]
        else:
            for _ in range(int(rng.integers(1, 4 if kind == 1 else 40))):
                pos = int(rng.integers(0, len(raw)))
                data[pos] ^= int(rng.integers(1, 256))
        if data == raw:
            continue  # flips that cancelled out: not a damaged file
        os.ftruncate(fd, 0)
        os.pwrite(fd, bytes(data), 0)
        try:
            wf = read_weight_file(bad)
        except ModelFileError:
            outcomes["error"] += 1
            continue
        assert wf.metadata == META
        assert_same(arrays, wf.arrays)
        outcomes["identical"] += 1
    os.close(fd)
    shutil.rmtree(scratch)
    # Every damaged file here differs from what was written, so every one must fail.
    assert outcomes["identical"] == 0 and outcomes["error"] > 2900


def crafted(header: dict, data: bytes = b"\0" * 64) -> bytes:
    """A file with a valid checksum around an arbitrary header: only the header checks can refuse it."""
    import hashlib

    from training.modelfile.container import _PREAMBLE, _SANITY

    raw_header = json.dumps(header).encode()
    data_offset = _PREAMBLE.size + len(raw_header)
    data_offset += -data_offset % 64
    file_len = data_offset + len(data) + 32
    body = _PREAMBLE.pack(MAGIC, FORMAT_VERSION, 0, *_SANITY, len(raw_header), data_offset, len(data), file_len)
    body += raw_header + b"\0" * (data_offset - _PREAMBLE.size - len(raw_header)) + data
    return body + hashlib.sha256(body).digest()


@pytest.mark.parametrize("header", [
    {"metadata": {}},                                                      # no array list
    {"metadata": [], "arrays": []},                                        # metadata not an object
    {"metadata": {}, "arrays": [{"name": "a"}]},                           # incomplete entry
    {"metadata": {}, "arrays": ["a"]},                                     # entry not an object
    {"metadata": {}, "arrays": [{"name": "a", "dtype": "O", "shape": [1], "offset": 0, "nbytes": 8}]},
    {"metadata": {}, "arrays": [{"name": "a", "dtype": "<f4", "shape": "ab", "offset": 0, "nbytes": 8}]},
    {"metadata": {}, "arrays": [{"name": "a", "dtype": "<f4", "shape": [-1], "offset": 0, "nbytes": 4}]},
    {"metadata": {}, "arrays": [{"name": "a", "dtype": "<f4", "shape": [4], "offset": 0, "nbytes": 8}]},
    {"metadata": {}, "arrays": [{"name": "a", "dtype": "<f4", "shape": [32], "offset": 0, "nbytes": 128}]},
    {"metadata": {}, "arrays": [{"name": "a", "dtype": "<f4", "shape": [2], "offset": 3, "nbytes": 8}]},
    {"metadata": {}, "arrays": [{"name": "a", "dtype": "<f4", "shape": [2], "offset": 0, "nbytes": 8},
                                {"name": "a", "dtype": "<f4", "shape": [2], "offset": 0, "nbytes": 8}]},
])
def test_crafted_headers_are_refused(tmp_path, header):
    assert "bad weight-file header" in error_for(tmp_path / "x.mrw", crafted(header))


def test_crafted_valid_header_reads(tmp_path):
    path = tmp_path / "x.mrw"
    path.write_bytes(crafted({"metadata": {"k": 1}, "arrays": [
        {"name": "a", "dtype": "<f4", "shape": [2], "offset": 0, "nbytes": 8}]},
        np.array([1.5, -2.0], "<f4").tobytes() + b"\0" * 56))
    assert read_weight_file(path).arrays["a"].tolist() == [1.5, -2.0]
