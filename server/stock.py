"""grpc.health.v1 and server reflection, the stock services, behind the server's guard.

The servicers are grpcio-health-checking's and grpcio-reflection's asyncio ones; only
the reading of requests is the guard's (server.guard: receive timeout, admission,
INVALID_ARGUMENT for bytes that are not the request message, counted and logged like our
own RPCs), and three answers differ from the stock ones:
- Check of an unknown name is NOT_FOUND with a reason (the stock one sends empty details),
  the name cut to server.echo's bound;
- "" starts NOT_SERVING (the stock servicer starts it SERVING): server.app sets it once a
  model has a loaded version;
- List, which grpcio-health-checking declares but leaves UNIMPLEMENTED, answers every
  known name's status.
Reflection echoes each request in its answer (`original_request`); the client's strings
in that copy are cut to the same bound.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
from grpc_health.v1 import health, health_pb2
from grpc_reflection.v1alpha import reflection, reflection_pb2

from server.echo import MAX_NAME_CHARS, clip
from server.guard import Guard, RpcFailure

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
HEALTH_PREFIX = f"/{health.SERVICE_NAME}/"
REFLECTION_METHOD = f"/{reflection.SERVICE_NAME}/ServerReflectionInfo"
# List answers at most this many names (the health protocol allows RESOURCE_EXHAUSTED past
# a server's own bound); a repository of that many models is far beyond any real one.
MAX_LISTED = 1000
# Watch streams open at once per process: a stream is meant to stay open (a client's
# health-checking channel keeps one per server), so the receive timeout does not end it.
MAX_WATCHERS = 1000


class HealthServicer(health.aio.HealthServicer):
    """The stock asyncio servicer with the differences in the module docstring. `set_soon`
    may be called from any thread (the repository's poller, a start-up scan)."""

    def __init__(self, initial: tuple[str, ...] = ("",)) -> None:
        super().__init__()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: set[asyncio.Task] = set()
        self._initial = initial
        self._watching = 0

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Statuses go to this loop from now on; the initial names start NOT_SERVING."""
        self._loop = loop
        for name in self._initial:
            self.set_soon(name, NOT_SERVING)

    def set_soon(self, service: str, status) -> None:
        """Set a status from any thread, in call order (the loop applies it)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        loop.call_soon_threadsafe(self._apply, service, status)

    def _apply(self, service: str, status) -> None:
        task = asyncio.get_running_loop().create_task(self.set(service, status))
        self._pending.add(task)  # a task nobody references may be collected before it runs
        task.add_done_callback(self._pending.discard)

    async def watch(self, request: health_pb2.HealthCheckRequest, context) -> None:
        if self._watching >= MAX_WATCHERS:
            raise RpcFailure(grpc.StatusCode.RESOURCE_EXHAUSTED,
                             f"{self._watching} Watch streams are open, the most this server process keeps; "
                             "use Check, or close a stream")
        self._watching += 1
        try:
            await self.Watch(request, context)
        finally:
            self._watching -= 1

    def statuses(self) -> dict:
        return dict(self._server_status)  # the stock servicer's own table, which Watch reads too

    def check(self, request: health_pb2.HealthCheckRequest, context) -> health_pb2.HealthCheckResponse:
        status = self._server_status.get(request.service)
        if status is None:
            raise RpcFailure(grpc.StatusCode.NOT_FOUND,
                             f"no model or service named {clip(request.service)} on this server")
        return health_pb2.HealthCheckResponse(status=status)

    def list(self, request: health_pb2.HealthListRequest, context) -> health_pb2.HealthListResponse:
        statuses = self.statuses()
        if len(statuses) > MAX_LISTED:
            raise RpcFailure(grpc.StatusCode.RESOURCE_EXHAUSTED,
                             f"{len(statuses)} health names exceed the {MAX_LISTED} that List answers; "
                             "ask Check for one name")
        response = health_pb2.HealthListResponse()
        for name, status in statuses.items():
            response.statuses[name].status = status
        return response


def _clip_echo(response: reflection_pb2.ServerReflectionResponse) -> reflection_pb2.ServerReflectionResponse:
    echo = response.original_request
    for owner, field in ((echo, "host"), (echo, "file_by_filename"), (echo, "file_containing_symbol"),
                         (echo, "all_extension_numbers_of_type"),
                         (echo.file_containing_extension, "containing_type")):
        value = getattr(owner, field)
        if len(value) > MAX_NAME_CHARS:
            setattr(owner, field, clip(value))
    return response


def stock_handlers(guard: Guard, health_servicer: HealthServicer,
                   service_names: tuple[str, ...]) -> dict[str, grpc.RpcMethodHandler]:
    """The health and reflection methods, by full path, each behind `guard`."""
    reflector = reflection.aio.ReflectionServicer(service_names)

    async def reflect(requests: AsyncIterator, context) -> AsyncIterator:
        async for response in reflector.ServerReflectionInfo(requests, context):
            yield _clip_echo(response)

    return {
        HEALTH_PREFIX + "Check": guard.unary("Health/Check", health_servicer.check, health_pb2.HealthCheckRequest),
        HEALTH_PREFIX + "List": guard.unary("Health/List", health_servicer.list, health_pb2.HealthListRequest),
        HEALTH_PREFIX + "Watch": guard.server_stream("Health/Watch", health_servicer.watch,
                                                     health_pb2.HealthCheckRequest),
        REFLECTION_METHOD: guard.bidi("ServerReflectionInfo", reflect, reflection_pb2.ServerReflectionRequest),
    }
