"""eval scored as tasks over example ranges: the same report in one range or many, in
one process, two local processes or on a 2-worker Dask LocalCluster."""

from __future__ import annotations

import pytest

from training.cli import main as cli_main
from training.eval import evaluate as evaluate_module
from training.eval.evaluate import evaluate

TYPE = "wbe-msd-bidirectional-fe"


@pytest.fixture(scope="module")
def model(store_2k, tmp_path_factory):
    out = tmp_path_factory.mktemp("eval-tasks") / "nb.mrw"
    assert cli_main(["train", "--family", "nb-bayes", "--features", "S7", "--type", "hier-msd-bidirectional-fe",
                     "--store", str(store_2k.path), "--out", str(out), "--threshold", "1", "--quiet"]) == 0
    return out


def test_reports_agree_for_any_ranges_jobs_and_on_dask(store_2k, model, monkeypatch, dask_cluster):
    whole = evaluate(model, store_2k.path, jobs=1, memory="4G")  # one range
    monkeypatch.setattr(evaluate_module, "RANGE_BYTES_PER_EXAMPLE", 32 << 10)  # 64M: 2,048-example ranges
    monkeypatch.setattr(evaluate_module, "MIN_RANGE_EXAMPLES", 1024)            # (1,024 with 2 jobs)
    monkeypatch.setattr(evaluate_module, "WORKER_EXAMPLES", 1)  # 2 workers, though the store is small
    assert whole["split"]["heldout_examples"] > 3 * 2048  # so several ranges below
    for run in ({"jobs": 1}, {"jobs": 2}, {"scheduler": dask_cluster}):
        sharded = evaluate(model, store_2k.path, memory="64M", **run)
        assert sharded["split"] == whole["split"]
        for direction, slices in whole["directions"].items():
            for name, summary in slices.items():
                got = sharded["directions"][direction][name]
                assert got["confusion"] == summary["confusion"]
                assert got["log_loss"] == pytest.approx(summary["log_loss"], rel=1e-12)
                assert got["ece"] == pytest.approx(summary["ece"], rel=1e-12, abs=1e-15)


def test_reports_are_identical_for_any_memory_and_jobs(store_2k, model, monkeypatch):
    """Ranges are whole blocks and each block's floats are summed as one, in block order,
    so different range sizes (--memory / --jobs) give the very same report, not one equal
    to rounding."""
    monkeypatch.setattr(evaluate_module, "MIN_RANGE_EXAMPLES", 128)             # the block
    monkeypatch.setattr(evaluate_module, "RANGE_BYTES_PER_EXAMPLE", 128 << 10)  # 64M: 512-example ranges
    monkeypatch.setattr(evaluate_module, "WORKER_EXAMPLES", 1)
    one_range = evaluate(model, store_2k.path, jobs=1, memory="4G")
    assert one_range["split"]["heldout_examples"] > 4 * 512
    for run in ({"jobs": 1, "memory": "64M"}, {"jobs": 2, "memory": "64M"}, {"jobs": 1, "memory": "96M"}):
        assert evaluate(model, store_2k.path, **run)["directions"] == one_range["directions"]


def test_spilled_seen_keys_match_the_in_memory_set_under_a_tiny_budget(store_2k, model, tmp_path, monkeypatch):
    """The seen/unseen split comes from spilled, hash-partitioned key sets (count_range
    spills, merged a group of partitions at a time, looked up a block at a time). With a
    tiny budget (128-example ranges, so many spills, groups and blocks) the seen keys are
    exactly the in-memory intersection of the held-out and training pair keys, and the
    report is the one of the default budget (one range per part: the seen and unseen
    slices hold the same examples, whose floats are summed in another order)."""
    import numpy as np

    from training.eval.split import heldout_sentences
    from training.features.matrix import distinct_pair_keys

    whole = evaluate(model, store_2k.path, jobs=1)  # default 4G: one range, one group, one block
    heldout = heldout_sentences(store_2k.n_sentences, 0.1)
    heldout_keys = distinct_pair_keys(store_2k, heldout)
    expected = np.intersect1d(heldout_keys, distinct_pair_keys(store_2k, ~heldout))
    # groups hold at most 128 held-out keys, lookups read 128 seen keys at a time: many of each
    assert heldout_keys.shape[0] > 8 * 128 and expected.shape[0] > 4 * 128

    n_seen = evaluate_module.seen_heldout_pairs(store_2k, heldout, tmp_path / "seen.npy", range_examples=128)
    assert n_seen == expected.shape[0]
    assert np.array_equal(np.load(tmp_path / "seen.npy"), expected)

    monkeypatch.setattr(evaluate_module, "RANGE_BYTES_PER_EXAMPLE", 512 << 10)  # 64M: 128-example ranges
    monkeypatch.setattr(evaluate_module, "MIN_RANGE_EXAMPLES", 128)
    tiny = evaluate(model, store_2k.path, jobs=1, memory="64M")
    assert tiny["split"] == whole["split"]  # the seen count among them
    for direction, slices in whole["directions"].items():
        for name, summary in slices.items():
            got = tiny["directions"][direction][name]
            assert got["confusion"] == summary["confusion"]
            # other ranges sum the same floats in another order
            assert got["log_loss"] == pytest.approx(summary["log_loss"], rel=1e-12)
            assert got["ece"] == pytest.approx(summary["ece"], rel=1e-12, abs=1e-15)
