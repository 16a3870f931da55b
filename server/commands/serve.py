"""`moses-reorder serve`: run the gRPC scoring service over a model repository.

With `--workers 1` (default) the server runs in this process. With N > 1 this process
becomes a small supervisor: it refuses a port that anyone already holds (server/ports.py:
without that check a second multi-worker server would silently join a stale one's port), reserves
it with SO_REUSEPORT (as in grpc's examples/python/multiprocessing), starts N worker processes that bind the same port (the
kernel spreads connections over them), serves their aggregated Prometheus metrics,
restarts a worker that dies (on the same port), forwards a worker's SIGUSR1 (it answered an admin Reload) to
all workers so each rescans the repository, and on SIGTERM/SIGINT forwards SIGTERM so every worker
drains its in-flight requests before exiting. SO_REUSEPORT balances connections, not
RPCs: a client with one channel stays on one worker. `--port-per-worker` is the
alternative: worker i listens on PORT+i and a client balances every RPC with gRPC's
client-side `round_robin` over the addresses (docs/serving.md, "Several cores").

This module parses arguments and manages processes; it must not touch models or RPCs
(server.app does), and it keeps its imports light so `moses-reorder --help` stays fast.
"""

from __future__ import annotations

import argparse
import logging
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from training.errors import AddressError, InputError, UsageError


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "serve", help="serve reordering models over gRPC",
        description="Serve the models of a repository ROOT/<name>/<version>/model.<ext> over gRPC "
                    "(reordering.v1.ReorderingScorer, grpc.health.v1, server reflection).")
    from server.options import default

    def flag(name: str, kind, text: str, shown: str = "%(default)s") -> None:
        """--NAME with the default of ServeOptions.NAME (the one place defaults are written)."""
        p.add_argument(f"--{name}", type=kind, default=default(name.replace("-", "_")),
                       help=f"{text} (default {shown})")

    # Checked in _check_words, not by argparse, so `serve DIR` (the root as a positional) gets a hint.
    p.add_argument("--models", type=Path, help="model repository root (required)")
    flag("host", str, "address to bind; 0.0.0.0 or [::] for every interface, as the container does")
    flag("port", int, "port (0 = pick a free one)")
    flag("workers", int, "server processes sharing the port via SO_REUSEPORT (use the core count)")
    p.add_argument("--port-per-worker", action="store_true",
                   help="give worker i its own port (PORT+i) instead of sharing one; clients then balance "
                        "every RPC with round_robin over the addresses")
    flag("threads", int, "RPC threads per process")
    flag("max-concurrent-rpcs", int, "calls a process works on at once, from their request message to their "
                                     "answer; one more is refused at once (RESOURCE_EXHAUSTED)")
    flag("receive-timeout-seconds", float, "end a call that has not sent its request message within S seconds "
                                           "(DEADLINE_EXCEEDED); such a call holds no thread meanwhile")
    flag("poll-seconds", float, "rescan the repository every S seconds (0 = never)")
    p.add_argument("--enable-admin", action="store_true", help="allow the Reload RPC")
    flag("metrics-port", int, "serve Prometheus /metrics on this port", shown="off")
    flag("metrics-host", str, "address of the /metrics endpoint", shown="the same as --host")
    flag("tls-cert", Path, "PEM certificate (chain) of the server: serve gRPC over TLS (needs --tls-key)",
         shown="plaintext")
    flag("tls-key", Path, "PEM private key of --tls-cert", shown="none")
    flag("max-pairs", int, "refuse requests with more phrase pairs (RESOURCE_EXHAUSTED)")
    flag("max-source-tokens", int, "refuse a request whose source sentence has more tokens (RESOURCE_EXHAUSTED)")
    flag("max-align-points", int, "refuse a request with a phrase pair of more alignment points "
                                  "(RESOURCE_EXHAUSTED; a pair of 7-word phrases has at most 49)")
    flag("max-keys", int, "refuse a request whose pairs expand to more feature keys, counted before "
                          "extraction (RESOURCE_EXHAUSTED; bounds ANOVA d=2 feature sets)")
    flag("max-message-mb", int, "largest request in MiB; a request costs about 24 times its size in memory "
                                "while it is read")
    flag("cache-size", int, "result-cache entries per process (one per distinct request; 0 = off)")
    flag("cache-mb", int, "result-cache size per process in MiB of stored answers (0 = off)")
    flag("keep-versions", int, "newest loadable versions kept loaded per model, for pinned clients")
    flag("grace-seconds", float, "on SIGTERM, how long in-flight requests may run before they are cancelled")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    # Internal: set by the supervisor for its workers.
    p.add_argument("--worker-ready-fd", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--reuse-port", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("stray", nargs="*", help=argparse.SUPPRESS)  # a hint, not a way in: see _check_words
    p.usage = p.format_usage().removeprefix("usage: ").replace("[--models MODELS]", "--models MODELS")
    p.set_defaults(func=run)


def _stray_hint(args: argparse.Namespace) -> str:
    """What to say about words that are no option's value: which option each one looks like."""
    first = args.stray[0]
    if first.isdigit():
        return f"the port is an option: --port {first}"
    if args.models is None and Path(first).is_dir():
        return f"the model repository is an option: moses-reorder serve --models {first}"
    return f"unrecognized arguments: {' '.join(args.stray)}"


def _check_words(args: argparse.Namespace) -> None:
    """What argparse lets through so that a hint can be given: stray words, no --models."""
    if args.stray:
        raise UsageError(_stray_hint(args))
    if args.models is None:
        raise UsageError("--models is required: the model repository root (ROOT/<name>/<version>/model.<ext>)")


def _check_files(args: argparse.Namespace) -> None:
    """What the options' own checks cannot see (ServeOptions checks the values): the files
    on this machine."""
    if not args.models.is_dir():
        raise InputError("model repository root is not a directory (--models)", args.models)
    from training.modelfile.layout import nested_repository

    nested = nested_repository(args.models)
    if nested is not None:
        raise UsageError(f"no <name>/<version>/model.mrw here, but {nested} is a model repository: "
                         f"did you mean --models {nested}?", args.models)
    for flag, path in (("--tls-cert", args.tls_cert), ("--tls-key", args.tls_key)):
        if path is not None and not path.is_file():
            raise InputError(f"not a readable file ({flag})", path)
    if args.tls_cert is not None:
        from server.tls import read_tls_pair

        read_tls_pair(args.tls_cert, args.tls_key)  # a bad file is refused here, before any worker starts


def options_from_args(args: argparse.Namespace, **overrides):
    """ServeOptions from the parsed arguments (every field the command line has) + overrides;
    a value out of range is a UsageError naming its flag (ServeOptions checks itself)."""
    import dataclasses

    from server.options import ServeOptions

    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(ServeOptions) if hasattr(args, f.name)}
    values.update(overrides)
    return ServeOptions(**values)


