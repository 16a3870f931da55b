"""A small Python client of the scoring service (reordering.v1): one call per sentence.

    from server.client import ScoringClient

    with ScoringClient("127.0.0.1:50051", model="ja-en") as client:
        client.pin()                                   # the newest loaded version, for the whole run
        scores = client.score(["彼", "は", "走る"],      # the source sentence's tokens
                              [(0, 1, ["he"], [(0, 0)]),  # (span start, span end exclusive,
                               (2, 3, ["runs"], [(0, 0)])])  #  target tokens, in-phrase alignment)
        scores.probabilities   # float32 [pairs x outputs], Moses's column order
        scores.version         # the version that made every row

The request is built by training.modelfile.request.arrays_from_strings, the one place
that turns strings into the ScoreRequest arrays (the server's own tests use it too).
Several addresses ("10.0.0.1:50051,10.0.0.2:50051" or a list) are balanced per RPC with
gRPC's round_robin, as the C++ client does; UNAVAILABLE is retried by gRPC itself within
the deadline. Every gRPC failure is a ScoringError (a subclass per status the service
documents) naming the status, the server's message and the address.

This module must not know how the server works inside: it speaks the proto only.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Sequence

import grpc
import numpy as np

from server.api import SERVICE_NAME, pb, pb_grpc
from training.modelfile.request import arrays_from_strings

# The client's defaults (server/ may not import training.defaults): the C++ client's
# timeout-ms=5000, and a message limit above the server's --max-message-mb default.
DEFAULT_TIMEOUT_SECONDS = 5.0
DEFAULT_MAX_MESSAGE_MB = 64
RETRY_ATTEMPTS = 3

Pair = tuple[int, int, Sequence[str], Sequence[tuple[int, int]]]


class ScoringError(Exception):
    """A failed RPC: `code` (grpc.StatusCode), `details` (the server's message), `address`."""

    def __init__(self, code: grpc.StatusCode, details: str, address: str, method: str):
        self.code, self.details, self.address, self.method = code, details, address, method
        super().__init__(f"{method} on {address}: {code.name}: {details}")


class InvalidRequest(ScoringError):
    """INVALID_ARGUMENT: the message names the request field."""


class ModelNotFound(ScoringError):
    """NOT_FOUND: no model of that name in the server's repository."""


class VersionNotLoaded(ScoringError):
    """FAILED_PRECONDITION: the pinned version is not (or no longer) loaded."""


class RequestTooLarge(ScoringError):
    """RESOURCE_EXHAUSTED: over one of the server's request limits (--max-pairs,
    --max-source-tokens, --max-align-points, --max-keys, --max-message-mb), or the server
    already holds --max-concurrent-rpcs calls (details "Concurrent RPC limit exceeded!":
    busy, try later or another replica)."""


class Unavailable(ScoringError):
    """UNAVAILABLE: no server answered (down, wrong address), after gRPC's retries."""


class DeadlineExceeded(ScoringError):
    """DEADLINE_EXCEEDED: no answer within the call's timeout (or the server saw that a
    Score could not finish in the time left and did not start it)."""


ERRORS = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidRequest,
    grpc.StatusCode.NOT_FOUND: ModelNotFound,
    grpc.StatusCode.FAILED_PRECONDITION: VersionNotLoaded,
    grpc.StatusCode.RESOURCE_EXHAUSTED: RequestTooLarge,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
}


@dataclass(frozen=True)
class Scores:
    """One Score answer: probabilities float32 [pairs x outputs] in Moses's column order."""

    model: str
    version: int
    outputs: tuple[str, ...]
    probabilities: np.ndarray


_IPV4_HOST_PORT = re.compile(r"^[0-9.]+:[0-9]+$")
_IPV6_HOST_PORT = re.compile(r"^\[[0-9A-Fa-f:.]+\]:[0-9]+$")


def resolve_target(addresses: str | Sequence[str]) -> str:
    """A gRPC target for one address, a URI, or several numeric addresses (round_robin).

    gRPC resolves a list only under an ipv4:/ipv6: scheme, which takes numeric addresses;
    for host names use one DNS name that resolves to every replica (dns:///scorer:50051).
    """
    if isinstance(addresses, str) and (addresses.startswith(("ipv4:", "ipv6:")) or "://" in addresses):
        return addresses  # already a gRPC target
    items = [a.strip() for a in (addresses.split(",") if isinstance(addresses, str) else addresses)]
    if not items or not all(items):
        raise ValueError(f"server address list {addresses!r} is empty or has an empty entry")
    if len(items) == 1:
        return items[0]
    v6 = items[0].startswith("[")
    pattern = _IPV6_HOST_PORT if v6 else _IPV4_HOST_PORT
    for item in items:
        if not pattern.match(item):
            raise ValueError(f"server address list {addresses!r}: {item!r} is not a numeric "
                             f"{'[ipv6]:port' if v6 else 'ipv4:port'} (for host names use one DNS name that "
                             "resolves to every replica, e.g. dns:///scorer:50051)")
    return ("ipv6:" if v6 else "ipv4:") + ",".join(items)


