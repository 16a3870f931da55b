"""The task runner: the same results in task order on every path (in-process, local
processes, a 2-worker Dask LocalCluster), a task's error raised from the call."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from training.errors import InputError
from training.parallel import (PARENT_POLL_SECONDS, alongside, chunked, iter_tasks, jobs_that_pay, parse_memory,
                               resolve_jobs, run_tasks)

ROOT = Path(__file__).resolve().parents[2]

TASKS = list(range(40))
EXPECTED = [math.factorial(t) for t in TASKS]


def test_in_process_is_map():
    assert run_tasks(math.factorial, TASKS, jobs=1) == EXPECTED


def test_local_processes_keep_task_order():
    assert run_tasks(math.factorial, TASKS, jobs=2) == EXPECTED


def test_a_window_of_one_still_yields_everything_in_order():
    assert list(iter_tasks(math.factorial, TASKS, jobs=2, window=1)) == EXPECTED


@pytest.mark.parametrize("jobs", [1, 2])
def test_alongside_gives_the_worker_s_result_and_raises_its_error(jobs):
    with alongside(math.factorial, 10, jobs=jobs) as done:
        assert done() == math.factorial(10)
    with pytest.raises(ValueError), alongside(math.factorial, -1, jobs=jobs) as done:
        done()  # with one job the task ran, and raised, as the block was entered


def test_leaving_alongside_s_block_early_ends_its_worker_at_once():
    """An error (or a Ctrl-C) in the block does not wait for the worker's task (issue 47:
    pipeline compiles the feature kernel beside extraction, and a refused corpus must not
    wait for that compile)."""
    import multiprocessing

    others = set(multiprocessing.active_children())  # a module's Dask cluster has some
    started = time.monotonic()
    with pytest.raises(KeyError), alongside(time.sleep, 60, jobs=2):
        raise KeyError("the block failed")
    assert time.monotonic() - started < 30
    assert not set(multiprocessing.active_children()) - others


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


PARENT = """
import sys, time
sys.path[:0] = [{root!r}, {here!r}]
from training.parallel import run_tasks
from sleeper import sleep_in_task

if __name__ == "__main__":
    run_tasks(sleep_in_task, [{here!r}] * 2, jobs=2)
"""

SLEEPER = """
import os, time

def sleep_in_task(directory):
    open(os.path.join(directory, "worker-%d" % os.getpid()), "w").close()
    time.sleep(120)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_pool_workers_exit_when_the_parent_is_killed(tmp_path):
    """SIGKILL the process that runs a 2-worker pool in the middle of its tasks: no worker
    survives it (each polls its parent, training.parallel.exit_with_parent)."""
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    script = tmp_path / "parent.py"
    script.write_text(PARENT.format(root=str(ROOT), here=str(tmp_path)))
    parent = subprocess.Popen([sys.executable, str(script)])
    try:
        deadline = time.monotonic() + 60
        while len(list(tmp_path.glob("worker-*"))) < 2:
            assert time.monotonic() < deadline and parent.poll() is None, "the workers never started"
            time.sleep(0.1)
        workers = [int(f.name.split("-")[1]) for f in tmp_path.glob("worker-*")]
        assert all(_alive(pid) for pid in workers)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 10 * PARENT_POLL_SECONDS + 5
        while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [pid for pid in workers if _alive(pid)]
    finally:
        if parent.poll() is None:
            parent.kill()


BURNER = """
import time

def burn(seconds):
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass
    return seconds
"""


def test_local_workers_cpu_time_counts_as_the_caller_s_children(tmp_path, monkeypatch):
    """The pool's workers are this process's children and are waited for when the call
    ends, so their CPU time is in getrusage(RUSAGE_CHILDREN) (and in what a benchmark's
    wait4 of this process reports: benchmarks/scale_stages.py)."""
    import resource

    (tmp_path / "burner.py").write_text(BURNER)
    monkeypatch.syspath_prepend(str(tmp_path))
    from burner import burn

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert run_tasks(burn, [0.4] * 4, jobs=2) == [0.4] * 4
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime) >= 1.6
