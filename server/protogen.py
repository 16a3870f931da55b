"""Regenerate the committed Python gRPC code from the packaged .proto.

The generated modules live in `server/_proto/reordering/v1/` and are committed, so an
installed server needs no protoc. `server/_proto/reordering/v1/reordering.proto` is a
symlink to the contract in `proto/` (one source of truth, installed as package data);
tests/server/test_proto_current.py regenerates into a temporary directory and fails when
the committed code is stale. Run `python -m server.protogen` after editing the contract.

This module is a build tool: the server never imports it (grpcio-tools is a test extra).
"""

from __future__ import annotations

import sys
from pathlib import Path

PROTO_ROOT = Path(__file__).resolve().parent / "_proto"
PROTO_FILE = "reordering/v1/reordering.proto"
GENERATED = ("reordering_pb2.py", "reordering_pb2.pyi", "reordering_pb2_grpc.py")
# protoc writes an absolute import of the message module; the package lives under
# server._proto, so the service module must import it relatively.
_ABSOLUTE_IMPORT = "from reordering.v1 import reordering_pb2 as"
_RELATIVE_IMPORT = "from . import reordering_pb2 as"


def generate(out_root: Path) -> list[Path]:
    """Run protoc (grpcio-tools) on the packaged contract; returns the written files."""
    from grpc_tools import protoc  # test/build-time dependency only

    out_root = Path(out_root)
    out_root.mkdir(parents=True, exist_ok=True)
    args = [
        "grpc_tools.protoc",
        f"-I{PROTO_ROOT}",
        f"--python_out={out_root}",
        f"--pyi_out={out_root}",
        f"--grpc_python_out={out_root}",
        PROTO_FILE,
    ]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed on {PROTO_ROOT / PROTO_FILE}")
    out_dir = out_root / Path(PROTO_FILE).parent
    grpc_module = out_dir / "reordering_pb2_grpc.py"
    text = grpc_module.read_text(encoding="utf-8")
    if _ABSOLUTE_IMPORT not in text:
        raise RuntimeError(f"{grpc_module}: protoc output changed shape; update server/protogen.py")
    grpc_module.write_text(text.replace(_ABSOLUTE_IMPORT, _RELATIVE_IMPORT), encoding="utf-8")
    return [out_dir / name for name in GENERATED]


def main() -> int:
    written = generate(PROTO_ROOT)
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
