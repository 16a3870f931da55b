"""Small sparse-matrix helpers shared by the families: input checks and scoring.

Checks happen once, at `fit`; the numba kernels trust what they get.
"""

from __future__ import annotations

import numba as nb
import numpy as np
import scipy.sparse as sp

from training.errors import InputError
from training.features.rowchunks import iter_row_chunks


def check_Xy(X, y, n_classes: int | None = None) -> tuple[sp.csr_matrix, np.ndarray, int]:
    """CSR with sorted int32/int64 indices and labels in [0, n_classes), in the integer
    dtype given (the store's int8 labels stay one byte an example: no int64 copy)."""
    if not sp.issparse(X):
        raise InputError(f"X must be a scipy.sparse CSR matrix, got {type(X).__name__}")
    X = X.tocsr()
    y = np.asarray(y)
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise InputError(f"y must be a vector of {X.shape[0]} labels, got shape {y.shape}")
    if not np.issubdtype(y.dtype, np.integer):
        raise InputError(f"y must hold integer class indices, got dtype {y.dtype}")
    if y.size and y.min() < 0:
        raise InputError(f"y holds a negative class index {y.min()}")
    k = int(y.max()) + 1 if y.size else 0
    if n_classes is None:
        n_classes = max(k, 2)
    elif k > n_classes:
        raise InputError(f"y holds class index {k - 1} but n_classes is {n_classes}")
    if X.shape[0] == 0:
        raise InputError("cannot train on zero examples")
    return X, y, int(n_classes)


@nb.njit(nogil=True, cache=True, inline="always")
def row_dot(indptr, indices, data, i, w, bias, out):
    """out[k] = w_k . x_i for a weight matrix [F+1, K] whose last row is the bias weight.

    Returns x_i . x_i + bias^2 (A in the SVM paper's eq. 10), which the dual solvers
    need and which costs nothing here: no row-norm array has to be kept.
    """
    fb = w.shape[0] - 1
    for k in range(w.shape[1]):
        out[k] = w[fb, k] * bias
    sq = bias * bias
    for p in range(indptr[i], indptr[i + 1]):
        j = indices[p]
        v = data[p]
        sq += v * v
        for k in range(w.shape[1]):
            out[k] += w[j, k] * v
    return sq


@nb.njit(nogil=True, cache=True, inline="always")
def row_axpy(indptr, indices, data, i, w, bias, coef):
    """w_k += coef[k] x_i (bias row included): the dual solvers' eq. 11 / eq. 14."""
    fb = w.shape[0] - 1
    for p in range(indptr[i], indptr[i + 1]):
        j = indices[p]
        v = data[p]
        for k in range(w.shape[1]):
            w[j, k] += coef[k] * v
    if bias != 0.0:
        for k in range(w.shape[1]):
            w[fb, k] += coef[k] * bias


@nb.njit(nogil=True, cache=True)
def _scores(indptr, indices, data, W, b, out):
    K = W.shape[1]
    for i in range(indptr.shape[0] - 1):
        for k in range(K):
            out[i, k] = b[k]
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            v = data[p]
            for k in range(K):
                out[i, k] += W[j, k] * v


def decision_scores(X: sp.csr_matrix, W: np.ndarray, b: np.ndarray) -> np.ndarray:
    """X W + b without scipy's dtype upcast copies of X (float64 result); X is read a
    chunk of rows at a time (features/rowchunks.py), so a mapped matrix is not faulted in."""
    X = X.tocsr()
    out = np.empty((X.shape[0], W.shape[1]), dtype=np.float64)
    b = np.asarray(b, dtype=W.dtype)
    for lo, hi, rows in iter_row_chunks(X):
        _scores(*rows, W, b, out[lo:hi])
    return out
