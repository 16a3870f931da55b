"""The reordering.v1.ReorderingScorer RPCs: Score, GetModel, ListModels, Reload.

Score is the hot path and works on raw bytes both ways: the request's digest keys the
result cache before anything else is done with it, packed repeated fields become numpy
arrays without a per-element Python loop, and the probabilities are appended to the
response as one packed-float field built from the array's bytes (protobuf allows a
message's fields to be concatenated). Feature extraction and scoring are
`training.modelfile.request.batch_from_request_arrays` and `LoadedModel.predict_proba_sliced`; this
module adds status codes, limits (`ScoreLimits`: pairs, alignment points per pair, feature keys,
all checked before the work they bound), the cache and metrics, and must not compute features
itself. A request is scored in slices of about SLICE_KEYS keys, and between slices the
handler stops when its client is gone or the server's shutdown grace period is over.

Every handler runs inside `_guarded`, and every RPC takes raw bytes (no gRPC deserializer,
whose failure would be an uncounted, unlogged INTERNAL "Exception deserializing
request!": issue 31). The guard refuses an admin RPC while admin is off before reading
anything, refuses a call whose deadline passed while it waited for a thread, then parses
(`parse_request`: INVALID_ARGUMENT naming the message, field and byte); Score parses
itself, after its cache lookup, with the same function, and does not start scoring a
request that cannot finish before its deadline (`_check_time_left`). Whatever goes wrong in one call
becomes a status code for that call (INTERNAL naming only the exception type for the
unexpected; the details and any server path go to the log, never to a client), counted
under its method and code, never a dead server. Refusals are logged at a bounded rate.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import grpc
import numpy as np
from google.protobuf.message import DecodeError, Message

from training.errors import InputError
from training.modelfile.request import ARRAY_FIELDS, batch_from_request_arrays

from server.api import SERVICE_NAME, pb
from server.cache import ResultCache
from server.logs import RefusalLog, log_event
from server.metrics import ServerMetrics
from server.repository import ModelRepository, ModelSnapshot, ServedModel, UnknownModel, VersionNotLoaded
from server.wire import locate_decode_error

_PROBABILITIES_TAG = bytes([(4 << 3) | 2])  # ScoreResponse.probabilities, length-delimited
_CONTEXT_TAGS = tuple(bytes([(f << 3) | 2]) for f in (5, 6, 7))  # scores, neighbour, boundary
# Score works through a request in slices of consecutive pairs of about this many feature
# keys (0.05-0.15 s each at the 1.6-4M keys/s measured here; a real sentence is one slice)
# and checks between slices that the client still waits and the server is not past its
# shutdown grace period. A slice is at least one pair: --max-align-points keeps a pair small.
SLICE_KEYS = 1 << 18


class RpcFailure(Exception):
    """Ends one call with a status code and a message naming what was wrong."""

    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


def parse_request(raw: bytes, message_type: type[Message]) -> Message:
    """Request bytes -> message; bytes that are not one are INVALID_ARGUMENT naming the
    message and, where the wire format allows, the field and byte that are wrong."""
    try:
        return message_type.FromString(raw)
    except DecodeError as exc:
        name = message_type.DESCRIPTOR.name
        why = locate_decode_error(raw, message_type.DESCRIPTOR) or str(exc).rpartition(": ")[2]
        raise RpcFailure(grpc.StatusCode.INVALID_ARGUMENT, f"request: not a valid {name}: {why}") from None


def arrays_from_message(request: pb.ScoreRequest) -> dict:
    """Proto message -> the request's fields for batch_from_request_arrays: the token table
    as bytes, the packed fields (ARRAY_FIELDS) as uint32 numpy arrays (upb repeated fields
    convert without a Python loop)."""
    arrays: dict = {"token_bytes": request.token_bytes}
    for name in ARRAY_FIELDS:
        arrays[name] = np.array(getattr(request, name), dtype=np.uint32)
    return arrays


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def score_response_bytes(served: ServedModel, probabilities: np.ndarray | tuple[np.ndarray, ...]) -> bytes:
    """Serialized ScoreResponse: the small fields via protobuf, the floats as raw bytes
    (probabilities, or a context model's scores, neighbour and boundary blocks)."""
    head = pb.ScoreResponse(model=served.name, version=served.version,
                            outputs=served.schema.outputs).SerializeToString()
    parts = [head]
    blocks = zip(_CONTEXT_TAGS, probabilities) if isinstance(probabilities, tuple) else \
        [(_PROBABILITIES_TAG, probabilities)]
    for tag, array in blocks:
        data = np.ascontiguousarray(array, dtype="<f4").tobytes()
        if data:
            parts += [tag, _varint(len(data)), data]
    return b"".join(parts)


def model_info(snapshot: ModelSnapshot, served: ServedModel | None) -> pb.ModelInfo:
    info = pb.ModelInfo(
        name=snapshot.name,
        loaded_versions=snapshot.loaded_versions,
        status=[pb.VersionStatus(version=r.version, state=r.state, message=r.message)
                for r in sorted(snapshot.records.values(), key=lambda r: r.version)],
    )
    schema = served.schema if served is not None else snapshot.schema
    if schema is not None:
        info.moses_type = schema.moses_type
        info.classes.extend(schema.classes)
        info.directions.extend(schema.directions)
        info.outputs.extend(schema.outputs)
    if served is not None:
        info.version = served.version
        info.family = served.family
        info.metadata_json = served.metadata_json
    if schema is not None:
        info.context = schema.context
    return info


class _CountingHandler(grpc.GenericRpcHandler):
    """The service's methods, counting every call that arrives (`received`). gRPC asks
    this before it applies --max-concurrent-rpcs, and a call it refuses there never reaches
    a handler: received minus answered (`requests`) is what was refused at the door or is
    still in flight."""

    def __init__(self, handlers: dict[str, grpc.RpcMethodHandler], metrics: ServerMetrics):
        self._handlers = {f"/{SERVICE_NAME}/{name}": (name, h) for name, h in handlers.items()}
        self._metrics = metrics

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        found = self._handlers.get(handler_call_details.method)
        if found is None:
            return None
        self._metrics.received.labels(found[0]).inc()
        return found[1]


@dataclass(frozen=True)
class ScoreLimits:
    """What one Score request may cost (defaults: server.options.ServeOptions). Checked in
    this order, each before the work it bounds; RESOURCE_EXHAUSTED names the field."""

    max_pairs: int
    max_align_points: int  # per pair; duplicates count
    max_keys: int          # upper bound of feature keys of the whole request (key_bounds)
    max_source_tokens: int  # the sentence; checked with the pairs, before any per-token work
    slice_keys: int = SLICE_KEYS


class ReorderingService:
    """Handlers of one server process; thread-safe (shared by the gRPC thread pool)."""

    def __init__(self, repository: ModelRepository, *, metrics: ServerMetrics, cache: ResultCache,
                 limits: ScoreLimits, enable_admin: bool = False, on_reload: Callable[[], None] | None = None):
        self.repository = repository
        self.metrics = metrics
        self.cache = cache
        self.limits = limits
        self.enable_admin = enable_admin
        self.on_reload = on_reload  # e.g. tell sibling worker processes to rescan too
        self._cancel_all = threading.Event()
        self.refusals = RefusalLog()
        # keys/s of the fastest Score of at least one slice so far (0 = none yet): Score's
        # estimate of whether a deadline can be met errs towards starting the work
        self.fastest_keys_per_second = 0.0

    def cancel_in_flight(self) -> None:
        """Every running Score stops at its next slice (the server's grace period is over)."""
        self._cancel_all.set()

    # -- wiring --------------------------------------------------------------------------
    def generic_handler(self) -> grpc.GenericRpcHandler:
        """Every method takes raw bytes and parses inside its guard (module docstring)."""
        def method(name: str, handler: Callable, request_type: type[Message] | None, admin: bool = False):
            # Score (request_type None) parses itself and returns serialized bytes.
            serializer = None if request_type is None else (lambda message: message.SerializeToString())
            return grpc.unary_unary_rpc_method_handler(self._guarded(name, handler, request_type, admin),
                                                       response_serializer=serializer)

        handlers = {
            "Score": method("Score", self.score, None),
            "GetModel": method("GetModel", self.get_model, pb.GetModelRequest),
            "ListModels": method("ListModels", self.list_models, pb.ListModelsRequest),
            "Reload": method("Reload", self.reload, pb.ReloadRequest, admin=True),
        }
        return _CountingHandler(handlers, self.metrics)

    def _guarded(self, method: str, handler: Callable, request_type: type[Message] | None,
                 admin: bool) -> Callable:
        metrics = self.metrics
        refusals = self.refusals

        def call(raw: bytes, context: grpc.ServicerContext):
            started = time.perf_counter()
            code = grpc.StatusCode.OK
            try:
                if admin and not self.enable_admin:
                    raise RpcFailure(grpc.StatusCode.PERMISSION_DENIED,
                                     f"{method} is an admin RPC; start the server with --enable-admin to allow it")
                if context.time_remaining() <= 0 or not context.is_active():  # it waited past its deadline
                    expired = context.time_remaining() <= 0
                    raise RpcFailure(grpc.StatusCode.DEADLINE_EXCEEDED if expired else grpc.StatusCode.CANCELLED,
                                     f"{'deadline passed' if expired else 'client cancelled'} before the server "
                                     f"could start this {method} call")
                request = raw if request_type is None else parse_request(raw, request_type)
                return handler(request, context)
            except RpcFailure as failure:
                code = failure.code
                refusals.refused(method, code.name, failure.message)
                context.abort(failure.code, failure.message)
            except Exception as exc:  # never let one request take the server down
                code = grpc.StatusCode.INTERNAL
                log_event(logging.ERROR, "request_failed", exc_info=True, method=method,
                          error=str(exc), error_type=type(exc).__name__)
                # the details (paths, internals) stay in the server's log
                context.abort(code, f"internal error in {method} ({type(exc).__name__}); the server "
                                    "logged the details")
            finally:
                metrics.requests.labels(method, code.name).inc()
                metrics.latency.labels(method).observe(time.perf_counter() - started)

        return call

    def _snapshot(self, name: str) -> ModelSnapshot:
        if not name:
            raise RpcFailure(grpc.StatusCode.INVALID_ARGUMENT, "model: empty model name")
        try:
            return self.repository.get(name)
        except UnknownModel as exc:
            raise RpcFailure(grpc.StatusCode.NOT_FOUND, str(exc)) from None

    def _resolve(self, snapshot: ModelSnapshot, version: int) -> ServedModel:
        try:
            return snapshot.resolve(version)
        except VersionNotLoaded as exc:
            raise RpcFailure(grpc.StatusCode.FAILED_PRECONDITION, str(exc)) from None

    # -- RPCs ----------------------------------------------------------------------------
    def score(self, raw: bytes, context: grpc.ServicerContext) -> bytes:
        digest = None
        if self.cache.enabled:
            digest = hashlib.blake2b(raw, digest_size=16).digest()
            hit = self._cached(digest)
            if hit is not None:
                return hit
        request = parse_request(raw, pb.ScoreRequest)
        served = self._resolve(self._snapshot(request.model), request.version)  # held to the end
        limits = self.limits
        n_pairs = len(request.span_start)
        if n_pairs > limits.max_pairs:
            raise RpcFailure(grpc.StatusCode.RESOURCE_EXHAUSTED,
                             f"span_start: {n_pairs} phrase pairs exceed the server's limit of "
                             f"{limits.max_pairs} per request (--max-pairs)")
        n_source = len(request.source)
        if n_source > limits.max_source_tokens:
            raise RpcFailure(grpc.StatusCode.RESOURCE_EXHAUSTED,
                             f"source: {n_source} tokens exceed the server's limit of {limits.max_source_tokens} "
                             "per sentence (--max-source-tokens)")
        try:
            batch = batch_from_request_arrays(**arrays_from_message(request))
        except InputError as exc:
            raise RpcFailure(grpc.StatusCode.INVALID_ARGUMENT, str(exc)) from None
        if n_pairs:
            points = np.diff(batch.align_offsets)
            worst = int(np.argmax(points))
            if points[worst] > limits.max_align_points:
                raise RpcFailure(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                 f"align_offsets: pair {worst} has {int(points[worst])} alignment points; the "
                                 f"server's limit is {limits.max_align_points} per pair (--max-align-points; "
                                 "a pair of 7-word phrases has at most 49)")
        bounds = served.model.key_bounds(batch)
        if bounds[-1] > limits.max_keys:
            raise RpcFailure(grpc.StatusCode.RESOURCE_EXHAUSTED,
                             f"span_start: these {n_pairs} phrase pairs expand to up to {int(bounds[-1])} feature "
                             f"keys under the model's features ({served.model.spec}); the server's limit is "
                             f"{limits.max_keys} per request (--max-keys): send fewer pairs per request")

        self._check_time_left(context, n_pairs, int(bounds[-1]))

        def keep_going() -> bool:  # asked between slices of pairs
            remaining = context.time_remaining()
            return not self._cancel_all.is_set() and context.is_active() and (remaining is None or remaining > 0)

        if served.schema.context and not request.context_blocks:
            raise RpcFailure(grpc.StatusCode.FAILED_PRECONDITION,
                             f"model {served.name!r} conditions on the phrase the decoder places next to each pair: "
                             "its answer is context blocks, which a client asks for with context_blocks "
                             "(ExternalReordering built from moses_ff/ since issue 48 does)")
        started = time.perf_counter()
        if served.schema.context:
            probabilities = served.model.context_blocks_sliced(batch, bounds, limits.slice_keys, keep_going)
        else:
            probabilities = served.model.predict_proba_sliced(batch, bounds, limits.slice_keys, keep_going)
        if probabilities is not None and bounds[-1] >= limits.slice_keys:  # long enough to time
            self.fastest_keys_per_second = max(self.fastest_keys_per_second,
                                               float(bounds[-1]) / max(time.perf_counter() - started, 1e-9))
        if probabilities is None:  # nobody is waiting for the answer any more
            reason = "the server is shutting down" if self._cancel_all.is_set() else \
                "deadline passed or call cancelled"
            log_event(logging.INFO, "score_abandoned", model=served.name, pairs=n_pairs, why=reason)
            code = grpc.StatusCode.UNAVAILABLE if self._cancel_all.is_set() else grpc.StatusCode.DEADLINE_EXCEEDED
            raise RpcFailure(code, f"{reason} before scoring finished")
        body = score_response_bytes(served, probabilities)
        if digest is not None:
            self.metrics.cache_misses.inc()
            self.cache.put(digest, (served.name, request.version, served.version, n_pairs, body))
            self.metrics.cache_bytes.set(self.cache.nbytes)
        self.metrics.pairs.labels(served.name).inc(n_pairs)
        return body

    def _check_time_left(self, context: grpc.ServicerContext, n_pairs: int, keys: int) -> None:
        """A Score that cannot finish before its deadline even at the fastest speed this
        server has scored at (keys counted before extraction, an upper bound) is not
        started: DEADLINE_EXCEEDED now, rather than work cut off at the deadline."""
        rate = self.fastest_keys_per_second
        if not rate:
            return  # nothing timed yet: no estimate
        needs, left = keys / rate, context.time_remaining()
        if needs > left:
            raise RpcFailure(grpc.StatusCode.DEADLINE_EXCEEDED,
                             f"not started: these {n_pairs} phrase pairs expand to up to {keys} feature keys, "
                             f"{needs:.2f} s of work at the fastest this server has scored ({rate / 1e6:.1f}M keys/s), "
                             f"and the deadline leaves {left:.2f} s")

    def _cached(self, digest: bytes) -> bytes | None:
        """The stored answer to these exact request bytes, if the version that made it is
        still the one the request resolves to (so a hit needs no parsing at all)."""
        entry = self.cache.get(digest)
        if entry is None:
            return None
        name, requested, version, n_pairs, body = entry
        try:
            if self.repository.get(name).resolve(requested).version != version:
                return None  # a newer version serves this request now
        except LookupError:
            return None  # the normal path reports why
        self.metrics.cache_hits.inc()
        self.metrics.pairs.labels(name).inc(n_pairs)
        return body

    def get_model(self, request: pb.GetModelRequest, context: grpc.ServicerContext) -> pb.ModelInfo:
        snapshot = self._snapshot(request.model)
        if request.version == 0:
            return model_info(snapshot, snapshot.newest)
        return model_info(snapshot, self._resolve(snapshot, request.version))

    def list_models(self, request: pb.ListModelsRequest, context: grpc.ServicerContext) -> pb.ListModelsResponse:
        return pb.ListModelsResponse(models=[model_info(s, s.newest) for s in self.repository.snapshots()])

    def reload(self, request: pb.ReloadRequest, context: grpc.ServicerContext) -> pb.ReloadResponse:
        """Admin only: the guard refuses it, before parsing, unless --enable-admin."""
        try:
            snapshots = self.repository.scan(request.model or None)
        except UnknownModel as exc:
            raise RpcFailure(grpc.StatusCode.NOT_FOUND, str(exc)) from None
        if self.on_reload is not None:
            self.on_reload()
        return pb.ReloadResponse(models=[model_info(s, s.newest) for s in snapshots])
