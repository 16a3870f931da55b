"""moses_ff/install.sh registers ExternalReordering in a Moses checkout, idempotently.

Runs on copies of the real Moses files the installer edits (moses/FF/Factory.cpp and
moses/Jamfile; moses2/FF/FeatureRegistry.cpp and moses2/Jamfile when the checkout has
moses2) taken from the Moses checkout that $MOSES_DIR names. Moses is not part
of this project (nor a Debian package), so without MOSES_DIR the tests that need it
are skipped and say so, in CI too; a missing protoc/gRPC toolchain skips outside CI and
fails under CI=true (tests/client/toolchain.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from toolchain import INSTALLER, require

ROOT = Path(__file__).resolve().parents[2]
INSTALL = ROOT / "moses_ff" / "install.sh"
MOSES_DIR = os.environ.get("MOSES_DIR", "")
MOSES = Path(MOSES_DIR)
EDITED = ("moses/FF/Factory.cpp", "moses/Jamfile")
EDITED2 = ("moses2/FF/FeatureRegistry.cpp", "moses2/Jamfile")
HAS_MOSES2 = bool(MOSES_DIR) and all((MOSES / f).is_file() for f in EDITED2)
NO_MOSES = ("needs a Moses checkout (not part of this project): set MOSES_DIR to one" if not MOSES_DIR
            else "MOSES_DIR does not name a Moses checkout (no moses/FF/Factory.cpp and moses/Jamfile)")


@pytest.fixture(autouse=True)
def _installer_toolchain(request: pytest.FixtureRequest) -> None:
    if "moses_copy" in request.fixturenames:
        if not (MOSES_DIR and all((MOSES / f).is_file() for f in EDITED)):
            pytest.skip(NO_MOSES)
        require(INSTALLER, "moses_ff/install.sh")


def pristine(rel: str) -> bytes:
    """The file as Moses ships it: from the checkout's git HEAD when there is one (the
    checkout itself may already have our feature installed), else the file on disk."""
    shown = subprocess.run(["git", "-C", str(MOSES), "show", f"HEAD:{rel}"], capture_output=True)
    return shown.stdout if shown.returncode == 0 else (MOSES / rel).read_bytes()


@pytest.fixture()
def moses_copy(tmp_path: Path) -> Path:
    files = (*EDITED, "moses/FF/LexicalReordering/LexicalReordering.h")
    if HAS_MOSES2:
        files += (*EDITED2, "moses2/FF/LexicalReordering/LexicalReordering.h")
    for rel in files:
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


def test_install_registers_the_moses2_feature_once(moses_copy: Path) -> None:
    if not HAS_MOSES2:
        pytest.skip("the checkout MOSES_DIR names has no moses2/FF/FeatureRegistry.cpp and moses2/Jamfile")
    out = run_install(moses_copy).stdout
    assert "for moses and moses2" in out
    registry = (moses_copy / "moses2/FF/FeatureRegistry.cpp").read_text()
    jamfile = (moses_copy / "moses2/Jamfile").read_text()
    assert registry.count('#include "ExternalReordering/ExternalReordering.h"') == 1
    assert registry.count("MOSES_FNAME(ExternalReordering);") == 1
    # Built with moses2_lib, linked with the one client library of moses/ (no second copy).
    assert jamfile.count("FF/ExternalReordering/ExternalReordering.cpp ../moses//reordering_client") == 1
    assert jamfile.index("FF/ExternalReordering/ExternalReordering.cpp") < jamfile.index("exe moses2")
    dest = moses_copy / "moses2/FF/ExternalReordering"
    assert (dest / "ExternalReordering.cpp").read_bytes() == (ROOT / "moses_ff/moses2/ExternalReordering.cpp").read_bytes()
    assert (dest / "reordering_client.h").read_bytes() == (ROOT / "moses_ff/client/reordering_client.h").read_bytes()
    assert not list(dest.rglob("*.cc"))
    for rel in EDITED2:
        original = pristine(rel).decode().splitlines()
        assert [line for line in (moses_copy / rel).read_text().splitlines()
                if "ExternalReordering" not in line] == original


def test_a_checkout_without_moses2_gets_the_moses_part_only(moses_copy: Path) -> None:
    shutil.rmtree(moses_copy / "moses2", ignore_errors=True)
    out = run_install(moses_copy).stdout
    assert "for moses (no moses2/" in out
    assert not (moses_copy / "moses2").exists()


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


def test_installed_moses2_feature_compiles_with_moses_flags(moses_copy: Path) -> None:
    """The Moses2 feature against the real Moses2 headers (-fsyntax-only), as above.

    The copy holds only the files the installer touches; its relative includes
    (`../../Scores.h`, ...) are found through -I MOSES/moses2/FF/LexicalReordering, a
    directory as deep as the installed one.
    """
    if shutil.which("g++") is None or not (MOSES / "moses2/PhraseBased/Manager.h").is_file():
        pytest.skip("needs g++ and the full Moses source tree with moses2")
    run_install(moses_copy)
    src = moses_copy / "moses2/FF/ExternalReordering/ExternalReordering.cpp"
    cmd = ["g++", "-std=c++0x", "-fsyntax-only", "-DMAX_NUM_FACTORS=4", "-DKENLM_MAX_ORDER=6", "-DWITH_THREADS",
           "-I", str(MOSES / "moses2/FF/LexicalReordering"), "-I", str(MOSES), str(src)]
    result = subprocess.run(cmd, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-4000:]
