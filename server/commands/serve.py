"""`moses-reorder serve`: run the gRPC scoring service over a model repository.

With `--workers 1` (default) the server runs in this process. With N > 1 this process
becomes a small supervisor: it reserves the port with SO_REUSEPORT (as in grpc's
examples/python/multiprocessing), starts N worker processes that bind the same port (the
kernel spreads connections over them), serves their aggregated Prometheus metrics,
restarts a worker that dies, and on SIGTERM/SIGINT forwards SIGTERM so every worker
drains its in-flight requests before exiting. The alternative to SO_REUSEPORT is one
port per process with client-side `round_robin` over the addresses (docs in the README).

This module parses arguments and manages processes; it must not touch models or RPCs
(server.app does), and it keeps its imports light so `moses-reorder --help` stays fast.
"""

from __future__ import annotations

import argparse
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from training.errors import InputError


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "serve", help="serve reordering models over gRPC",
        description="Serve the models of a repository ROOT/<name>/<version>/model.<ext> over gRPC "
                    "(reordering.v1.ReorderingScorer, grpc.health.v1, server reflection).")
    p.add_argument("--models", required=True, type=Path, help="model repository root")
    p.add_argument("--host", default="[::]", help="address to bind (default [::], all interfaces)")
    p.add_argument("--port", type=int, default=50051, help="port (0 = pick a free one; default 50051)")
    p.add_argument("--workers", type=int, default=1,
                   help="server processes sharing the port via SO_REUSEPORT (default 1; use the core count)")
    p.add_argument("--threads", type=int, default=4, help="RPC threads per process (default 4)")
    p.add_argument("--poll-seconds", type=float, default=10.0,
                   help="rescan the repository every S seconds (0 = never; default 10)")
    p.add_argument("--enable-admin", action="store_true", help="allow the Reload RPC")
    p.add_argument("--metrics-port", type=int, default=None, help="serve Prometheus /metrics on this port")
    p.add_argument("--max-pairs", type=int, default=200_000,
                   help="refuse requests with more phrase pairs (RESOURCE_EXHAUSTED; default 200000)")
    p.add_argument("--max-message-mb", type=int, default=16, help="largest request/response in MiB (default 16)")
    p.add_argument("--cache-size", type=int, default=1024,
                   help="result-cache entries per process (one per distinct request; 0 = off; default 1024)")
    p.add_argument("--keep-versions", type=int, default=2,
                   help="newest loadable versions kept loaded per model, for pinned clients (default 2)")
    p.add_argument("--grace-seconds", type=float, default=10.0,
                   help="on SIGTERM, how long in-flight requests may take to finish (default 10)")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    # Internal: set by the supervisor for its workers.
    p.add_argument("--worker-ready-fd", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--reuse-port", action="store_true", help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def _check(args: argparse.Namespace) -> None:
    for name in ("workers", "threads", "max_pairs", "max_message_mb", "keep_versions"):
        if getattr(args, name) < 1:
            raise InputError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    if args.cache_size < 0:
        raise InputError(f"--cache-size must be >= 0, got {args.cache_size}")
    if not args.models.is_dir():
        raise InputError("model repository root is not a directory (--models)", args.models)


def run(args: argparse.Namespace) -> int:
    from server.logs import configure_logging

    configure_logging(args.log_level)
    _check(args)
    if args.workers > 1 and args.worker_ready_fd is None:
        return _supervise(args)
    return _serve_here(args)


# -- one process ---------------------------------------------------------------------------
def _serve_here(args: argparse.Namespace) -> int:
    from server.app import ScoringServer, ServeOptions
    from server.logs import log_event

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: stop.set())
    in_worker = args.worker_ready_fd is not None
    options = ServeOptions(
        models=args.models, host=args.host, port=args.port, workers=1, threads=args.threads,
        poll_seconds=args.poll_seconds, enable_admin=args.enable_admin,
        metrics_port=None if in_worker else args.metrics_port, max_pairs=args.max_pairs,
        max_message_mb=args.max_message_mb, cache_size=args.cache_size,
        keep_versions=args.keep_versions, grace_seconds=args.grace_seconds, reuse_port=args.reuse_port)
    server = ScoringServer(options)
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
def _reserve_port(host: str, port: int) -> socket.socket:
    """Bind (never listen) a SO_REUSEPORT socket so the workers can share the port."""
    bare = host.strip("[]")
    if bare == "localhost":
        bare = "127.0.0.1"
    family = socket.AF_INET6 if ":" in bare else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    if sock.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT) == 0:
        raise InputError("this system does not support SO_REUSEPORT; run one process per port instead")
    sock.bind((bare, port))
    return sock


