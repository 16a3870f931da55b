"""`moses-reorder serve` as a child process on this machine's loopback, for scripts and tests.

What a benchmark or a test needs when the thing it measures is the real process (its
start-up, workers, signals, log, Moses talking to it) rather than an in-process
ScoringServer: start it on a free port (`--port 0`, the port read from its `listening`
log line, so no other process can take it first), wait until the standard health service
answers SERVING, and stop it with SIGTERM (SIGKILL if it does not exit). The options are
ServeOptions fields, turned into flags by server.options.command_line, so they are
checked before a process starts. Its log (JSON lines) goes to a file, so nothing has to
drain a pipe however long the server runs. It must not be the way users run the service:
they run the command.

    with local_server(root, threads=2) as served:
        ScoringClient(served.address, ...)
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from server.options import ServeOptions, command_line

TREE = Path(__file__).resolve().parents[1]  # the checkout whose code the child runs
# A wildcard host is reached on the loopback address of its family.
_CONNECT = {"0.0.0.0": "127.0.0.1", "::": "::1", "[::]": "::1"}


class LocalServer:
    """One `serve` process. `start` may be called again after `stop`: it comes back on the
    same port (a client's address stays valid, as in a restart of a real service)."""

    def __init__(self, models: str | os.PathLike, *, port: int = 0, log: str | os.PathLike | None = None,
                 log_level: str = "info", port_per_worker: bool = False, tree: str | os.PathLike = TREE,
                 env: dict[str, str] | None = None, **options: Any):
        self.options = ServeOptions(models=Path(models), port=port, **options)  # UsageError now, not later
        self.tree = Path(tree)
        self.port = port
        self.ports: list[int] = [port]
        self.pids: list[int] = []
        self.log_level = log_level
        self.port_per_worker = port_per_worker
        self.proc: subprocess.Popen | None = None
        self._own_log = log is None
        self.log = Path(log) if log is not None else None
        self._env = env
        self._read_at = 0
        self._events: list[dict] = []
        if port == 0 and log_level not in ("debug", "info"):
            raise ValueError("port 0 needs log_level info or debug: the port is read from the 'listening' line")

    # -- where it is ------------------------------------------------------------------------
    @property
    def host(self) -> str:
        host = _CONNECT.get(self.options.host, self.options.host)
        return f"[{host}]" if ":" in host and not host.startswith("[") else host

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def target(self) -> str:
        """Every port's address as one gRPC target (several with --port-per-worker)."""
        addresses = ",".join(f"{self.host}:{p}" for p in self.ports)
        return f"ipv4:{addresses}" if len(self.ports) > 1 else addresses

    # -- its log ----------------------------------------------------------------------------
    @property
    def events(self) -> list[dict]:
        """The JSON lines it logged so far (a line that is not JSON: {"event": "non-json-line"})."""
        if self.log is not None and self.log.exists():
            with open(self.log, "rb") as f:
                f.seek(self._read_at)
                data = f.read()
            end = data.rfind(b"\n") + 1  # a line still being written is read next time
            self._read_at += end
            for raw in data[:end].decode("utf-8", "replace").splitlines():
                try:
                    event = json.loads(raw)
                except ValueError:
                    event = None
                self._events.append(event if isinstance(event, dict) else {"event": "non-json-line", "line": raw})
        return self._events

    def names(self) -> list[str]:
        return [e.get("event") for e in self.events]

    def _tail(self, n: int = 10) -> str:
        return "\n".join(json.dumps(e) for e in self.events[-n:])

    # -- lifecycle --------------------------------------------------------------------------
    def argv(self) -> list[str]:
        import dataclasses

        options = dataclasses.replace(self.options, port=self.port)
        argv = [sys.executable, "-m", "training.cli", "serve", *command_line(options), "--log-level", self.log_level]
        return argv + (["--port-per-worker"] if self.port_per_worker else [])

    def start(self, service: str | None = "", timeout: float = 300) -> "LocalServer":
        """Start it and wait until it listens and, unless `service` is None, until the health
        service answers SERVING for `service` ("" = the server: at least one model loaded)."""
        if self.log is None:
            fd, name = tempfile.mkstemp(prefix="moses-reorder-serve-", suffix=".log")
            os.close(fd)
            self.log = Path(name)
        with open(self.log, "ab") as out:
            self._read_at = out.tell()
            self._events = []
            env = dict(os.environ if self._env is None else self._env)
            env["PYTHONPATH"] = os.pathsep.join(p for p in (str(self.tree), env.get("PYTHONPATH")) if p)
            self.proc = subprocess.Popen(self.argv(), cwd=self.tree, env=env, stdin=subprocess.DEVNULL,
                                         stdout=out, stderr=out)
        deadline = time.monotonic() + timeout
        if self.port == 0:
            listening = self._wait(lambda: next((e for e in self.events if e.get("event") == "listening"), None),
                                   deadline, "log 'listening'")
            self.port = listening["port"]
            self.ports = listening.get("ports") or [self.port]
            self.pids = listening.get("worker_pids") or [self.proc.pid]
        else:
            self.ports, self.pids = [self.port], [self.proc.pid]
        if service is not None:
            self.wait_serving(service, deadline - time.monotonic())
        return self

    def wait_serving(self, service: str = "", timeout: float = 300) -> None:
        """Until the health service answers SERVING for `service`; RuntimeError if the
        process exits first or `timeout` passes."""
        from server.healthcheck import check

        tls_ca = None if self.options.tls_cert is None else str(self.options.tls_cert)
        said = [""]

        def serving():
            ok, said[0] = check(self.address, service, timeout=2, tls_ca=tls_ca)
            return ok or None

        self._wait(serving, time.monotonic() + timeout, f"answer SERVING for {service or 'the server'!r}",
                   lambda: said[0])

    def _wait(self, ready, deadline: float, what: str, why=lambda: ""):
        while True:
            found = ready()
            if found is not None:
                return found
            if self.proc.poll() is not None:
                raise RuntimeError(f"serve exited with {self.proc.returncode} before it could {what} "
                                   f"(log {self.log}):\n{self._tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"serve did not {what} in time {why()} (log {self.log}):\n{self._tail()}")
            time.sleep(0.1)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int | None:
        """Send `sig` and wait for the exit (SIGKILL after `timeout`); its exit code (None
        if it was not running)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def close(self) -> None:
        """Stop it and remove the log it made for itself."""
        self.stop()
        if self._own_log and self.log is not None:
            self.log.unlink(missing_ok=True)

    def __enter__(self) -> "LocalServer":
        return self if self.proc is not None else self.start()

    def __exit__(self, *exc) -> None:
        self.close()


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now, for a port that must be known before a start (e.g.
    --metrics-port). Another process may take it first: prefer port 0 where it will do."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.bind((host.strip("[]"), 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def local_server(models: str | os.PathLike, *, service: str | None = "", timeout: float = 300,
                 **settings: Any) -> Iterator[LocalServer]:
    """A started LocalServer (`settings`: its constructor's), stopped on leaving."""
    server = LocalServer(models, **settings)
    try:
        yield server.start(service, timeout)
    finally:
        server.close()

