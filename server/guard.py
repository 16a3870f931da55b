"""Every RPC the server answers, its own and the stock ones, behind one guard.

The server is a grpc.aio server: a call that has sent its headers and not yet its message
waits as a coroutine on the event loop and holds no thread (issue 46: on the thread-pool
server four such calls took every thread and stopped all scoring). Every method, ours and
grpc.health.v1's and reflection's, is registered here with a raw-bytes, stream-request
handler, so that the guard and not gRPC reads each message:

1. receive: a message must arrive within `receive_timeout` seconds of the call's start
   (for a reflection stream: of the previous message), else DEADLINE_EXCEEDED; a call
   that waits on its client costs a coroutine, for at most that long (one timer watches
   every waiting call: `ReceiveClock`);
2. admit: at most `Admission.limit` calls are worked on at once (--max-concurrent-rpcs);
   one more is refused at once with RESOURCE_EXHAUSTED naming the flag. A call counts from
   its message to its answer, so idle calls never fill the limit, and health checks share
   it with Score: when Score would be refused, so is Check (health does not say SERVING
   when the server would refuse to score);
3. parse: bytes that are not the method's request message are INVALID_ARGUMENT naming the
   message, field and byte (`parse_request`; no gRPC deserializer, whose failure would be an
   uncounted, unlogged INTERNAL);
4. answer: whatever goes wrong becomes that call's status (INTERNAL naming only the
   exception type for the unexpected; the details go to the log, never to a client).

Every call is counted under its method and code, and every refusal is logged at a bounded
rate (server.logs.RefusalLog). The guard knows no method's meaning: server.service and
server.stock supply the handlers.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
from google.protobuf.message import DecodeError, Message

from server.echo import clip_message
from server.logs import RefusalLog, log_event
from server.metrics import ServerMetrics
from server.wire import locate_decode_error


class RpcFailure(Exception):
    """Ends one call with a status code and a message naming what was wrong."""

    def __init__(self, code: grpc.StatusCode, message: str):
        message = clip_message(message)
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


class Admission:
    """The calls being worked on (message received, answer not yet sent), at most `limit`.
    Used from the event loop only, so a plain counter."""

    def __init__(self, limit: int):
        self.limit = limit
        self.active = 0

    def enter(self, method: str) -> None:
        if self.active >= self.limit:
            raise RpcFailure(grpc.StatusCode.RESOURCE_EXHAUSTED,
                             f"server busy: {self.active} calls in progress, the limit of this server process "
                             f"(--max-concurrent-rpcs {self.limit}); {method} not started: retry later or use "
                             "another replica")
        self.active += 1

    def leave(self) -> None:
        self.active -= 1


def _gone(context: grpc.aio.ServicerContext) -> grpc.StatusCode | None:
    """Why nobody waits for this call's answer any more, if nobody does."""
    remaining = context.time_remaining()
    if remaining is not None and remaining <= 0:
        return grpc.StatusCode.DEADLINE_EXCEEDED
    return grpc.StatusCode.CANCELLED if context.cancelled() else None


def _serialize(message: Message) -> bytes:
    return message.SerializeToString()


class _Counts:
    """One method's metrics, its label lookups done once (prometheus-client's `labels()`
    takes a lock and builds a key on every call). `timed`: a unary method, whose handling
    time goes to the latency histogram (a stream's lifetime would not be a latency)."""

    def __init__(self, metrics: ServerMetrics, method: str, timed: bool = False):
        self.received = metrics.received.labels(method)
        self._latency = metrics.latency.labels(method) if timed else None
        self._requests = metrics.requests
        self._method = method
        self._answered: dict[grpc.StatusCode, Any] = {}

    def answered(self, code: grpc.StatusCode, started: float | None = None) -> None:
        child = self._answered.get(code)
        if child is None:
            child = self._answered[code] = self._requests.labels(self._method, code.name)
        child.inc()
        if self._latency is not None and started is not None:
            self._latency.observe(time.perf_counter() - started)


