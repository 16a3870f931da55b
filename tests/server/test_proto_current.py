"""The committed generated gRPC code is current with proto/reordering/v1/reordering.proto.

The server ships generated code (server/_proto) instead of running protoc at install
time; this test is what keeps that choice honest in CI: it regenerates with grpcio-tools
(the test extra) and compares. Version banners are ignored (a newer grpcio-tools may
write other version numbers); the descriptor bytes and the stub code must match.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from server import protogen

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = protogen.PROTO_ROOT / "reordering" / "v1"
_VERSION_LINES = re.compile(r"^(# Protobuf Python Version:.*|GRPC_GENERATED_VERSION = .*)$", re.M)


def _serialized_descriptor(path: Path) -> bytes:
    """The FileDescriptorProto bytes that a _pb2 module registers."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "AddSerializedFile":
            return node.args[0].value
    raise AssertionError(f"{path}: no AddSerializedFile call")


def test_packaged_proto_is_the_contract():
    packaged = protogen.PROTO_ROOT / protogen.PROTO_FILE
    contract = ROOT / "proto" / "reordering" / "v1" / "reordering.proto"
    assert packaged.read_bytes() == contract.read_bytes()


def test_generated_code_is_current(tmp_path):
    protogen.generate(tmp_path)
    fresh = tmp_path / "reordering" / "v1"
    assert _serialized_descriptor(fresh / "reordering_pb2.py") == _serialized_descriptor(
        COMMITTED / "reordering_pb2.py"), "proto changed: run `python -m server.protogen` and commit"
    for name in ("reordering_pb2_grpc.py", "reordering_pb2.pyi"):
        new = _VERSION_LINES.sub("", (fresh / name).read_text(encoding="utf-8"))
        old = _VERSION_LINES.sub("", (COMMITTED / name).read_text(encoding="utf-8"))
        assert new == old, f"{name} is stale: run `python -m server.protogen` and commit"


def test_generated_descriptor_matches_the_messages_the_server_uses():
    from server.api import SERVICE_NAME, pb
    from training.modelfile.request import ARRAY_FIELDS, FIELDS

    assert SERVICE_NAME == "reordering.v1.ReorderingScorer"
    fields = {f.name: f for f in pb.ScoreRequest.DESCRIPTOR.fields}
    assert [f.name for f in pb.ScoreRequest.DESCRIPTOR.fields] == ["model", "version", *FIELDS, "context_blocks"]
    assert all(fields[name].is_packed for name in ARRAY_FIELDS)
