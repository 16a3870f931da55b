"""Row chunks of a CSR matrix: the same rows whether mapped or in memory, read without
faulting the mapping in."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from training.features.rowchunks import RowReader, chunk_bounds, iter_row_chunks
from mapped_matrix import mapped_csr


def _status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} in /proc/self/status")


@pytest.fixture(scope="module")
def matrix() -> sp.csr_matrix:
    X = sp.random(3000, 500, density=0.03, format="csr", random_state=7, dtype=np.float32)
    X.data[:] = 1.0
    return X


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3000), st.integers(0, 300)), min_size=0, max_size=6))
def test_any_spans_read_the_same_rows_mapped_or_not(matrix, tmp_path_factory, raw):
    spans = [(lo, min(3000, lo + length)) for lo, length in raw]
    expected = sp.vstack([matrix[lo:hi] for lo, hi in spans if hi > lo] or [matrix[:0]]).tocsr()
    mapped = mapped_csr(matrix, tmp_path_factory.mktemp("m"))
    for source in (matrix, mapped, (matrix.indptr, matrix.indices, matrix.data)):
        with RowReader(source) as reader:
            reader.read([(0, 5)])  # buffers are reused: an earlier read must not leak into this one
            indptr, indices, data = reader.read(spans)
            got = sp.csr_matrix((np.asarray(data), indices, indptr), shape=(indptr.shape[0] - 1, 500))
            assert (got != expected).nnz == 0 and got.shape == expected.shape


def test_consecutive_chunks_cover_every_row_once(matrix, tmp_path):
    mapped = mapped_csr(matrix, tmp_path)
    bounds = chunk_bounds(mapped.indptr, 1000)
    assert bounds[0] == 0 and bounds[-1] == 3000 and np.all(np.diff(bounds) > 0) and len(bounds) > 10
    parts = []
    for lo, hi, (indptr, indices, data) in iter_row_chunks(mapped, 1000, 100, 2900):
        assert data.strides[0] == 0  # the broadcast ones stay one
        parts.append(sp.csr_matrix((np.asarray(data), indices.copy(), indptr), shape=(hi - lo, 500)))
    assert (sp.vstack(parts) != matrix[100:2900]).nnz == 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_reading_a_mapped_matrix_leaves_it_out_of_the_resident_set(tmp_path):
    """64 MiB of mapped column indices read chunk by chunk: the process's file-backed
    resident memory does not grow (faulting the mapping would add all 64 MiB)."""
    n_rows, per_row = 1 << 20, 16
    np.save(tmp_path / "indices.npy", np.arange(n_rows * per_row, dtype=np.int32) % 1000)
    np.save(tmp_path / "indptr.npy", np.arange(n_rows + 1, dtype=np.int64) * per_row)
    indices = np.asarray(np.load(tmp_path / "indices.npy", mmap_mode="r"))
    indptr = np.asarray(np.load(tmp_path / "indptr.npy", mmap_mode="r"))
    X = sp.csr_matrix((np.broadcast_to(np.float32(1.0), indices.shape), indices, indptr),
                      shape=(n_rows, 1000), copy=False)
    before = _status("RssFile")
    total = 0
    for _, _, (_, idx, _) in iter_row_chunks(X, 1 << 18):
        total += int(idx.sum(dtype=np.int64))
    assert total == int((np.arange(n_rows * per_row, dtype=np.int64) % 1000).sum())
    assert _status("RssFile") - before < 8 << 20
