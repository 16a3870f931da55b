"""moses_ff/install.sh registers ExternalReordering in a Moses checkout, idempotently.

Runs on copies of the real Moses files the installer edits (moses/FF/Factory.cpp and
moses/Jamfile) taken from the Moses checkout named by $MOSES_DIR. Moses is not part of
this project, so without one the test is skipped and says why.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
INSTALL = ROOT / "moses_ff" / "install.sh"
MOSES = Path(os.environ.get("MOSES_DIR", "/nonexistent"))
EDITED = ("moses/FF/Factory.cpp", "moses/Jamfile")

pytestmark = pytest.mark.skipif(
    not all((MOSES / f).is_file() for f in EDITED) or shutil.which("protoc") is None,
    reason="needs a Moses checkout at $MOSES_DIR (not part of this project) and protoc",
)


def pristine(rel: str) -> bytes:
    """The file as Moses ships it: from the checkout's git HEAD when there is one (the
    checkout itself may already have our feature installed), else the file on disk."""
    shown = subprocess.run(["git", "-C", str(MOSES), "show", f"HEAD:{rel}"], capture_output=True)
    return shown.stdout if shown.returncode == 0 else (MOSES / rel).read_bytes()


@pytest.fixture()
def moses_copy(tmp_path: Path) -> Path:
    for rel in (*EDITED, "moses/FF/LexicalReordering/LexicalReordering.h"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(pristine(rel))
    return tmp_path


def run_install(moses: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", str(INSTALL), str(moses)], capture_output=True, text=True, check=True)


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_install_registers_the_feature_once(moses_copy: Path) -> None:
    run_install(moses_copy)
    factory = (moses_copy / "moses/FF/Factory.cpp").read_text()
    jamfile = (moses_copy / "moses/Jamfile").read_text()
    assert factory.count('#include "moses/FF/ExternalReordering/ExternalReordering.h"') == 1
    assert factory.count("MOSES_FNAME(ExternalReordering);") == 1
    assert jamfile.count("FF/ExternalReordering/*.cpp") == 1
    assert jamfile.count("lib reordering_client :") == 1
    assert jamfile.count("FF_Factory.o reordering_client") == 1
    # The client library comes before `lib moses`, which lists it as a source.
    assert jamfile.index("lib reordering_client :") < jamfile.index("lib moses :")
    dest = moses_copy / "moses/FF/ExternalReordering"
    assert (dest / "ExternalReordering.cpp").read_bytes() == (ROOT / "moses_ff/moses/ExternalReordering.cpp").read_bytes()
    assert (dest / "reordering_client.h").is_file()
    assert (dest / "client/reordering_client.cc").is_file()
    assert (dest / "client/gen/reordering/v1/reordering.grpc.pb.cc").is_file()
    # Everything else in the original files is untouched.
    original = pristine("moses/FF/Factory.cpp").decode().splitlines()
    assert [line for line in factory.splitlines() if "ExternalReordering" not in line] == original


def test_second_install_changes_nothing(moses_copy: Path) -> None:
    run_install(moses_copy)
    before = snapshot(moses_copy)
    second = run_install(moses_copy)
    assert snapshot(moses_copy) == before
    assert [line for line in second.stdout.splitlines() if line.startswith(("installed ", "edited "))] == []


def test_not_a_moses_checkout_is_a_clear_error(tmp_path: Path) -> None:
    result = subprocess.run(["sh", str(INSTALL), str(tmp_path)], capture_output=True, text=True)
    assert result.returncode != 0
    assert "is not a Moses checkout" in result.stderr and "Factory.cpp" in result.stderr


def test_installed_feature_compiles_with_moses_flags(moses_copy: Path) -> None:
    """ExternalReordering.cpp against the real Moses headers, with the -std Moses builds with.

    The full Moses tree supplies the headers; only the installed copy of our files is
    compiled (syntax and types: -fsyntax-only), so a Moses API drift fails here first.
    """
    if shutil.which("g++") is None or not (MOSES / "moses/Manager.h").is_file():
        pytest.skip("needs g++ and the full Moses source tree")
    run_install(moses_copy)
    src = moses_copy / "moses/FF/ExternalReordering/ExternalReordering.cpp"
    cmd = ["g++", "-std=c++0x", "-fsyntax-only", "-DMAX_NUM_FACTORS=4", "-DKENLM_MAX_ORDER=6", "-DWITH_THREADS",
           "-I", str(src.parent), "-I", str(MOSES), "-I", str(MOSES / "moses"), str(src)]
    result = subprocess.run(cmd, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-4000:]