def _worker_argv(args: argparse.Namespace, port: int, ready_fd: int) -> list[str]:
    argv = [sys.executable, "-m", "training.cli", "serve",
            "--models", str(args.models), "--host", args.host, "--port", str(port),
            "--threads", str(args.threads), "--poll-seconds", str(args.poll_seconds),
            "--max-pairs", str(args.max_pairs), "--max-message-mb", str(args.max_message_mb),
            "--cache-size", str(args.cache_size), "--keep-versions", str(args.keep_versions),
            "--grace-seconds", str(args.grace_seconds), "--log-level", args.log_level,
            "--worker-ready-fd", str(ready_fd), "--reuse-port"]
    if args.enable_admin:
        argv.append("--enable-admin")
    return argv


def _spawn(args: argparse.Namespace, port: int) -> tuple[subprocess.Popen, int]:
    read_fd, write_fd = os.pipe()
    try:
        child = subprocess.Popen(_worker_argv(args, port, write_fd), pass_fds=(write_fd,))
    finally:
        os.close(write_fd)
    return child, read_fd


def _wait_ready(children: list[subprocess.Popen], fds: list[int], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    pending = dict(zip(fds, children))
    while pending:
        left = deadline - time.monotonic()
        if left <= 0:
            raise RuntimeError(f"{len(pending)} worker(s) not ready after {timeout:.0f} s")
        ready, _, _ = select.select(list(pending), [], [], min(left, 0.5))
        for fd in ready:
            if not os.read(fd, 64):
                raise RuntimeError(f"worker {pending[fd].pid} exited during start-up "
                                   f"(exit code {pending[fd].wait()})")
            os.close(fd)
            del pending[fd]
        for fd, child in list(pending.items()):
            if child.poll() is not None and fd not in ready:
                raise RuntimeError(f"worker {child.pid} exited during start-up (exit code {child.returncode})")


def _supervise(args: argparse.Namespace) -> int:
    from server.logs import log_event

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: stop.set())
    metrics_dir = None
    if args.metrics_port is not None:
        metrics_dir = tempfile.TemporaryDirectory(prefix="moses-reorder-metrics-")
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir.name  # inherited by the workers
    reserved = _reserve_port(args.host, args.port)
    port = reserved.getsockname()[1]
    children: list[subprocess.Popen] = []
    try:
        fds = []
        for _ in range(args.workers):
            child, fd = _spawn(args, port)
            children.append(child)
            fds.append(fd)
        try:
            _wait_ready(children, fds, timeout=300)
        except RuntimeError as exc:
            log_event(logging.ERROR, "workers_failed", error=str(exc))
            return 1
        if args.metrics_port is not None:
            from server.metrics import serve_multiprocess_http
            serve_multiprocess_http(args.metrics_port)
        log_event(logging.INFO, "listening", port=port, workers=args.workers,
                  worker_pids=[c.pid for c in children])
        while not stop.wait(0.5):
            for i, child in enumerate(children):
                if child.poll() is not None and not stop.is_set():
                    log_event(logging.ERROR, "worker_died", pid=child.pid, exit_code=child.returncode)
                    _forget_worker(child.pid, metrics_dir)
                    children[i], fd = _spawn(args, port)
                    os.close(fd)
                    log_event(logging.INFO, "worker_restarted", pid=children[i].pid)
        log_event(logging.INFO, "supervisor_draining", workers=[c.pid for c in children])
    finally:
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        codes = [child.wait() for child in children]
        for child in children:
            _forget_worker(child.pid, metrics_dir)
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
