"""The prefetch intrinsic compiles for the arrays the dual solvers hand it and changes nothing."""

from __future__ import annotations

import numba as nb
import numpy as np
import pytest

from training.families.solvers.prefetch import prefetch


@nb.njit(cache=False)
def _gather(values, index, ahead):
    total = 0.0
    for t in range(index.shape[0]):
        if ahead > 0 and t + ahead < index.shape[0]:
            prefetch(values, index[t + ahead])
        total += values[index[t]] if values.ndim == 1 else values[index[t]].sum()
    return total


@pytest.mark.parametrize("shape", [(5000,), (5000, 3)])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_prefetch_changes_no_result(shape, index_dtype):
    rng = np.random.default_rng(0)
    values = rng.normal(size=shape)
    index = rng.permutation(shape[0]).astype(index_dtype)
    assert _gather(values, index, 16) == _gather(values, index, 0) == pytest.approx(values.sum())
