"""The reordering.v1.ReorderingScorer RPCs: Score, GetModel, ListModels, Reload.

Score is the hot path and works on raw bytes both ways: the request's digest keys the
result cache before anything else is done with it, the request's fields are read off the
wire in one numba pass into one int64 array (server/score_wire.py; upb parses only what
that pass does not accept), and the probabilities are appended to the
response as one packed-float field built from the array's bytes (protobuf allows a
message's fields to be concatenated). Feature extraction and scoring are
`training.modelfile.request.batch_from_flat` and `LoadedModel.predict_proba_sliced`; this
module adds status codes, limits (`ScoreLimits`: pairs, alignment points per pair, feature keys,
all checked before the work they bound), the cache and metrics, and must not compute features
itself. A request is scored in slices of about SLICE_KEYS keys, and between slices the
handler stops when its client is gone or the server's shutdown grace period is over.

Every handler runs behind server.guard (receive timeout, admission, parsing, status codes,
counting, logging); Score reads its own bytes, after its cache lookup (`score_fields`,
falling back to the same `parse_request`), and does not start scoring a request that cannot finish before its
deadline (`_check_time_left`). Score runs on the event loop when its feature keys fit in
INLINE_KEYS and its message in INLINE_BYTES (every realistic sentence: handing it to a
thread costs more than scoring it), and in the `--threads` pool otherwise, where the numba
kernels release the GIL and the loop goes on answering other calls.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from dataclasses import dataclass

import grpc
import numpy as np

from training.errors import InputError
from training.features.batch import PairBatch
from training.modelfile.request import ARRAY_FIELDS, batch_from_flat, flatten_fields

from server.api import SERVICE_NAME, pb
from server.cache import ResultCache
from server.guard import Guard, RpcFailure, parse_request
from server.logs import log_event
from server.metrics import ServerMetrics
from server.repository import ModelRepository, ModelSnapshot, ServedModel, UnknownModel, VersionNotLoaded
from server.score_wire import ScoreFields, scan_score_request

_PROBABILITIES_TAG = bytes([(4 << 3) | 2])  # ScoreResponse.probabilities, length-delimited
_CONTEXT_TAGS = tuple(bytes([(f << 3) | 2]) for f in (5, 6, 7))  # scores, neighbour, boundary
# Score works through a request in slices of consecutive pairs of about this many feature
# keys (0.05-0.15 s each at the 1.6-4M keys/s measured here; a real sentence is one slice)
# and checks between slices that the client still waits and the server is not past its
# shutdown grace period. A slice is at least one pair: --max-align-points keeps a pair small.
SLICE_KEYS = 1 << 18
# A request of at most this many feature keys (upper bound) is scored on the event loop:
# 2-20 ms of work at most at the speeds above, while a realistic ja-en sentence needs 4k
# keys under S7 and 40k under S15 (benchmarks/request_limits.py). Larger ones go to the pool.
INLINE_KEYS = 1 << 16
# A request message larger than this is parsed in the pool too: a realistic sentence's is
# at most 14 KB (benchmarks/request_limits.py), and parsing a 4 MiB one would hold the loop.
INLINE_BYTES = 1 << 16


def score_fields(raw: bytes) -> ScoreFields:
    """A Score request's fields: read off the wire in one pass (server/score_wire.py), or,
    for bytes that pass does not accept, parsed by upb, which refuses what is not a
    ScoreRequest (INVALID_ARGUMENT naming the field and byte)."""
    fields = scan_score_request(raw)
    if fields is not None:
        return fields
    request = parse_request(raw, pb.ScoreRequest)
    flat, bounds = flatten_fields(tuple(getattr(request, name) for name in ARRAY_FIELDS))
    return ScoreFields(request.model, request.version, request.context_blocks,
                       np.frombuffer(request.token_bytes, dtype=np.uint8), flat, bounds)


def arrays_from_message(request: pb.ScoreRequest) -> dict:
    """Proto message -> the request's fields for batch_from_request_arrays: the token table
    as bytes, the packed fields (ARRAY_FIELDS) as uint32 numpy arrays (upb repeated fields
    convert without a Python loop)."""
    arrays: dict = {"token_bytes": request.token_bytes}
    for name in ARRAY_FIELDS:
        arrays[name] = np.array(getattr(request, name), dtype=np.uint32)
    return arrays


def varint_bytes(value: int) -> bytes:
    """An unsigned integer in protobuf's varint encoding."""
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
            parts += [tag, varint_bytes(len(data)), data]
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


