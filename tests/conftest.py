"""Shared fixtures: where the real data lives.

Tests read the real corpus and the real Moses golden outputs from ../shared/data (beside
the project root, as in CI) and the embedded slice from training/data. A missing data
directory is an error, never a silent skip.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from corpus_slice import write_corpus_slice

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
JA_EN = SHARED_DATA / "ja-en"
GOLDEN = SHARED_DATA / "golden" / "ja-en-2k"
EMBEDDED = ROOT / "training" / "data" / "tanaka-3k"


def _require(path: Path) -> Path:
    if not path.exists():
        raise FileNotFoundError(f"test data missing: {path} (expected ../shared beside the project)")
    return path


@pytest.fixture(scope="session")
def ja_en_dir() -> Path:
    return _require(JA_EN)


@pytest.fixture(scope="session")
def golden_dir() -> Path:
    return _require(GOLDEN)


@pytest.fixture(scope="session")
def embedded_dir() -> Path:
    return _require(EMBEDDED)


GOLDEN_LINES = 2000


@pytest.fixture(scope="session")
def slice_2k(ja_en_dir: Path, tmp_path_factory) -> dict[str, Path]:
    """First 2000 lines of train.{ja,en,align} (what the golden files were made from):
    source=ja (Moses's F), target=en (E)."""
    paths = write_corpus_slice(ja_en_dir, GOLDEN_LINES, tmp_path_factory.mktemp("ja-en-2k"))
    return {"src": paths["ja"], "tgt": paths["en"], "align": paths["align"]}


@pytest.fixture(scope="session")
def dask_cluster() -> str:
    """Address of a 2-worker Dask LocalCluster on 127.0.0.1 (single-threaded worker processes)."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address="127.0.0.1:0") as cluster:
        yield cluster.scheduler_address


@pytest.fixture(scope="session")
def store_2k(slice_2k, tmp_path_factory):
    """Example store of the first 2,000 ja-en lines (hier-msd labels, 20k-example chunks),
    made by the real `moses-reorder extract`."""
    from training.cli import main as cli_main
    from training.store.examples import ExampleStore

    out = tmp_path_factory.mktemp("store") / "store"
    code = cli_main(["extract", "--src", str(slice_2k["src"]), "--tgt", str(slice_2k["tgt"]),
                     "--align", str(slice_2k["align"]), "--out", str(out), "--model", "hier-msd",
                     "--chunk-examples", "20000", "--quiet"])
    assert code == 0
    return ExampleStore.open(out)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under CI=true a test skipped for want of Moses fails instead: .ci/run builds Moses
    (moses_ff/build-moses.sh) and sets MOSES_DIR, so CI must decode with it (issue 45).
    Every such skip names MOSES_DIR in its reason; outside CI they stay skips."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("CI", "").strip().lower() in ("1", "true", "yes"):
        reason = str(report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr)
        if "MOSES_DIR" in reason:
            report.outcome = "failed"
            report.longrepr = f"CI=true: {reason} (.ci/run builds Moses and sets MOSES_DIR; CI must run this test)"
