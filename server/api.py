"""The reordering.v1 messages and stubs under short names, for the server and its clients.

Import from here, not from `server._proto` directly, so the generated layout can move
without touching callers. Nothing here may depend on the server's runtime state.
"""

from __future__ import annotations

from server._proto.reordering.v1 import reordering_pb2 as pb
from server._proto.reordering.v1 import reordering_pb2_grpc as pb_grpc

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["ReorderingScorer"].full_name  # reordering.v1.ReorderingScorer

__all__ = ["pb", "pb_grpc", "SERVICE_NAME"]