@dataclass(frozen=True)
class ScoreLimits:
    """What one Score request may cost (defaults: server.options.ServeOptions). Checked in
    this order, each before the work it bounds; RESOURCE_EXHAUSTED names the field."""

    max_pairs: int
    max_align_points: int  # per pair; duplicates count
    max_keys: int          # upper bound of feature keys of the whole request (key_bounds)
    max_source_tokens: int  # the sentence; checked with the pairs, before any per-token work
    slice_keys: int = SLICE_KEYS
    inline_keys: int = INLINE_KEYS
    inline_bytes: int = INLINE_BYTES


@dataclass
class _ScoreJob:
    """A parsed, admitted Score request, ready to be scored on the loop or in the pool."""

    request: ScoreFields
    served: ServedModel
    batch: PairBatch
    bounds: np.ndarray
    digest: bytes | None


class ReorderingService:
    """Handlers of one server process. Called on its event loop, except `_finish` of large
    requests, which runs in the pool; the state they share is thread-safe."""

    def __init__(self, repository: ModelRepository, *, metrics: ServerMetrics, cache: ResultCache,
                 limits: ScoreLimits, pool: Executor | None = None, on_reload: Callable[[], None] | None = None):
        self.repository = repository
        self.metrics = metrics
        self.cache = cache
        self.limits = limits
        self.pool = pool  # None: every request is scored on the loop
        self.on_reload = on_reload  # e.g. tell sibling worker processes to rescan too
        self._cancel_all = threading.Event()
        # keys/s of the fastest Score of at least one slice so far (0 = none yet): Score's
        # estimate of whether a deadline can be met errs towards starting the work
        self.fastest_keys_per_second = 0.0

    def cancel_in_flight(self) -> None:
        """Every running Score stops at its next slice (the server's grace period is over)."""
        self._cancel_all.set()

    def handlers(self, guard: Guard) -> dict[str, grpc.RpcMethodHandler]:
        """The four RPCs by full method path, each behind `guard` (server.guard)."""
        prefix = f"/{SERVICE_NAME}/"
        return {
            prefix + "Score": guard.unary("Score", self.score, None, serialize=False),  # bytes both ways
            prefix + "GetModel": guard.unary("GetModel", self.get_model, pb.GetModelRequest),
            prefix + "ListModels": guard.unary("ListModels", self.list_models, pb.ListModelsRequest),
            prefix + "Reload": guard.unary("Reload", self.reload, pb.ReloadRequest, admin=True),
        }

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
    def score(self, raw: bytes, context: grpc.aio.ServicerContext) -> bytes | Awaitable[bytes]:
        """The answer's bytes, or (a request too large to handle on the loop) an awaitable of them."""
        if self.pool is not None and len(raw) > self.limits.inline_bytes:
            return self._in_pool(self._score, raw, context)
        job = self._begin(raw, context)
        if isinstance(job, bytes):
            return job
        if self.pool is None or int(job.bounds[-1]) <= self.limits.inline_keys:
            return self._finish(job, context)
        return self._in_pool(self._finish, job, context)

    def _score(self, raw: bytes, context: grpc.aio.ServicerContext, gone: threading.Event | None = None) -> bytes:
        job = self._begin(raw, context)
        return job if isinstance(job, bytes) else self._finish(job, context, gone)

    def _begin(self, raw: bytes, context: grpc.aio.ServicerContext) -> bytes | _ScoreJob:
        """The cached answer to these bytes, or the request parsed and checked."""
        digest = None
        if self.cache.enabled:
            digest = hashlib.blake2b(raw, digest_size=16).digest()
            hit = self._cached(digest)
            if hit is not None:
                return hit
        return self._prepare(raw, digest, context)

    def _prepare(self, raw: bytes, digest: bytes | None, context: grpc.aio.ServicerContext) -> _ScoreJob:
        """Parse and check a request against every limit, each before the work it bounds."""
        request = score_fields(raw)
        served = self._resolve(self._snapshot(request.model), request.version)  # held to the end
        limits = self.limits
        n_pairs = request.n_pairs
        if n_pairs > limits.max_pairs:
            raise RpcFailure(grpc.StatusCode.RESOURCE_EXHAUSTED,
                             f"span_start: {n_pairs} phrase pairs exceed the server's limit of "
                             f"{limits.max_pairs} per request (--max-pairs)")
        n_source = request.n_source
        if n_source > limits.max_source_tokens:
            raise RpcFailure(grpc.StatusCode.RESOURCE_EXHAUSTED,
                             f"source: {n_source} tokens exceed the server's limit of {limits.max_source_tokens} "
                             "per sentence (--max-source-tokens)")
        try:
            batch = batch_from_flat(request.token_bytes, request.flat, request.bounds)
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
        if served.schema.context and not request.context_blocks:
            raise RpcFailure(grpc.StatusCode.FAILED_PRECONDITION,
                             f"model {served.name!r} conditions on the phrase the decoder places next to each pair: "
                             "its answer is context blocks, which a client asks for with context_blocks "
                             "(ExternalReordering built from moses_ff/ since issue 48 does)")
        self._check_time_left(context, n_pairs, int(bounds[-1]))
        return _ScoreJob(request, served, batch, bounds, digest)

    async def _in_pool(self, work: Callable, *args) -> bytes:
        """work(*args, gone) in the pool; `gone` is set when this call's handler is cancelled
        (its client went away), and the work stops at its next slice."""
        gone = threading.Event()
        try:
            return await asyncio.get_running_loop().run_in_executor(self.pool, work, *args, gone)
        except asyncio.CancelledError:
            gone.set()
            raise

    def _finish(self, job: _ScoreJob, context: grpc.aio.ServicerContext, gone: threading.Event | None = None) -> bytes:
        """Score the job's pairs slice by slice; between slices, stop if nobody waits any more."""
        served, bounds, n_pairs = job.served, job.bounds, job.request.n_pairs

        def keep_going() -> bool:
            remaining = context.time_remaining()
            return not (self._cancel_all.is_set() or (gone is not None and gone.is_set())
                        or (remaining is not None and remaining <= 0))

        started = time.perf_counter()
        if not keep_going():
            probabilities = None
        elif served.schema.context:
            probabilities = served.model.context_blocks_sliced(job.batch, bounds, self.limits.slice_keys, keep_going)
        else:
            probabilities = served.model.predict_proba_sliced(job.batch, bounds, self.limits.slice_keys, keep_going)
        if probabilities is not None and bounds[-1] >= self.limits.slice_keys:  # long enough to time
            self.fastest_keys_per_second = max(self.fastest_keys_per_second,
                                               float(bounds[-1]) / max(time.perf_counter() - started, 1e-9))
        if probabilities is None:  # nobody is waiting for the answer any more
            reason = "the server is shutting down" if self._cancel_all.is_set() else \
                "deadline passed or call cancelled"
            log_event(logging.INFO, "score_abandoned", model=served.name, pairs=n_pairs, why=reason)
            code = grpc.StatusCode.UNAVAILABLE if self._cancel_all.is_set() else grpc.StatusCode.DEADLINE_EXCEEDED
            raise RpcFailure(code, f"{reason} before scoring finished")
        body = score_response_bytes(served, probabilities)
        if job.digest is not None:
            self.metrics.cache_misses.inc()
            self.cache.put(job.digest, (served.name, job.request.version, served.version, n_pairs, body))
            self.metrics.cache_bytes.set(self.cache.nbytes)
        self.metrics.pairs.labels(served.name).inc(n_pairs)
        return body

    def _check_time_left(self, context: grpc.aio.ServicerContext, n_pairs: int, keys: int) -> None:
        """A Score that cannot finish before its deadline even at the fastest speed this
        server has scored at (keys counted before extraction, an upper bound) is not
        started: DEADLINE_EXCEEDED now, rather than work cut off at the deadline."""
        rate, left = self.fastest_keys_per_second, context.time_remaining()
        if not rate or left is None:
            return  # nothing timed yet, or no deadline: no estimate needed
        needs = keys / rate
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

    def get_model(self, request: pb.GetModelRequest, context: grpc.aio.ServicerContext) -> pb.ModelInfo:
        snapshot = self._snapshot(request.model)
        if request.version == 0:
            return model_info(snapshot, snapshot.newest)
        return model_info(snapshot, self._resolve(snapshot, request.version))

    def list_models(self, request: pb.ListModelsRequest, context: grpc.aio.ServicerContext) -> pb.ListModelsResponse:
        return pb.ListModelsResponse(models=[model_info(s, s.newest) for s in self.repository.snapshots()])

    async def reload(self, request: pb.ReloadRequest, context: grpc.aio.ServicerContext) -> pb.ReloadResponse:
        """Admin only: the guard refuses it, before reading it, unless --enable-admin. The scan
        (loading new versions: reading, checksums, warm-up) runs on a thread of the loop's
        own executor, so the loop goes on answering meanwhile."""
        try:
            snapshots = await asyncio.get_running_loop().run_in_executor(
                None, self.repository.scan, request.model or None)
        except UnknownModel as exc:
            raise RpcFailure(grpc.StatusCode.NOT_FOUND, str(exc)) from None
        if self.on_reload is not None:
            self.on_reload()
        return pb.ReloadResponse(models=[model_info(s, s.newest) for s in snapshots])