class ReceiveClock:
    """The calls waiting for a request message, each cancelled `timeout` seconds after it
    started waiting, by one timer for all of them: a call costs two dict operations, not a
    timer of its own (asyncio.timeout's handle, pushed and cancelled per call, was a
    measurable part of a Score's cost on the loop, RESULTS issue 46). Every wait lasts the
    same `timeout`, so the waits are in deadline order in the dict (insertion order) and the
    timer only ever looks at the front. Used from the event loop only."""

    def __init__(self, timeout: float):
        self.timeout = timeout
        self._waiting: dict[asyncio.Task, float] = {}  # task -> when its wait ends
        self._expired: set[asyncio.Task] = set()
        self._timer: asyncio.TimerHandle | None = None

    def start(self) -> asyncio.Task:
        """The current task starts waiting (call stop() when it is done waiting)."""
        task = asyncio.current_task()
        loop = task.get_loop()
        self._waiting[task] = deadline = loop.time() + self.timeout
        if self._timer is None:
            self._timer = loop.call_at(deadline, self._expire, loop)
        return task

    def stop(self, task: asyncio.Task) -> None:
        self._waiting.pop(task, None)

    def expired(self, task: asyncio.Task) -> bool:
        """Whether the task was cancelled by this clock (then it is no longer cancelling)."""
        if task not in self._expired:
            return False
        self._expired.discard(task)
        task.uncancel()
        return True

    def _expire(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        now = loop.time()
        while self._waiting:
            task, deadline = next(iter(self._waiting.items()))
            if deadline > now:
                self._timer = loop.call_at(deadline, self._expire, loop)
                return
            del self._waiting[task]
            if not task.done():
                self._expired.add(task)
                task.cancel()


class Guard:
    """Makes the method handlers; see the module docstring for what each call goes through."""

    def __init__(self, *, metrics: ServerMetrics, refusals: RefusalLog, admission: Admission,
                 receive_timeout: float, enable_admin: bool = False):
        self.metrics = metrics
        self.refusals = refusals
        self.admission = admission
        self.receive_timeout = receive_timeout
        self.clock = ReceiveClock(receive_timeout)
        self.enable_admin = enable_admin

    # -- the steps ------------------------------------------------------------------------
    async def receive(self, context: grpc.aio.ServicerContext, *, first: bool = True) -> bytes | None:
        """The next request message; None when the client closed its side without one more."""
        task = self.clock.start()
        try:
            raw = await context.read()
        except asyncio.CancelledError:
            if not self.clock.expired(task):
                raise
            since = "the call's start" if first else "the previous message"
            raise RpcFailure(grpc.StatusCode.DEADLINE_EXCEEDED,
                             f"no request message within {self.receive_timeout:g} s of {since} "
                             "(--receive-timeout-seconds)") from None
        finally:
            self.clock.stop(task)
        return None if raw is grpc.aio.EOF else raw

    async def _first(self, context: grpc.aio.ServicerContext) -> bytes:
        raw = await self.receive(context)
        if raw is None:
            if _gone(context) is not None:  # the client gave up while it was still sending
                raise RpcFailure(_gone(context), "the call ended before its request message arrived")
            raise RpcFailure(grpc.StatusCode.INVALID_ARGUMENT, "request: the call ended without a request message")
        return raw

    @staticmethod
    def _check_waited(context: grpc.aio.ServicerContext, method: str) -> None:
        """A call whose deadline passed before it could be started is not started."""
        remaining = context.time_remaining()
        if remaining is not None and remaining <= 0:
            raise RpcFailure(grpc.StatusCode.DEADLINE_EXCEEDED,
                             f"deadline passed before the server could start this {method} call")

    async def _ended(self, context: grpc.aio.ServicerContext, method: str, counts: "_Counts",
                     exc: BaseException, started: float | None = None) -> None:
        """Count a call that did not end well, log it, and end it with its status (always
        raises). Counted before the status is sent, so a client that has its answer finds
        it counted."""
        if isinstance(exc, (asyncio.CancelledError, GeneratorExit)):  # the client went away or its deadline passed
            counts.answered(_gone(context) or grpc.StatusCode.CANCELLED, started)
            raise exc
        if isinstance(exc, RpcFailure):
            counts.answered(exc.code, started)
            self.refusals.refused(method, exc.code.name, exc.message)
            await context.abort(exc.code, exc.message)
        if not isinstance(exc, Exception):
            raise exc
        counts.answered(grpc.StatusCode.INTERNAL, started)  # never let one request take the server down
        log_event(logging.ERROR, "request_failed", exc_info=exc, method=method,
                  error=clip_message(str(exc)), error_type=type(exc).__name__)
        # the details (paths, internals) stay in the log
        await context.abort(grpc.StatusCode.INTERNAL,
                            f"internal error in {method} ({type(exc).__name__}); the server logged the details")

    # -- method handlers ------------------------------------------------------------------
    def unary(self, method: str, handler: Callable[[Any, Any], Any], request_type: type[Message] | None, *,
              admin: bool = False, serialize: bool = True) -> grpc.RpcMethodHandler:
        """A unary RPC: handler(request, context) returns the answer (or an awaitable of it).
        request_type None: the handler gets the raw bytes; serialize False: it returns bytes."""
        counts = _Counts(self.metrics, method, timed=True)

        async def call(request_iterator, context: grpc.aio.ServicerContext):
            started = time.perf_counter()
            counts.received.inc()
            try:
                if admin and not self.enable_admin:  # refused before anything is read
                    raise RpcFailure(grpc.StatusCode.PERMISSION_DENIED,
                                     f"{method} is an admin RPC; start the server with --enable-admin to allow it")
                raw = await self._first(context)
                self.admission.enter(method)
                try:
                    self._check_waited(context, method)
                    request = raw if request_type is None else parse_request(raw, request_type)
                    answer = handler(request, context)
                    if inspect.isawaitable(answer):
                        answer = await answer
                finally:
                    self.admission.leave()
            except BaseException as exc:
                await self._ended(context, method, counts, exc, started)
            counts.answered(grpc.StatusCode.OK, started)
            return answer

        return grpc.stream_unary_rpc_method_handler(call, response_serializer=_serialize if serialize else None)

    def server_stream(self, method: str, handler: Callable[[Any, Any], Any],
                      request_type: type[Message]) -> grpc.RpcMethodHandler:
        """One request, then answers for as long as the handler writes them (Health/Watch):
        handler(request, context) is a coroutine that writes with context.write. The call
        holds an admission slot only while its request is parsed."""
        counts = _Counts(self.metrics, method)

        async def call(request_iterator, context: grpc.aio.ServicerContext) -> None:
            counts.received.inc()
            try:
                raw = await self._first(context)
                self.admission.enter(method)
                try:
                    request = parse_request(raw, request_type)
                finally:
                    self.admission.leave()
                await handler(request, context)
            except BaseException as exc:
                await self._ended(context, method, counts, exc)
            counts.answered(grpc.StatusCode.OK)

        return grpc.stream_stream_rpc_method_handler(call, response_serializer=_serialize)

    def bidi(self, method: str, handler: Callable[[AsyncIterator, Any], AsyncIterator],
             request_type: type[Message]) -> grpc.RpcMethodHandler:
        """A stream of requests, each answered (ServerReflectionInfo): handler(requests,
        context) is an async generator over the parsed requests. Each message must arrive
        within the receive timeout of the one before; bad bytes end the stream with
        INVALID_ARGUMENT."""
        counts = _Counts(self.metrics, method)

        async def call(request_iterator, context: grpc.aio.ServicerContext) -> AsyncIterator:
            counts.received.inc()

            async def requests() -> AsyncIterator:
                first = True
                while (raw := await self.receive(context, first=first)) is not None:
                    first = False
                    self.admission.enter(method)
                    try:
                        request = parse_request(raw, request_type)
                    finally:
                        self.admission.leave()
                    yield request

            try:
                async for answer in handler(requests(), context):
                    yield answer
            except BaseException as exc:
                await self._ended(context, method, counts, exc)
            counts.answered(grpc.StatusCode.OK)

        return grpc.stream_stream_rpc_method_handler(call, response_serializer=_serialize)


class MethodTable(grpc.GenericRpcHandler):
    """Full method path -> handler, for every service of the server."""

    def __init__(self, handlers: dict[str, grpc.RpcMethodHandler]):
        self._handlers = dict(handlers)

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        return self._handlers.get(handler_call_details.method)
