"""The task runner: the same results in task order on every path (in-process, local
processes, a 2-worker Dask LocalCluster), a task's error raised from the call."""

from __future__ import annotations

import math

import pytest

from training.errors import InputError
from training.parallel import chunked, iter_tasks, jobs_that_pay, parse_memory, resolve_jobs, run_tasks

TASKS = list(range(40))
EXPECTED = [math.factorial(t) for t in TASKS]


def test_in_process_is_map():
    assert run_tasks(math.factorial, TASKS, jobs=1) == EXPECTED


def test_local_processes_keep_task_order():
    assert run_tasks(math.factorial, TASKS, jobs=2) == EXPECTED


def test_a_window_of_one_still_yields_everything_in_order():
    assert list(iter_tasks(math.factorial, TASKS, jobs=2, window=1)) == EXPECTED


def test_dask_local_cluster_keeps_task_order(dask_cluster):
    assert run_tasks(math.factorial, TASKS, scheduler=dask_cluster) == EXPECTED


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_failing_task_raises_its_error(jobs):
    with pytest.raises(ValueError):
        run_tasks(math.sqrt, [4.0, -1.0, 9.0], jobs=jobs)


def test_a_failing_task_raises_its_error_on_dask(dask_cluster):
    with pytest.raises(ValueError):
        run_tasks(math.sqrt, [4.0, -1.0, 9.0], scheduler=dask_cluster)


def test_workers_start_only_for_work_that_pays_for_them():
    assert jobs_that_pay(2, work=1_500_000, per_job=1_000_000) == 1  # one in-process job
    assert jobs_that_pay(2, work=16_000_000, per_job=1_000_000) == 2
    assert jobs_that_pay(8, work=3_000_000, per_job=1_000_000) == 3
    assert jobs_that_pay(2, work=0, per_job=1_000_000) == 1
    assert jobs_that_pay(2, work=10, per_job=1_000_000, scheduler="local") == 2  # a cluster as asked


def test_jobs_zero_or_none_means_every_core():
    assert resolve_jobs(0) == resolve_jobs(None) >= 1
    assert resolve_jobs(3) == 3
    with pytest.raises(InputError):
        resolve_jobs(-1)


def test_memory_sizes():
    assert parse_memory("4G") == 4 << 30
    assert parse_memory("512m") == 512 << 20
    assert parse_memory("1.5GiB") == 3 << 29
    for bad in ("lots", "4X", "1M"):
        with pytest.raises(InputError):
            parse_memory(bad)


def test_chunked_covers_the_range_once():
    assert chunked(10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert chunked(0, 4) == [(0, 0)]


@pytest.mark.parametrize("where", ["in-process", "processes", "dask"])
def test_one_runner_serves_several_rounds(where, request):
    from training.parallel import task_runner

    kwargs = {"in-process": {"jobs": 1}, "processes": {"jobs": 2},
              "dask": {"scheduler": request.getfixturevalue("dask_cluster") if where == "dask" else None}}[where]
    with task_runner(**kwargs) as runner:
        assert runner.run(math.factorial, TASKS) == EXPECTED
        assert list(runner.iter(math.sqrt, [4.0, 9.0])) == [2.0, 3.0]
