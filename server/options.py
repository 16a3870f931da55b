"""The scoring server's settings, their defaults and their ranges: the one place they are written.

`ServeOptions` is what server.app.ScoringServer runs with, and it refuses a value out of
range when it is built (`_parameter_constraints`), so a server built in code is checked
like one started from the command line. `moses-reorder serve` (server/commands/serve.py)
takes its argparse defaults from here (`default(name)`), and `command_line` turns options
back into its flags (the supervisor's worker processes, server.local), so a setting is
added in one place. This module imports nothing heavy (no gRPC, no numba): the CLI reads
it to build `--help`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from training.constraints import Interval, check_params, whole
from training.errors import UsageError

# Seconds: 0 and up (poll 0 = never rescan; grace 0 = cancel in-flight requests at once).
_SECONDS = Interval(0.0, None)


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
    # parsed and validated, so this sets memory: 4 threads x 24 x 4 MiB ~ 0.4 GiB. 4 MiB
    # holds --max-pairs real ja-en phrase pairs and is far above any real request
    # (benchmarks/RESULTS.md, Serving: serve_hostile.py and request_limits.py).
    max_message_mb: int = 4
    # Alignment points of one pair (duplicates count). Moses extracts phrases of at most
    # 7 words a side by default, so a pair has at most 7 x 7 = 49 points (real pairs have
    # far fewer: RESULTS, request_limits.py). 64 leaves room for --max-phrase-length 8.
    max_align_points: int = 64
    # Feature keys one request may expand to (the upper bound counted before extraction).
    # With ANOVA d=2 a pair costs about (base features)^2 / 2 keys, so this, not
    # --max-pairs, bounds an S8/S9/S14/S15 request's time. The realistic ja-en requests
    # (every phrase-table option of a test sentence) need far fewer; 8M admits --max-pairs
    # typical S15 pairs in seconds (RESULTS, request_limits.py).
    max_keys: int = 8_000_000
    # Result cache: entries and bytes of stored answers per process (either 0 = off).
    cache_size: int = 1024
    cache_mb: int = 64
    keep_versions: int = 2
    grace_seconds: float = 10.0
    reuse_port: bool = False  # set by the multi-worker parent: several processes share the port
    notify_reload: bool = False  # a worker: after Reload, SIGUSR1 the supervisor so siblings rescan

    _parameter_constraints: ClassVar[dict[str, list]] = {
        "models": [Path], "host": [str], "port": [whole(0, 65535)], "workers": [whole(1)],
        "threads": [whole(1)], "max_concurrent_rpcs": [whole(1)],
        "receive_timeout_seconds": [Interval(0.01, None)], "poll_seconds": [_SECONDS],
        "enable_admin": [bool], "metrics_port": [whole(1, 65535), None], "metrics_host": [str, None],
        "tls_cert": [Path, None], "tls_key": [Path, None], "max_pairs": [whole(1)],
        "max_source_tokens": [whole(1)],
        # gRPC's message limit is a 32-bit byte count
        "max_message_mb": [whole(1, 2047)],
        "max_align_points": [whole(1)], "max_keys": [whole(1)], "cache_size": [whole(0)],
        "cache_mb": [whole(0)], "keep_versions": [whole(1)], "grace_seconds": [_SECONDS],
        "reuse_port": [bool], "notify_reload": [bool],
    }

    def __post_init__(self) -> None:
        check_params("serve", self._parameter_constraints, dataclasses.asdict(self), flag)
        if (self.tls_cert is None) != (self.tls_key is None):
            raise UsageError("--tls-cert and --tls-key go together (the certificate and its private key)")


_FIELDS = {f.name: f for f in dataclasses.fields(ServeOptions)}
# Fields no flag sets: a worker process sets this one itself (server/commands/serve.py).
NOT_ON_COMMAND_LINE = ("notify_reload",)


def flag(name: str) -> str:
    """The `serve` flag of a ServeOptions field: max_pairs -> --max-pairs."""
    return "--" + name.replace("_", "-")


def default(name: str) -> Any:
    """The default of one ServeOptions field (for the CLI's argparse defaults and help)."""
    value = _FIELDS[name].default
    if value is dataclasses.MISSING:
        raise KeyError(f"ServeOptions.{name} has no default")
    return value


def command_line(options: ServeOptions) -> list[str]:
    """The `serve` flags that run a process with `options`: --models, then every field that
    differs from its default (a boolean as its bare flag)."""
    argv = ["--models", str(options.models)]
    for name, field in _FIELDS.items():
        value = getattr(options, name)
        if name == "models" or name in NOT_ON_COMMAND_LINE or value == field.default:
            continue
        if isinstance(value, bool):
            if not value:
                raise ValueError(f"ServeOptions.{name}=False has no flag (its default is True)")
            argv.append(flag(name))
        else:
            argv += [flag(name), str(value)]
    return argv
