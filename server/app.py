"""One scoring-server process: repository + service + health + reflection on a grpc.aio server.

`ScoringServer` is what `moses-reorder serve` runs in each worker process and what the
tests start in-process on an ephemeral loopback port. The gRPC server runs on an asyncio
event loop in a thread of its own, so `start()` and `stop()` are plain calls, and a call
that has not sent its request holds a coroutine, never a thread (server.guard). This module
owns the process-level wiring only (the loop, the scoring pool, limits, health statuses
that follow the repository, the metrics endpoint, drain on stop); requests are
server.guard, server.service and server.stock, model state server.repository.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
from concurrent import futures
from pathlib import Path

import grpc
from grpc_health.v1 import health
from grpc_reflection.v1alpha import reflection

from training.errors import AddressError, InputError

from server.api import SERVICE_NAME
from server.cache import ResultCache
from server.guard import Admission, Guard, MethodTable
from server.logs import RefusalLog, log_event
from server.metrics import ServerMetrics
from server.options import ServeOptions
from server.ports import check_port_free
from server.repository import ModelRepository, ModelSnapshot
from server.service import ReorderingService, ScoreLimits
from server.stock import NOT_SERVING, SERVING, HealthServicer, stock_handlers
from server.tls import read_tls_pair

OVERALL = ("", SERVICE_NAME)  # the server as a whole: SERVING while any model has a loaded version

# After the grace period, how long stop() waits for cancelled handlers to return.
STOP_SLACK_SECONDS = 5.0

__all__ = ["ScoringServer", "ServeOptions"]


def _signal_supervisor() -> None:
    """Reload reached one worker; the supervisor forwards SIGUSR1 so every worker rescans."""
    os.kill(os.getppid(), signal.SIGUSR1)


class ScoringServer:
    """A started-on-demand gRPC server; `start()` returns the bound port."""

    def __init__(self, options: ServeOptions):
        self.options = options
        self.metrics = ServerMetrics()
        self.health = HealthServicer(initial=OVERALL)
        self.refusals = RefusalLog()
        self.repository = ModelRepository(Path(options.models), keep_versions=options.keep_versions,
                                          listeners=[self._on_model_change],
                                          on_failure=lambda name, v, msg: self.metrics.load_failures.labels(name).inc())
        self._pool = futures.ThreadPoolExecutor(max_workers=options.threads, thread_name_prefix="score")
        self.service = ReorderingService(
            self.repository, metrics=self.metrics,
            cache=ResultCache(options.cache_size, options.cache_mb * 1024 * 1024),
            limits=ScoreLimits(max_pairs=options.max_pairs, max_align_points=options.max_align_points,
                               max_keys=options.max_keys, max_source_tokens=options.max_source_tokens),
            pool=self._pool, on_reload=_signal_supervisor if options.notify_reload else None)
        self.guard = Guard(metrics=self.metrics, refusals=self.refusals,
                           admission=Admission(options.max_concurrent_rpcs),
                           receive_timeout=options.receive_timeout_seconds, enable_admin=options.enable_admin)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: grpc.aio.Server | None = None
        self._ticker: asyncio.Task | None = None
        self._stopped = threading.Event()
        self.port: int | None = None

    def _on_model_change(self, name: str, snapshot: ModelSnapshot | None) -> None:
        serving = snapshot is not None and bool(snapshot.loaded)
        self.health.set_soon(name, SERVING if serving else NOT_SERVING)
        self._set_overall_health()
        loaded = snapshot.loaded_versions if snapshot is not None else ()
        self.metrics.loaded_versions.labels(name).set(len(loaded))
        self.metrics.newest_version.labels(name).set(max(loaded) if loaded else 0)
        if snapshot is not None and not snapshot.loaded:
            log_event(logging.ERROR, "model_not_serving", model=name, why=snapshot.failure_summary(detailed=True))

    def _set_overall_health(self) -> None:
        """"" and the service name are SERVING while at least one model has a loaded version:
        a server over an empty or wrong repository answers nothing useful, and a load
        balancer or container health check must see that."""
        status = SERVING if any(s.loaded for s in self.repository.snapshots()) else NOT_SERVING
        for name in OVERALL:
            self.health.set_soon(name, status)

    def _credentials(self) -> grpc.ServerCredentials | None:
        o = self.options
        if o.tls_cert is None and o.tls_key is None:
            return None
        if o.tls_cert is None or o.tls_key is None:
            raise InputError("--tls-cert and --tls-key go together (the certificate and its private key)")
        cert, key = read_tls_pair(Path(o.tls_cert), Path(o.tls_key))
        return grpc.ssl_server_credentials([(key, cert)])

    # -- the event loop ------------------------------------------------------------------
    def _start_loop(self) -> None:
        loop = asyncio.new_event_loop()

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_forever()
                left = [task for task in asyncio.all_tasks(loop) if not task.done()]
                for task in left:
                    task.cancel()
                loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()

        self._loop = loop
        self._thread = threading.Thread(target=run, name="grpc-loop", daemon=True)
        self._thread.start()
        self.health.bind(loop)

    def _call(self, coroutine, timeout: float | None = None):
        """Run a coroutine on the server's loop and wait for its result here."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)

    def _stop_loop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop = self._thread = None

    async def _serve(self, credentials: grpc.ServerCredentials | None) -> int:
        o = self.options
        server = grpc.aio.server(options=[
            ("grpc.so_reuseport", 1 if o.reuse_port else 0),
            # Only requests are the client's choice: answers are bounded by --max-pairs x
            # outputs (200,000 x 8 floats = 6.4 MB) and keep gRPC's unlimited default.
            ("grpc.max_receive_message_length", o.max_message_mb * 1024 * 1024),
        ])
        handlers = self.service.handlers(self.guard)
        handlers.update(stock_handlers(self.guard, self.health,
                                       (SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME)))
        server.add_generic_rpc_handlers((MethodTable(handlers),))
        address = f"{o.host}:{o.port}"
        try:
            port = server.add_insecure_port(address) if credentials is None else \
                server.add_secure_port(address, credentials)
        except RuntimeError:
            port = 0
        if port == 0:
            raise AddressError(f"cannot listen on {o.host}:{o.port} (address in use or not local?) (--host/--port)")
        await server.start()
        self._server = server
        self._ticker = asyncio.get_running_loop().create_task(self._flush_refusals())
        return port

    async def _flush_refusals(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            self.refusals.flush()

    async def _drain(self, grace: float) -> None:
        await self.health.enter_graceful_shutdown()
        asyncio.get_running_loop().call_later(grace, self.service.cancel_in_flight)
        await self._server.stop(grace)
        self._ticker.cancel()

    # -- start and stop ------------------------------------------------------------------
    def start(self) -> int:
        o = self.options
        credentials = self._credentials()
        if not o.reuse_port:  # a worker sharing a port: its supervisor checked it (server/ports.py)
            check_port_free(o.host, o.port)
        self._start_loop()
        try:
            self.repository.scan()
            port = self._call(self._serve(credentials))
            if o.metrics_port is not None:
                metrics_host = o.metrics_host or o.host
                try:
                    self.metrics.serve_http(o.metrics_port, metrics_host)
                except OSError as exc:
                    raise AddressError(f"cannot serve metrics on {metrics_host}:{o.metrics_port}: {exc} "
                                       "(--metrics-host/--metrics-port)") from None
        except BaseException:
            if self._server is not None:
                self._call(self._server.stop(0))
                self._server = None
            self._stop_loop()
            self._pool.shutdown(wait=False)
            raise
        self.port = port
        self._set_overall_health()
        self.repository.start_polling(o.poll_seconds)
        log_event(logging.INFO, "server_started", port=port, host=o.host, tls=credentials is not None,
                  models=str(o.models),
                  loaded={s.name: list(s.loaded_versions) for s in self.repository.snapshots()},
                  admin=o.enable_admin, cache_size=o.cache_size, cache_mb=o.cache_mb, max_pairs=o.max_pairs,
                  max_align_points=o.max_align_points, max_keys=o.max_keys, max_source_tokens=o.max_source_tokens,
                  max_message_mb=o.max_message_mb, max_concurrent_rpcs=o.max_concurrent_rpcs, threads=o.threads,
                  receive_timeout_seconds=o.receive_timeout_seconds)
        if not any(s.loaded for s in self.repository.snapshots()):
            log_event(logging.WARNING, "no_model_loaded", models=str(o.models),
                      why="health is NOT_SERVING until a model version loads")
        return port

    def stop(self, grace: float | None = None) -> None:
        """Refuse new calls, let in-flight ones finish for up to `grace` seconds, then cancel
        them. A cancelled Score stops at its next slice of pairs (server.service), so this
        returns within about `grace` plus one slice, however long the requests were."""
        if self._server is None:
            return
        grace = self.options.grace_seconds if grace is None else grace
        self.repository.stop_polling()
        log_event(logging.INFO, "server_draining", grace_seconds=grace)
        try:
            self._call(self._drain(grace), grace + STOP_SLACK_SECONDS)
        except TimeoutError:
            log_event(logging.WARNING, "server_stop_slow", grace_seconds=grace,
                      why=f"handlers still running {STOP_SLACK_SECONDS:g} s after the grace period")
        self.service.cancel_in_flight()
        self._pool.shutdown(wait=True)  # a Score in the pool stops at its next slice
        self._server = None
        self._stop_loop()
        self.refusals.flush(everything=True)
        self._stopped.set()
        log_event(logging.INFO, "server_stopped")

    def wait(self) -> None:
        """Until stop() has finished."""
        if self._server is not None:
            self._stopped.wait()
