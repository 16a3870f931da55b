"""The task runner of the sharded offline stages: in-process, local processes, or Dask.

A stage cuts its work into independent tasks (a sentence range to extract, a hash
partition of table counts, a slice of rows to map ...), writes one module-level function
`fn(task) -> result`, and calls

    run_tasks(fn, tasks, jobs=..., scheduler=...)   -> [fn(t) for t in tasks]
    iter_tasks(fn, tasks, jobs=..., scheduler=...)  -> the same, lazily, in task order
    with task_runner(jobs=..., scheduler=...) as r: r.run(fn1, tasks1); r.run(fn2, tasks2)
        (several rounds on one pool or cluster connection: workers start once)

Whatever the path the results are the same and come back in task order, so a stage's
output is byte-identical for any `jobs` and on any cluster:

- jobs=1 (and no scheduler): in this process, one task after the other;
- jobs>1: a pool of `jobs` local worker processes (spawned, so no thread of this
  process is forked) with at most 2*jobs tasks in flight;
- scheduler="ADDRESS" (e.g. "tcp://10.0.0.5:8786"): the tasks run on that Dask cluster;
  scheduler="local": a Dask LocalCluster of `jobs` single-threaded worker processes on
  127.0.0.1, started and closed around the call.

The contract for `fn` and its tasks: `fn` is importable by name (a module-level function)
and tasks and results pickle. On a cluster the workers must see the same files at the
same paths, so tasks carry paths and ranges, never the data itself. A task's exception
is raised from the call (the remaining tasks are cancelled). iter_tasks keeps a bounded
window of tasks in flight, so a consumer that writes each result as it arrives holds
only a few results at once.

This module also parses the memory budget (`--memory 4G`) the stages size their chunks
and runs by. It must know nothing about the stages themselves.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

from training.errors import InputError, UsageError

T = TypeVar("T")
R = TypeVar("R")

#: `scheduler` value that starts a LocalCluster of `jobs` workers for the call.
LOCAL_CLUSTER = "local"
#: The default memory budget of a sharded stage (--memory).
DEFAULT_MEMORY = "4G"


def available_cores() -> int:
    """Cores this process may run on (the affinity mask, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def resolve_jobs(jobs: int | None) -> int:
    """None or 0 -> every available core; otherwise the number given (>= 1)."""
    if jobs is None or jobs == 0:
        return available_cores()
    if jobs < 0:
        raise UsageError(f"--jobs must be >= 0 (0 = every core), got {jobs}")
    return int(jobs)


def jobs_that_pay(jobs: int, work: int, per_job: int, scheduler: str | None = None) -> int:
    """How many of `jobs` local workers a stage should start for `work` units (examples,
    bytes ...) when one worker pays for itself from `per_job` units: a spawned worker
    costs ~1-2 s of CPU (imports, numba's cache) before its first task, so a small input
    runs in this process, with the tasks of one job, whatever --jobs says. Decided from
    sizes only, so the output is the same. A Dask scheduler is used as asked."""
    if scheduler is not None:
        return jobs
    return max(1, min(jobs, work // max(int(per_job), 1)))


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_memory(text: str | int) -> int:
    """'4G', '512M', '1.5g', '2GiB' or a byte count -> bytes (binary units)."""
    if isinstance(text, int):
        value = text
    else:
        match = _SIZE.match(str(text))
        if not match:
            raise UsageError(f"--memory: not a size such as 4G or 512M: {text!r}")
        value = int(float(match.group(1)) * _UNITS[match.group(2).lower()])
    if value < 64 << 20:
        raise UsageError(f"--memory must be at least 64M, got {text!r}")
    return value


def run_tasks(fn: Callable[[T], R], tasks: Sequence[T], *, jobs: int | None = 1,
              scheduler: str | None = None) -> list[R]:
    """[fn(t) for t in tasks], computed in-process, in local processes or on Dask (see module doc)."""
    return list(iter_tasks(fn, tasks, jobs=jobs, scheduler=scheduler))


def iter_tasks(fn: Callable[[T], R], tasks: Sequence[T], *, jobs: int | None = 1,
               scheduler: str | None = None, window: int | None = None) -> Iterator[R]:
    """fn(t) for each task, yielded in task order with at most `window` tasks in flight
    (default 2 per worker). A single task always runs in this process."""
    with task_runner(jobs=jobs, scheduler=scheduler) as runner:
        yield from runner.iter(fn, tasks, window=window)


class TaskRunner:
    """Several rounds of tasks on one pool or cluster (workers start once): `run` and
    `iter` are run_tasks and iter_tasks. Make one with `task_runner(...)`."""

    def __init__(self, jobs: int, scheduler: str | None):
        self.jobs, self.scheduler = jobs, scheduler
        self._pool: ProcessPoolExecutor | None = None
        self._client = None
        self._client_context = None

    def run(self, fn: Callable[[T], R], tasks: Sequence[T]) -> list[R]:
        return list(self.iter(fn, tasks))

    def iter(self, fn: Callable[[T], R], tasks: Sequence[T], window: int | None = None) -> Iterator[R]:
        tasks = list(tasks)
        if self.scheduler is None and (self.jobs == 1 or len(tasks) <= 1):
            yield from map(fn, tasks)
        elif self.scheduler is None:
            if self._pool is None:
                # spawn: the workers start from a clean process (never a fork of one with threads)
                # and are this process's children, so its resource usage accounts for their CPU
                # (they are joined on close). They exit when this process dies.
                self._pool = ProcessPoolExecutor(max_workers=self.jobs,
                                                 mp_context=multiprocessing.get_context("spawn"),
                                                 initializer=exit_with_parent, initargs=(os.getpid(),))
            yield from _ordered(self._pool.submit, fn, tasks, window or 2 * self.jobs)
        else:
            if self._client is None:
                self._client_context = _dask_client(self.scheduler, self.jobs)
                self._client = self._client_context.__enter__()
            client = self._client
            workers = max(1, sum(client.nthreads().values()))
            yield from _ordered(lambda f, t: client.submit(f, t, pure=False), fn, tasks, window or 2 * workers)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        if self._client_context is not None:
            self._client_context.__exit__(None, None, None)
            self._client = self._client_context = None


PARENT_POLL_SECONDS = 0.5


def exit_with_parent(parent: int) -> None:
    """Pool worker initializer: the worker exits (os._exit) once the process that started
    the pool is gone, within PARENT_POLL_SECONDS, even in the middle of a task.

    A worker killed with its parent would otherwise run on, an orphan, until its task
    ends and then wait for work forever. A watcher thread polls the parent's pid rather
    than asking the kernel for a death signal (PR_SET_PDEATHSIG), which fires when the
    *thread* that started the worker ends, not the process."""
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_SECONDS)
        os._exit(1)

    if os.getppid() != parent:  # died before this worker got here
        os._exit(1)
    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


@contextmanager
def task_runner(jobs: int | None = 1, scheduler: str | None = None) -> Iterator[TaskRunner]:
    """A TaskRunner whose pool or cluster connection is closed on leaving the block."""
    runner = TaskRunner(resolve_jobs(jobs), scheduler)
    try:
        yield runner
    finally:
        runner.close()


@contextmanager
def alongside(fn: Callable[[T], R], task: T, *, jobs: int | None = 1) -> Iterator[Callable[[], R]]:
    """Run fn(task) in a spawned worker process while the block runs, and yield a function that
    waits for its result (raising its exception). With one job it runs here, before the block:
    the same result, one after the other. For an independent piece of work that can overlap
    another on a second core (pipeline: numba compiling the feature kernel while extraction
    compiles, the Moses table beside the experiment). Leaving the block early (an error, a
    Ctrl-C) ends the worker at once."""
    if resolve_jobs(jobs) < 2:
        result = fn(task)
        yield lambda: result
        return
    context = multiprocessing.get_context("spawn")
    receive, send = context.Pipe(duplex=False)
    worker = context.Process(target=_send_result, args=(fn, task, send, os.getpid()),
                             name=f"moses-reorder {getattr(fn, '__name__', 'task')}")
    worker.start()
    send.close()

    def result() -> R:
        try:
            ok, value = receive.recv()
        except EOFError:
            worker.join()
            raise RuntimeError(f"the worker running {fn.__name__} died (exit code {worker.exitcode})") from None
        worker.join()
        if not ok:
            raise value
        return value

    try:
        yield result
    finally:
        if worker.is_alive():
            worker.terminate()
        worker.join()
        receive.close()


def _send_result(fn: Callable, task: Any, send, parent: int) -> None:
    """alongside's worker: fn(task), or the exception it raised, sent back through the pipe."""
    exit_with_parent(parent)
    try:
        outcome = (True, fn(task))
    except BaseException as exc:  # the parent re-raises it
        outcome = (False, exc)
    send.send(outcome)


def _ordered(submit: Callable[[Callable, Any], Any], fn: Callable, tasks: list, window: int) -> Iterator:
    """Submit through `submit(fn, task) -> future` keeping `window` in flight; results in order."""
    pending = iter(tasks)
    in_flight: deque = deque()
    try:
        for task in pending:
            in_flight.append(submit(fn, task))
            if len(in_flight) >= window:
                break
        while in_flight:
            result = in_flight.popleft().result()
            task = next(pending, _DONE)
            if task is not _DONE:
                in_flight.append(submit(fn, task))
            yield result
    finally:
        for future in in_flight:
            future.cancel()


_DONE = object()


@contextmanager
def _dask_client(scheduler: str, jobs: int):
    try:
        from distributed import Client, LocalCluster
    except ImportError:  # pragma: no cover - dask[distributed] is a core dependency
        raise InputError("--scheduler needs dask[distributed]: pip install 'dask[distributed]'") from None
    if scheduler == LOCAL_CLUSTER:
        with LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True, host="127.0.0.1",
                          dashboard_address="127.0.0.1:0") as cluster, Client(cluster) as client:
            yield client
        return
    try:
        client = Client(scheduler, timeout="30s")
    except OSError as exc:
        raise InputError(f"--scheduler {scheduler}: cannot reach the Dask scheduler ({exc})") from None
    with client:
        yield client


def chunked(n: int, size: int) -> list[tuple[int, int]]:
    """[(start, stop), ...] cutting range(n) into pieces of at most `size` (at least one piece)."""
    size = max(1, int(size))
    return [(start, min(start + size, n)) for start in range(0, max(n, 1), size)] if n else [(0, 0)]

