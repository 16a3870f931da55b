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
