"""Which pieces of the C++ toolchain are here, and what a test does when one is missing.

The C++ tests (the client library's GoogleTest suite, the Moses installer) need tools
and development packages that pip does not install. Outside CI a missing piece skips
the test with a reason naming the Debian package that provides it; under CI (CI=true,
as .ci/run runs, which apt-installs all of them) it is a failure, so CI really runs
the C++ tests. Every check is a lookup (PATH, pkg-config): this module builds nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from typing import Mapping

import pytest


@dataclass(frozen=True)
class Piece:
    """One thing the C++ build needs: a program on PATH or a pkg-config module."""

    name: str
    debian: str
    program: str | None = None
    pkgconfig: tuple[str, ...] = ()


CMAKE = Piece("cmake", "cmake", program="cmake")
CTEST = Piece("ctest", "cmake", program="ctest")
CXX = Piece("a C++ compiler (c++)", "g++", program="c++")
PKG_CONFIG = Piece("pkg-config", "pkg-config", program="pkg-config")
PROTOC = Piece("protoc", "protobuf-compiler", program="protoc")
GRPC_PLUGIN = Piece("grpc_cpp_plugin", "protobuf-compiler-grpc", program="grpc_cpp_plugin")
GRPCPP = Piece("gRPC C++ (pkg-config grpc++)", "libgrpc++-dev", pkgconfig=("grpc++",))
PROTOBUF = Piece("protobuf C++ (pkg-config protobuf)", "libprotobuf-dev", pkgconfig=("protobuf",))
GTEST = Piece("GoogleTest (pkg-config gtest gtest_main)", "libgtest-dev", pkgconfig=("gtest", "gtest_main"))

# What moses_ff/client/CMakeLists.txt finds (find_program, pkg_check_modules, find_package(GTest)).
CLIENT_SUITE = (CMAKE, CTEST, CXX, PKG_CONFIG, PROTOC, GRPC_PLUGIN, GRPCPP, PROTOBUF, GTEST)
# What moses_ff/install.sh runs.
INSTALLER = (PKG_CONFIG, PROTOC, GRPC_PLUGIN, GRPCPP, PROTOBUF)


def missing(pieces: tuple[Piece, ...], env: Mapping[str, str] | None = None) -> list[Piece]:
    """The pieces not found with this environment (PATH, PKG_CONFIG_PATH/LIBDIR); without
    pkg-config no pkg-config module can be found, so those count as missing too."""
    env = dict(os.environ if env is None else env)
    path = env.get("PATH", os.defpath)
    pkg_config = shutil.which("pkg-config", path=path)
    absent = []
    for piece in pieces:
        if piece.program is not None:
            found = shutil.which(piece.program, path=path) is not None
        else:
            found = pkg_config is not None and subprocess.run(
                [pkg_config, "--exists", *piece.pkgconfig], env=env, capture_output=True).returncode == 0
        if not found:
            absent.append(piece)
    return absent


def under_ci(env: Mapping[str, str] | None = None) -> bool:
    return (os.environ if env is None else env).get("CI", "").strip().lower() in ("1", "true", "yes")


def require(pieces: tuple[Piece, ...], what: str, env: Mapping[str, str] | None = None) -> None:
    """Skip (outside CI) or fail (CI=true) when any piece is missing, naming the Debian packages."""
    absent = missing(pieces, env)
    if not absent:
        return
    packages = " ".join(dict.fromkeys(p.debian for p in absent))
    reason = (f"{what} needs {', '.join(p.name for p in absent)}: not found; "
              f"install the Debian package(s): apt-get install {packages}")
    if under_ci(env):
        pytest.fail(f"CI=true: {reason} (.ci/run installs them; CI must run this test)", pytrace=False)
    pytest.skip(reason)
