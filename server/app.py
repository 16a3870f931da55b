"""One scoring-server process: repository + service + health + reflection on a gRPC server.

`ScoringServer` is what `moses-reorder serve` runs in each worker process and what the
tests start in-process on an ephemeral loopback port. It owns the process-level wiring
only (thread pool, limits, health statuses that follow the repository, metrics endpoint,
drain on stop); request handling is server.service and model state server.repository.
"""

from __future__ import annotations

import logging
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from server.api import SERVICE_NAME
from server.cache import ResultCache
from server.logs import log_event
from server.metrics import ServerMetrics
from server.repository import ModelRepository, ModelSnapshot
from server.service import ReorderingService

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


@dataclass
class ServeOptions:
    models: Path
    host: str = "[::]"
    port: int = 50051
    workers: int = 1
    threads: int = 4
    poll_seconds: float = 10.0
    enable_admin: bool = False
    metrics_port: int | None = None
    max_pairs: int = 200_000
    max_message_mb: int = 16
    cache_size: int = 1024
    keep_versions: int = 2
    grace_seconds: float = 10.0
    reuse_port: bool = False  # set by the multi-worker parent: several processes share the port


class ScoringServer:
    """A started-on-demand gRPC server; `start()` returns the bound port."""

    def __init__(self, options: ServeOptions):
        self.options = options
        self.metrics = ServerMetrics()
        self.health = health.HealthServicer(experimental_non_blocking=True)
        self.repository = ModelRepository(Path(options.models), keep_versions=options.keep_versions,
                                          listeners=[self._on_model_change],
                                          on_failure=lambda name, v, msg: self.metrics.load_failures.labels(name).inc())
        self.service = ReorderingService(self.repository, metrics=self.metrics,
                                         cache=ResultCache(options.cache_size),
                                         max_pairs=options.max_pairs, enable_admin=options.enable_admin)
        self._server: grpc.Server | None = None
        self.port: int | None = None

    def _on_model_change(self, name: str, snapshot: ModelSnapshot | None) -> None:
        serving = snapshot is not None and bool(snapshot.loaded)
        self.health.set(name, SERVING if serving else NOT_SERVING)
        loaded = snapshot.loaded_versions if snapshot is not None else ()
        self.metrics.loaded_versions.labels(name).set(len(loaded))
        self.metrics.newest_version.labels(name).set(max(loaded) if loaded else 0)
        if snapshot is not None and not snapshot.loaded:
            log_event(logging.ERROR, "model_not_serving", model=name, why=snapshot.failure_summary())

    def start(self) -> int:
        o = self.options
        self.repository.scan()
        max_bytes = o.max_message_mb * 1024 * 1024
        server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=o.threads, thread_name_prefix="rpc"),
            options=[
                ("grpc.so_reuseport", 1 if o.reuse_port else 0),
                ("grpc.max_receive_message_length", max_bytes),
                ("grpc.max_send_message_length", max_bytes),
            ],
        )
        server.add_generic_rpc_handlers((self.service.generic_handler(),))
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        reflection.enable_server_reflection(
            (SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME), server)
        port = server.add_insecure_port(f"{o.host}:{o.port}")
        if port == 0:
            raise OSError(f"cannot bind {o.host}:{o.port}")
        server.start()
        self._server = server
        self.port = port
        self.health.set("", SERVING)
        self.health.set(SERVICE_NAME, SERVING)
        if o.metrics_port is not None:
            self.metrics.serve_http(o.metrics_port)
        self.repository.start_polling(o.poll_seconds)
        log_event(logging.INFO, "server_started", port=port, models=str(o.models),
                  loaded={s.name: list(s.loaded_versions) for s in self.repository.snapshots()},
                  admin=o.enable_admin, cache_size=o.cache_size, max_pairs=o.max_pairs)
        return port

    def stop(self, grace: float | None = None) -> None:
        """Refuse new calls, let in-flight ones finish (up to `grace` seconds), then stop."""
        if self._server is None:
            return
        grace = self.options.grace_seconds if grace is None else grace
        self.health.enter_graceful_shutdown()
        self.repository.stop_polling()
        log_event(logging.INFO, "server_draining", grace_seconds=grace)
        self._server.stop(grace).wait()
        self._server = None
        log_event(logging.INFO, "server_stopped")

    def wait(self) -> None:
        if self._server is not None:
            self._server.wait_for_termination()
