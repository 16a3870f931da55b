"""The scoring server's settings and their defaults: the one place they are written.

`ServeOptions` is what server.app.ScoringServer runs with; `moses-reorder serve`
(server/commands/serve.py) takes its argparse defaults from here (`default(name)`), so a
default is changed in one line. This module imports nothing heavy (no gRPC, no numba):
the CLI reads it to build `--help`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class ServeOptions:
    models: Path
    # Loopback unless told otherwise: the container and replicas pass --host 0.0.0.0 or [::].
    host: str = "127.0.0.1"
    port: int = 50051
    workers: int = 1
    # Threads per process that score requests too large for the event loop (over
    # server.service.INLINE_KEYS feature keys; realistic sentences are scored on the loop).
    threads: int = 4
    # Calls one process works on at once: from the call's request message to its answer,
    # running or waiting for one of the --threads (health and reflection calls count too;
    # a call that has not sent its message does not). One more is refused at once with
    # RESOURCE_EXHAUSTED naming this flag, logged and counted, instead of queueing; one
    # whose deadline passed while it waited is not started. 32 = 8 per thread: a Moses run
    # with up to 32 decoder threads on one server process never sees a refusal.
    max_concurrent_rpcs: int = 32
    # How long a call may take to send its request message (a reflection stream: each next
    # message) before it is ended with DEADLINE_EXCEEDED. Such a call holds no thread, only
    # a coroutine; this bounds how long. Moses sends its request with the call's headers; a
    # 4 MiB request needs 4 s even at 1 MB/s.
    receive_timeout_seconds: float = 10.0
    poll_seconds: float = 10.0
    enable_admin: bool = False
    metrics_port: int | None = None
    metrics_host: str | None = None  # None: the same address as --host
    # TLS: both PEM files, or neither (plaintext).
    tls_cert: Path | None = None
    tls_key: Path | None = None
    # Limits of one Score request (each refused with RESOURCE_EXHAUSTED naming the field).
    max_pairs: int = 200_000
    # Tokens of the source sentence. Moses reads sentences of any length, but its
    # phrase-based search is meant for sentences of tens of words; 4,096 is far above
    # any real one and keeps a sentence's per-token work and memory small.
    max_source_tokens: int = 4096
    # The largest request. A request costs the server about 24 times its size while it is
    # parsed and validated (8 x 16 MiB requests at 4 threads: +1.5 GiB peak RSS at cbd7ba5,
    # benchmarks/serve_hostile.py), so this sets memory: 4 threads x 24 x 4 MiB ~ 0.4 GiB.
    # 4 MiB holds --max-pairs real ja-en phrase pairs (12-13 bytes each: 2.6 MB) and
    # is 290 times the largest real ja-en request (14 KB; benchmarks/request_limits.py).
    max_message_mb: int = 4
    # Alignment points of one pair (duplicates count). Moses extracts phrases of at most
    # 7 words a side by default, so a pair has at most 7 x 7 = 49 points; the 1.6 million
    # pairs extracted from ja-en train have at most 10 (benchmarks/request_limits.py).
    # 64 leaves room for --max-phrase-length 8.
    max_align_points: int = 64
    # Feature keys one request may expand to (the upper bound counted before extraction).
    # With ANOVA d=2 a pair costs about (base features)^2 / 2 keys, so this, not
    # --max-pairs, bounds an S8/S9/S14/S15 request's time. The realistic ja-en requests
    # (every phrase-table option of a test sentence) need at most 40k keys under S15;
    # 8M admits 200,000 typical S15 pairs and costs about 2 s at 4M keys/s.
    max_keys: int = 8_000_000
    # Result cache: entries and bytes of stored answers per process (either 0 = off).
    cache_size: int = 1024
    cache_mb: int = 64
    keep_versions: int = 2
    grace_seconds: float = 10.0
    reuse_port: bool = False  # set by the multi-worker parent: several processes share the port
    notify_reload: bool = False  # a worker: after Reload, SIGUSR1 the supervisor so siblings rescan


_FIELDS = {f.name: f for f in dataclasses.fields(ServeOptions)}


def default(name: str) -> Any:
    """The default of one ServeOptions field (for the CLI's argparse defaults and help)."""
    value = _FIELDS[name].default
    if value is dataclasses.MISSING:
        raise KeyError(f"ServeOptions.{name} has no default")
    return value
