"""One scoring-server process: repository + service + health + reflection on a gRPC server.

`ScoringServer` is what `moses-reorder serve` runs in each worker process and what the
tests start in-process on an ephemeral loopback port. It owns the process-level wiring
only (thread pool, limits, health statuses that follow the repository, metrics endpoint,
drain on stop); request handling is server.service and model state server.repository.
"""

from __future__ import annotations

import logging
import os
import signal
from concurrent import futures
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from training.errors import AddressError, InputError

from server.api import SERVICE_NAME
from server.cache import ResultCache
from server.logs import log_event
from server.metrics import ServerMetrics
from server.options import ServeOptions
from server.ports import check_port_free
from server.repository import ModelRepository, ModelSnapshot
from server.service import ReorderingService, ScoreLimits

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
OVERALL = ("", SERVICE_NAME)  # the server as a whole: SERVING while any model has a loaded version

# After the grace period, how long stop() waits for cancelled handlers to return.
STOP_SLACK_SECONDS = 5.0

__all__ = ["ScoringServer", "ServeOptions"]


class HealthServicer(health.HealthServicer):
    """grpc's health servicer, with a reason when the name is unknown (the stock one sends
    NOT_FOUND with empty details) and without its start-up default of SERVING for ""."""

    def __init__(self) -> None:
        super().__init__(experimental_non_blocking=True)
        self._known: set[str] = set()
        for name in OVERALL:
            self.set(name, NOT_SERVING)

    def set(self, service: str, status) -> None:
        self._known.add(service)
        super().set(service, status)

    def Check(self, request, context):
        if request.service not in self._known:
            context.set_code(grpc.StatusCode.NOT_FOUND)
            context.set_details(f"no model or service named {request.service!r} on this server")
            return health_pb2.HealthCheckResponse()
        return super().Check(request, context)


def _signal_supervisor() -> None:
    """Reload reached one worker; the supervisor forwards SIGUSR1 so every worker rescans."""
    os.kill(os.getppid(), signal.SIGUSR1)


class ScoringServer:
    """A started-on-demand gRPC server; `start()` returns the bound port."""

    def __init__(self, options: ServeOptions):
        self.options = options
        self.metrics = ServerMetrics()
        self.health = HealthServicer()
        self.repository = ModelRepository(Path(options.models), keep_versions=options.keep_versions,
                                          listeners=[self._on_model_change],
                                          on_failure=lambda name, v, msg: self.metrics.load_failures.labels(name).inc())
        self.service = ReorderingService(
            self.repository, metrics=self.metrics,
            cache=ResultCache(options.cache_size, options.cache_mb * 1024 * 1024),
            limits=ScoreLimits(max_pairs=options.max_pairs, max_align_points=options.max_align_points,
                               max_keys=options.max_keys, max_source_tokens=options.max_source_tokens),
            enable_admin=options.enable_admin, on_reload=_signal_supervisor if options.notify_reload else None)
        self._server: grpc.Server | None = None
        self.port: int | None = None

    def _on_model_change(self, name: str, snapshot: ModelSnapshot | None) -> None:
        serving = snapshot is not None and bool(snapshot.loaded)
        self.health.set(name, SERVING if serving else NOT_SERVING)
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
            self.health.set(name, status)

    def _credentials(self) -> grpc.ServerCredentials | None:
        o = self.options
        if o.tls_cert is None and o.tls_key is None:
            return None
        if o.tls_cert is None or o.tls_key is None:
            raise InputError("--tls-cert and --tls-key go together (the certificate and its private key)")
        pem = {}
        for flag, path in (("--tls-cert", o.tls_cert), ("--tls-key", o.tls_key)):
            try:
                pem[flag] = Path(path).read_bytes()
            except OSError as exc:
                raise InputError(f"cannot read {exc.strerror or exc} ({flag})", path) from None
        return grpc.ssl_server_credentials([(pem["--tls-key"], pem["--tls-cert"])])

    def start(self) -> int:
        o = self.options
        credentials = self._credentials()
        if not o.reuse_port:  # a worker sharing a port: its supervisor checked it (server/ports.py)
            check_port_free(o.host, o.port)
        self.repository.scan()
        max_bytes = o.max_message_mb * 1024 * 1024
        server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=o.threads, thread_name_prefix="rpc"),
            maximum_concurrent_rpcs=o.max_concurrent_rpcs,
            options=[
                ("grpc.so_reuseport", 1 if o.reuse_port else 0),
                # Only requests are the client's choice: answers are bounded by --max-pairs x
                # outputs (200,000 x 8 floats = 6.4 MB) and keep gRPC's unlimited default.
                ("grpc.max_receive_message_length", max_bytes),
            ],
        )
        server.add_generic_rpc_handlers((self.service.generic_handler(),))
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        reflection.enable_server_reflection(
            (SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME), server)
        address = f"{o.host}:{o.port}"
        try:
            if credentials is None:
                port = server.add_insecure_port(address)
            else:
                port = server.add_secure_port(address, credentials)
        except RuntimeError:
            port = 0
        if port == 0:
            raise AddressError(f"cannot listen on {o.host}:{o.port} (address in use or not local?) (--host/--port)")
        if o.metrics_port is not None:
            metrics_host = o.metrics_host or o.host
            try:
                self.metrics.serve_http(o.metrics_port, metrics_host)
            except OSError as exc:
                raise AddressError(f"cannot serve metrics on {metrics_host}:{o.metrics_port}: {exc} "
                                 "(--metrics-host/--metrics-port)") from None
        server.start()
        self._server = server
        self.port = port
        self._set_overall_health()
        self.repository.start_polling(o.poll_seconds)
        log_event(logging.INFO, "server_started", port=port, host=o.host, tls=credentials is not None,
                  models=str(o.models),
                  loaded={s.name: list(s.loaded_versions) for s in self.repository.snapshots()},
                  admin=o.enable_admin, cache_size=o.cache_size, cache_mb=o.cache_mb, max_pairs=o.max_pairs,
                  max_align_points=o.max_align_points, max_keys=o.max_keys, max_source_tokens=o.max_source_tokens,
                  max_message_mb=o.max_message_mb, max_concurrent_rpcs=o.max_concurrent_rpcs, threads=o.threads)
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
        self.health.enter_graceful_shutdown()
        self.repository.stop_polling()
        log_event(logging.INFO, "server_draining", grace_seconds=grace)
        if not self._server.stop(grace).wait(grace + STOP_SLACK_SECONDS):
            log_event(logging.WARNING, "server_stop_slow", grace_seconds=grace,
                      why=f"handlers still running {STOP_SLACK_SECONDS:g} s after the grace period")
        self._server = None
        log_event(logging.INFO, "server_stopped")

    def wait(self) -> None:
        if self._server is not None:
            self._server.wait_for_termination()
