"""The feature cache built as tasks: byte-identical for one job, two local processes and a
2-worker Dask LocalCluster; key counts merged from hash-partitioned spills equal the
plain count however the partitions are grouped."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import numpy as np
import pytest

from training.features import matrix
from training.features.matrix import build_matrix, count_range, merge_partitions
from training.features.spec import FeatureSpec
from training.features.templates import extract_keys

FILES = ("keys.npy", "counts.npy", "indptr.npy", "indices.npy")


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    for name in FILES:
        h.update((path / name).read_bytes())
    return h.hexdigest()


@pytest.fixture()
def many_tasks(monkeypatch):
    """Small task ranges, so the 2k-sentence store makes ~10 count and map tasks, and
    jobs=2 starts two workers though the store is too small for them to pay."""
    monkeypatch.setattr(matrix, "MIN_TASK_EXAMPLES", 4096)
    monkeypatch.setattr(matrix, "TASK_BYTES_PER_EXAMPLE", 8192)
    monkeypatch.setattr(matrix, "WORKER_EXAMPLES", 1)


@pytest.mark.parametrize("spec", ["S6", "S3"])
def test_the_cache_is_the_same_bytes_for_any_number_of_jobs_and_on_dask(store_2k, tmp_path, many_tasks,
                                                                         dask_cluster, spec):
    mask = np.arange(store_2k.n_sentences) < 1800
    assert len(matrix._Plan(store_2k, FeatureSpec.parse(spec), 2, 1, None, 64 << 20).ranges()) > 5
    digests = []
    for run in ({"jobs": 1}, {"jobs": 2}, {"scheduler": dask_cluster}):
        fm = build_matrix(store_2k, spec, 2, mask, memory="64M", **run)
        digests.append(_digest(fm.path))
        shutil.rmtree(fm.path)  # the next run builds the cache again
    assert digests[0] == digests[1] == digests[2]


def test_partitioned_counts_equal_the_plain_count_in_any_grouping(store_2k, tmp_path):
    spec = FeatureSpec.parse("S7")
    n = store_2k.n_examples
    ranges = [(0, n // 3), (n // 3, n // 2), (n // 2, n)]
    spills = [count_range((str(store_2k.path), spec.name, lo, hi, None, str(tmp_path / f"c{i}")))
              for i, (lo, hi) in enumerate(ranges)]
    keys = np.concatenate([extract_keys(c.batch, spec)[1] for c in store_2k.iter_chunks()])
    uniq, counts = np.unique(keys, return_counts=True)
    for budget, min_groups in ((1 << 30, 1), (12 * 4 * 2000, 1), (1 << 30, 8)):  # one group, or many
        tasks = matrix._merge_groups(spills, 3, budget, min_groups)
        assert (len(tasks) == 1) == (budget == 1 << 30 and min_groups == 1)
        assert len(tasks) >= min_groups
        merged = [merge_partitions(t) for t in tasks]
        got_keys = np.concatenate([m[0] for m in merged])
        assert np.array_equal(got_keys, uniq[counts > 3])
        assert np.array_equal(np.concatenate([m[1] for m in merged]), counts[counts > 3])
        assert sum(m[2] for m in merged) == uniq.shape[0]


def test_keep_pairs_keeps_every_pair_of_the_counted_sentences_and_the_rest_by_threshold(store_2k, many_tasks):
    """The hybrid's matrix (issue 29): every phrase pair of the training sentences keyed,
    other keys only above the threshold, built in any number of merge groups."""
    from training.errors import UsageError
    from training.features.matrix import distinct_pair_keys

    mask = np.arange(store_2k.n_sentences) < 1800
    full = build_matrix(store_2k, "S7,pair", 0, mask)
    plain = build_matrix(store_2k, "S7,pair", 3, mask)
    kept = build_matrix(store_2k, "S7,pair", 3, mask, keep_pairs=True, memory="64M")
    pairs = distinct_pair_keys(store_2k, mask)
    want = np.union1d(plain.keys, pairs)
    assert np.array_equal(kept.keys, want)
    assert plain.keys.shape[0] < want.shape[0] < full.keys.shape[0]
    assert "-t3+pairs-m" in kept.path.name and kept.meta["keep_pairs"]
    assert build_matrix(store_2k, "S7,pair", 3, mask).path == plain.path  # its own cache
    # every example's columns are its full-matrix keys that were kept
    rows = slice(0, 500)
    for got, source in zip(kept.X[rows], full.X[rows]):
        names = full.keys[source.indices]
        assert np.array_equal(kept.keys[got.indices], names[np.isin(names, want)])
    with pytest.raises(UsageError, match="pair template"):
        build_matrix(store_2k, "S7", 3, mask, keep_pairs=True)