def run(args: argparse.Namespace) -> int:
    from server.logs import configure_logging

    configure_logging(args.log_level)
    _check_words(args)
    options_from_args(args)
    _check_files(args)
    if args.workers > 1 and args.worker_ready_fd is None:
        return _supervise(args)
    return _serve_here(args)


# -- one process ---------------------------------------------------------------------------
def _serve_here(args: argparse.Namespace) -> int:
    from server.app import ScoringServer
    from server.logs import log_event

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: stop.set())
    in_worker = args.worker_ready_fd is not None
    options = options_from_args(args, workers=1, metrics_port=None if in_worker else args.metrics_port,
                       notify_reload=in_worker)
    server = ScoringServer(options)
    if in_worker:  # a sibling got a Reload: the supervisor forwards SIGUSR1 to every ready worker
        signal.signal(signal.SIGUSR1, lambda signum, frame: server.repository.request_scan())
    port = server.start()
    if in_worker:
        try:
            os.write(args.worker_ready_fd, f"{port}\n".encode())
        except OSError:
            pass  # the supervisor stopped listening (a restarted worker): nothing to tell
        finally:
            os.close(args.worker_ready_fd)
    else:
        log_event(logging.INFO, "listening", port=port, workers=1)
    while not stop.wait(0.5):  # a timed wait, so the signal handler always gets to run
        pass
    server.stop(args.grace_seconds)
    return 0


# -- supervisor of N worker processes ------------------------------------------------------
def _worker_argv(args: argparse.Namespace, port: int, ready_fd: int) -> list[str]:
    """The worker's command line: this one's options (server.options.command_line, so a new
    option reaches the workers without a line here), its port, and how to report ready. A
    worker is one process and serves no /metrics (the supervisor aggregates them)."""
    from server.options import command_line

    options = options_from_args(args, port=port, workers=1, metrics_port=None, metrics_host=None,
                       reuse_port=not args.port_per_worker)
    return [sys.executable, "-m", "training.cli", "serve", *command_line(options),
            "--log-level", args.log_level, "--worker-ready-fd", str(ready_fd)]


def _spawn(args: argparse.Namespace, port: int) -> tuple[subprocess.Popen, int]:
    read_fd, write_fd = os.pipe()
    try:
        child = subprocess.Popen(_worker_argv(args, port, write_fd), pass_fds=(write_fd,))
    finally:
        os.close(write_fd)
    return child, read_fd


class _StopDuringStartup(Exception):
    pass


