"""The C++ toolchain check: a missing piece skips outside CI and fails under CI=true.

Pieces are hidden the way a machine without them looks: a PATH without the program,
a pkg-config search path without the module's .pc file (everything else of the
system's pkg-config directories is still there).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from toolchain import CLIENT_SUITE, GRPC_PLUGIN, GTEST, INSTALLER, missing, require


def system_pc_dirs() -> list[Path]:
    out = subprocess.run(["pkg-config", "--variable", "pc_path", "pkg-config"], capture_output=True, text=True)
    dirs = out.stdout.strip().split(os.pathsep) + os.environ.get("PKG_CONFIG_PATH", "").split(os.pathsep)
    return [Path(d) for d in dirs if d and Path(d).is_dir()]


def env_without_pc(tmp_path: Path, hidden: tuple[str, ...]) -> dict[str, str]:
    """The environment with a pkg-config search path holding every system .pc file but `hidden`."""
    pc = tmp_path / "pkgconfig"
    pc.mkdir()
    for d in system_pc_dirs():
        for f in d.glob("*.pc"):
            if f.stem not in hidden and not (pc / f.name).exists():
                (pc / f.name).symlink_to(f)
    env = dict(os.environ, PKG_CONFIG_LIBDIR=str(pc), PKG_CONFIG_PATH="")
    env.pop("CI", None)
    return env


def env_without_program(tmp_path: Path, program: str) -> dict[str, str]:
    """PATH holding links to every program the suite needs except `program`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for piece in CLIENT_SUITE:
        found = piece.program and shutil.which(piece.program)
        if found and piece.program != program:
            (bin_dir / piece.program).symlink_to(found)
    env = dict(os.environ, PATH=str(bin_dir))
    env.pop("CI", None)
    return env


@pytest.fixture()
def toolchain_here() -> None:
    require(CLIENT_SUITE, "the toolchain check's own test")


def test_a_missing_gtest_is_found_and_named_by_its_debian_package(tmp_path: Path, toolchain_here) -> None:
    env = env_without_pc(tmp_path, ("gtest", "gtest_main"))
    assert missing(CLIENT_SUITE, env) == [GTEST]
    assert missing(INSTALLER, env) == []  # the installer does not need GTest
    with pytest.raises(pytest.skip.Exception, match=r"GoogleTest.*apt-get install libgtest-dev"):
        require(CLIENT_SUITE, "the C++ client suite", env)


def test_under_ci_a_missing_piece_fails_instead_of_skipping(tmp_path: Path, toolchain_here) -> None:
    env = dict(env_without_pc(tmp_path, ("gtest", "gtest_main")), CI="true")
    with pytest.raises(pytest.fail.Exception, match=r"CI=true: .*libgtest-dev"):
        require(CLIENT_SUITE, "the C++ client suite", env)


def test_a_missing_program_names_its_package(tmp_path: Path, toolchain_here) -> None:
    env = env_without_program(tmp_path, "grpc_cpp_plugin")
    assert missing(CLIENT_SUITE, env) == [GRPC_PLUGIN]
    with pytest.raises(pytest.skip.Exception, match="protobuf-compiler-grpc"):
        require(CLIENT_SUITE, "the C++ client suite", env)
    with pytest.raises(pytest.fail.Exception, match="protobuf-compiler-grpc"):
        require(CLIENT_SUITE, "the C++ client suite", dict(env, CI="true"))


def test_without_pkg_config_the_libraries_count_as_missing(tmp_path: Path) -> None:
    env = dict(os.environ, PATH=str(tmp_path))  # an empty PATH: nothing is found
    env.pop("CI", None)
    names = {p.debian for p in missing(CLIENT_SUITE, env)}
    assert {"pkg-config", "libgrpc++-dev", "libprotobuf-dev", "libgtest-dev", "cmake", "g++"} <= names


def test_skip_reasons_name_no_path_of_one_machine() -> None:
    here = Path(__file__).resolve().parent
    for name in ("test_install.py", "test_cpp_client.py", "toolchain.py"):
        assert "/work/" not in (here / name).read_text(encoding="utf-8"), name