def _service_config() -> str:
    return json.dumps({
        "loadBalancingConfig": [{"round_robin": {}}],
        "methodConfig": [{"name": [{"service": SERVICE_NAME}],
                          "retryPolicy": {"maxAttempts": RETRY_ATTEMPTS, "initialBackoff": "0.05s",
                                          "maxBackoff": "0.5s", "backoffMultiplier": 2,
                                          "retryableStatusCodes": ["UNAVAILABLE"]}}],
    })


class ScoringClient:
    """A channel to one or several scoring servers and the model (and version) to ask.

    `version` 0 asks for the newest loaded version on every call; `pin()` fixes the one
    the server has now (as the Moses feature does at load), so a run gets identical scores.
    `timeout` is each call's deadline in seconds.
    """

    def __init__(self, addresses: str | Sequence[str], *, model: str | None = None, version: int = 0,
                 timeout: float = DEFAULT_TIMEOUT_SECONDS, max_message_mb: int = DEFAULT_MAX_MESSAGE_MB,
                 credentials: grpc.ChannelCredentials | None = None):
        if version < 0:
            raise ValueError(f"version must be 0 (newest) or a positive version, got {version}")
        if timeout <= 0:
            raise ValueError(f"timeout must be positive seconds, got {timeout}")
        self.target = resolve_target(addresses)
        self.model, self.version, self.timeout = model, version, timeout
        limit = max_message_mb << 20
        options = [("grpc.lb_policy_name", "round_robin"), ("grpc.service_config", _service_config()),
                   ("grpc.enable_retries", 1), ("grpc.max_receive_message_length", limit),
                   ("grpc.max_send_message_length", limit)]
        self.channel = (grpc.secure_channel(self.target, credentials, options=options) if credentials is not None
                        else grpc.insecure_channel(self.target, options=options))
        self.stub = pb_grpc.ReorderingScorerStub(self.channel)

    # -- calls ---------------------------------------------------------------------------
    def score(self, source: Sequence[str], pairs: Sequence[Pair], *, model: str | None = None,
              version: int | None = None, timeout: float | None = None) -> Scores:
        """Probabilities of every phrase pair of one source sentence (one Score RPC)."""
        request = pb.ScoreRequest(model=self._model(model), version=self.version if version is None else version,
                                  **arrays_from_strings(source, pairs))
        return self.score_request(request, timeout=timeout)

    def score_request(self, request: pb.ScoreRequest, *, timeout: float | None = None) -> Scores:
        """A ScoreRequest built elsewhere (e.g. replayed), answered as `score` answers."""
        response = self._call("Score", self.stub.Score, request, timeout)
        probabilities = np.asarray(response.probabilities, dtype=np.float32)
        outputs = tuple(response.outputs)
        return Scores(response.model, int(response.version), outputs,
                      probabilities.reshape(-1, len(outputs)) if outputs else probabilities.reshape(0, 0))

    def get_model(self, model: str | None = None, version: int = 0, *, timeout: float | None = None
                  ) -> pb.ModelInfo:
        """Schema (type string, classes, outputs) and loaded versions of a model."""
        return self._call("GetModel", self.stub.GetModel,
                          pb.GetModelRequest(model=self._model(model), version=version), timeout)

    def list_models(self, *, timeout: float | None = None) -> list[pb.ModelInfo]:
        return list(self._call("ListModels", self.stub.ListModels, pb.ListModelsRequest(), timeout).models)

    def pin(self, version: int = 0, *, timeout: float | None = None) -> int:
        """Fix the version every later call asks for: `version`, or the newest loaded one now.
        VersionNotLoaded if the server does not hold that version."""
        info = self.get_model(version=version, timeout=timeout)
        self.version = int(info.version)
        return self.version

    # -- plumbing --------------------------------------------------------------------------
    def _model(self, model: str | None) -> str:
        name = model or self.model
        if not name:
            raise ValueError("no model name: pass model= to ScoringClient or to the call")
        return name

    def _call(self, method: str, stub_method, request, timeout: float | None):
        try:
            return stub_method(request, timeout=self.timeout if timeout is None else timeout)
        except grpc.RpcError as exc:
            code = exc.code() if callable(getattr(exc, "code", None)) else grpc.StatusCode.UNKNOWN
            details = exc.details() if callable(getattr(exc, "details", None)) else str(exc)
            raise ERRORS.get(code, ScoringError)(code, details or "", self.target, method) from None

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> "ScoringClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
