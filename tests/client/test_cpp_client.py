"""The C++ client library (moses_ff/client): build it with CMake and run its ctest suite.

The GoogleTest suite talks to the real scoring server (`moses-reorder serve`), which it
starts itself from the fixture written here (tests/client/cppfixture.py): scores equal
the Python path to 1e-6 for two model versions, version pinning, a server that is down
gives a clear error within the deadline, a restarted server is used again, round_robin
over two replicas, eight threads sharing one client; the sentence scorer both Moses
features use (sentence_scorer.h: the pinned version's rows, the schema check, on-error=, a
context model's blocks combined into what the model gives a pair next to its neighbour);
and, with no server, the ini keys the features parse (feature_options.h). This test fails if any C++ test fails or is
skipped.

The build directory persists in the user's cache directory, ~/.cache/moses-reorder (keyed by
the checkout path; MOSES_FF_BUILD_DIR overrides it), so only the first run pays for compiling
the generated gRPC code, and nothing is left in the system temp directory.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from cppfixture import write_fixture
from toolchain import CLIENT_SUITE, require

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "moses_ff" / "client"
EXPECTED_TESTS = 29


def user_cache_dir() -> Path:
    """$XDG_CACHE_HOME/moses-reorder (~/.cache/moses-reorder): where a kept build belongs, not
    the system temp directory that other users and tmp cleaners share."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "moses-reorder"


def _build_dir() -> Path:
    key = hashlib.sha256(str(ROOT).encode()).hexdigest()[:12]
    return Path(os.environ.get("MOSES_FF_BUILD_DIR", user_cache_dir() / f"moses-ff-client-{key}"))


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    result = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if result.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} failed ({result.returncode}):\n{result.stdout[-6000:]}\n{result.stderr[-6000:]}")
    return result


def test_cpp_client_suite_passes_against_the_real_server(tmp_path: Path, ja_en_dir: Path) -> None:
    require(CLIENT_SUITE, "the C++ client suite")
    fixture = write_fixture(tmp_path / "fixture", ja_en_dir)
    build = _build_dir()
    _run(["cmake", "-S", str(CLIENT), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
          f"-DREORDERING_FIXTURE_DIR={fixture}"])
    _run(["cmake", "--build", str(build), "-j", "2"])

    report = tmp_path / "gtest.xml"
    env = dict(os.environ, GTEST_OUTPUT=f"xml:{report}", PYTHONPATH=os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
    env.pop("REORDERING_FIXTURE_DIR", None)
    _run(["ctest", "--test-dir", str(build), "--output-on-failure", "--timeout", "600"], env=env)

    cases = ET.parse(report).getroot().iter("testcase")
    results = {f"{c.get('classname')}.{c.get('name')}": c for c in cases}
    skipped = [name for name, c in results.items() if c.find("skipped") is not None or c.get("result") == "skipped"]
    failed = [name for name, c in results.items() if c.find("failure") is not None]
    assert not failed, f"C++ tests failed: {failed}"
    assert not skipped, f"C++ tests skipped (fixture not seen?): {skipped}"
    assert len(results) == EXPECTED_TESTS, sorted(results)


def test_the_kept_build_is_in_the_user_cache_not_the_temp_directory(monkeypatch) -> None:
    import tempfile

    monkeypatch.delenv("MOSES_FF_BUILD_DIR", raising=False)
    build = _build_dir()
    assert build.parent == user_cache_dir()
    assert Path(tempfile.gettempdir()) not in build.parents