def _wait_ready(children: list[subprocess.Popen], fds: list[int], timeout: float,
                stop: threading.Event) -> list[int]:
    """Wait until every worker wrote its bound port into its pipe; returns the ports."""
    deadline = time.monotonic() + timeout
    pending = dict(zip(fds, children))
    ports = {}
    while pending:
        if stop.is_set():
            raise _StopDuringStartup()
        left = deadline - time.monotonic()
        if left <= 0:
            raise RuntimeError(f"{len(pending)} worker(s) not ready after {timeout:.0f} s")
        ready, _, _ = select.select(list(pending), [], [], min(left, 0.5))
        for fd in ready:
            said = os.read(fd, 64)
            if not said:
                raise RuntimeError(f"worker {pending[fd].pid} exited during start-up "
                                   f"(exit code {pending[fd].wait()})")
            os.close(fd)
            ports[pending.pop(fd).pid] = int(said)
        for fd, child in list(pending.items()):
            if child.poll() is not None and fd not in ready:
                raise RuntimeError(f"worker {child.pid} exited during start-up (exit code {child.returncode})")
    return [ports[c.pid] for c in children]


def _supervise(args: argparse.Namespace) -> int:
    from server.logs import log_event

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: stop.set())
    children: list[subprocess.Popen] = []
    ready: set[int] = set()  # pids that reported ready (and so handle SIGUSR1)
    starting: dict[int, subprocess.Popen] = {}  # ready pipe -> restarted worker not yet ready

    def forward_reload(signum, frame) -> None:
        for child in children:
            if child.pid in ready and child.poll() is None:
                child.send_signal(signal.SIGUSR1)

    signal.signal(signal.SIGUSR1, forward_reload)
    metrics_dir = None
    if args.metrics_port is not None:
        metrics_dir = tempfile.TemporaryDirectory(prefix="moses-reorder-metrics-")
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir.name  # inherited by the workers
    reserved = None
    if args.port_per_worker:  # worker i on PORT+i, or each on a free port of its own with --port 0
        ports = [args.port + i if args.port else 0 for i in range(args.workers)]
    else:
        from server.ports import reserve_shared_port

        reserved = reserve_shared_port(args.host, args.port)
        ports = [reserved.getsockname()[1]] * args.workers
    log_event(logging.INFO, "starting_workers", workers=args.workers, ports=sorted(set(ports)))
    try:
        fds = []
        for i in range(args.workers):
            child, fd = _spawn(args, ports[i])
            children.append(child)
            fds.append(fd)
        try:
            ports = _wait_ready(children, fds, timeout=300, stop=stop)  # a restarted worker keeps its port
        except RuntimeError as exc:
            log_event(logging.ERROR, "workers_failed", error=str(exc))
            return 1
        except _StopDuringStartup:
            log_event(logging.INFO, "stopped_during_startup")
            return 0
        ready.update(c.pid for c in children)
        if args.metrics_port is not None:
            from server.metrics import serve_multiprocess_http
            try:
                serve_multiprocess_http(args.metrics_port, args.metrics_host or args.host)
            except OSError as exc:
                raise AddressError(f"cannot serve metrics on port {args.metrics_port}: {exc} (--metrics-port)") from None
        log_event(logging.INFO, "listening", port=ports[0], ports=sorted(set(ports)), workers=args.workers,
                  worker_pids=[c.pid for c in children])
        while not stop.wait(0.5):
            for i, child in enumerate(children):
                if child.poll() is not None and not stop.is_set():
                    log_event(logging.ERROR, "worker_died", pid=child.pid, exit_code=child.returncode)
                    ready.discard(child.pid)
                    _forget_worker(child.pid, metrics_dir)
                    children[i], fd = _spawn(args, ports[i])
                    starting[fd] = children[i]
                    log_event(logging.INFO, "worker_restarted", pid=children[i].pid)
            if starting:
                for fd in select.select(list(starting), [], [], 0)[0]:
                    child = starting.pop(fd)
                    if os.read(fd, 64):
                        ready.add(child.pid)
                    os.close(fd)
        log_event(logging.INFO, "supervisor_draining", workers=[c.pid for c in children])
    finally:
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        codes = [child.wait() for child in children]
        for child in children:
            _forget_worker(child.pid, metrics_dir)
        if reserved is not None:
            reserved.close()
    failed = [c for c in codes if c != 0]
    log_event(logging.INFO, "server_stopped", worker_exit_codes=codes)
    if metrics_dir is not None:
        metrics_dir.cleanup()
    return 1 if failed else 0


def _forget_worker(pid: int, metrics_dir) -> None:
    if metrics_dir is not None:
        from server.metrics import mark_worker_dead
        mark_worker_dead(pid)
