"""A CSR matrix as the feature cache gives it (several stages' tests read one)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse as sp


def mapped_csr(X: sp.csr_matrix, directory: Path) -> sp.csr_matrix:
    """X with its indices and indptr saved to `directory` and mapped back (int32 / int64,
    read-only np.memmap) and broadcast ones as data, like features.matrix's cache."""
    np.save(directory / "indices.npy", X.indices.astype(np.int32))
    np.save(directory / "indptr.npy", X.indptr.astype(np.int64))
    indices = np.asarray(np.load(directory / "indices.npy", mmap_mode="r"))
    indptr = np.asarray(np.load(directory / "indptr.npy", mmap_mode="r"))
    return sp.csr_matrix((np.broadcast_to(np.float32(1.0), indices.shape), indices, indptr),
                         shape=X.shape, copy=False)
