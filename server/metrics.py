"""Prometheus metrics of the scoring service (prometheus-client).

One `ServerMetrics` per server object, on its own registry, so several servers can live
in one test process. With several worker processes the parent sets
PROMETHEUS_MULTIPROC_DIR before the workers start; their values then go to shared files
and the parent's HTTP endpoint aggregates them (prometheus-client multiprocess mode).
Counting only: nothing here may block or fail a request.
"""

from __future__ import annotations

import os

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

# Request latencies of interest sit between 0.1 ms (cache hit) and a few hundred ms.
LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01,
                   0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class ServerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None):
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.requests = Counter("moses_reorder_requests", "RPCs answered, by method and status code",
                                ["method", "code"], registry=r)
        self.received = Counter("moses_reorder_received", "RPCs that arrived, by method (answered or not: "
                                "minus requests = refused by --max-concurrent-rpcs or in flight)",
                                ["method"], registry=r)
        self.pairs = Counter("moses_reorder_pairs", "Phrase pairs scored (cache hits included)",
                             ["model"], registry=r)
        self.latency = Histogram("moses_reorder_request_seconds", "RPC handling time in the server",
                                 ["method"], buckets=LATENCY_BUCKETS, registry=r)
        self.cache_hits = Counter("moses_reorder_cache_hits", "Score answers served from the result cache",
                                  registry=r)
        self.cache_misses = Counter("moses_reorder_cache_misses", "Score requests computed (cache enabled)",
                                    registry=r)
        self.loaded_versions = Gauge("moses_reorder_loaded_versions", "Versions loaded per model",
                                     ["model"], registry=r, multiprocess_mode="liveall")
        self.newest_version = Gauge("moses_reorder_newest_version", "Newest loaded version per model",
                                    ["model"], registry=r, multiprocess_mode="liveall")
        self.cache_bytes = Gauge("moses_reorder_cache_bytes", "Bytes of answers held by the result cache",
                                 registry=r, multiprocess_mode="liveall")
        self.load_failures = Counter("moses_reorder_version_failures",
                                     "Model versions refused (corrupt file, schema change, ...)",
                                     ["model"], registry=r)

    def serve_http(self, port: int, host: str) -> None:
        """Expose /metrics on host:port (single-process mode)."""
        start_http_server(port, addr=_bare(host), registry=self.registry)


def multiprocess_enabled() -> bool:
    return bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))


def serve_multiprocess_http(port: int, host: str) -> None:
    """Expose the workers' aggregated metrics from the parent process on host:port."""
    from prometheus_client import multiprocess

    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    start_http_server(port, addr=_bare(host), registry=registry)


def _bare(host: str) -> str:
    """gRPC spells IPv6 addresses in brackets ([::]); the HTTP server wants them bare."""
    return host.strip("[]")


def mark_worker_dead(pid: int) -> None:
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(pid)
