"""BLAS threads while training: one by default, the library's own on request, restored after.

OpenBLAS threads only spin in the solvers' small vector algebra (scipy's L-BFGS-B), and
on a machine whose other core is busy that made maxent and the hybrid 7-10x slower
(benchmarks/blas_threads.py). The weight file records the number in force during the fit.
"""

from __future__ import annotations

import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from training.api import train_model
from training.cli import main as cli_main
from training.errors import InputError
from training.modelfile.model import load_model

TYPE = "hier-msd-bidirectional-fe"


def blas_threads() -> int:
    return max(p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas")


@pytest.fixture()
def two_blas_threads():
    """The BLAS library set to two threads, as OpenBLAS starts on a 2-core machine."""
    with threadpool_limits(limits=2, user_api="blas"):
        yield


def test_training_caps_blas_at_one_thread_and_restores_it(small_store, tmp_path, two_blas_threads) -> None:
    meta = train_model(small_store, family="maxent", moses_type=TYPE, features="S7", threshold=1,
                       out=tmp_path / "m.mrw", params={"max_passes": 20})
    assert meta["training"]["blas_threads"] == 1
    assert blas_threads() == 2  # lifted on return
    assert load_model(tmp_path / "m.mrw").metadata["training"]["blas_threads"] == 1


def test_none_leaves_the_library_setting(small_store, tmp_path, two_blas_threads) -> None:
    meta = train_model(small_store, family="maxent", moses_type=TYPE, features="S7", threshold=1,
                       out=tmp_path / "m.mrw", params={"max_passes": 20}, blas_threads=None)
    assert meta["training"]["blas_threads"] == 2


def test_cli_blas_threads_option(small_store, tmp_path, two_blas_threads) -> None:
    out = tmp_path / "m.mrw"
    base = ["train", "--family", "hybrid", "--type", TYPE, "--store", str(small_store), "--out", str(out),
            "--quiet"]
    assert cli_main(base) == 0
    assert load_model(out).metadata["training"]["blas_threads"] == 1
    assert cli_main([*base, "--blas-threads", "0"]) == 0
    assert load_model(out).metadata["training"]["blas_threads"] == 2


def test_a_bad_thread_count_is_refused(small_store, tmp_path) -> None:
    with pytest.raises(InputError, match="blas_threads"):
        train_model(small_store, family="maxent", moses_type=TYPE, out=tmp_path / "m.mrw", blas_threads=0)
    assert not (tmp_path / "m.mrw").exists()
