"""The first run on a machine compiles the numba functions (about 45 s for `pipeline`) and
says so (issue 32); a run with numba's cache in place says nothing about it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import numpy as np
from training.features.hashing import fnv1a64
from training.jitcache import is_cold
print(is_cold(fnv1a64))
fnv1a64(np.zeros(3, dtype=np.uint8), 0, 3)  # compiles, and numba writes its cache
print(is_cold(fnv1a64))
"""


def run_with_cache(cache: Path, code: str) -> list[str]:
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split()


def test_a_cold_cache_is_seen_and_a_compiled_function_is_not_cold(tmp_path):
    assert run_with_cache(tmp_path / "numba", PROBE) == ["True", "False"]
    assert run_with_cache(tmp_path / "numba", PROBE) == ["False", "False"]  # the next process loads it


def test_pipeline_says_it_compiles_on_a_cold_cache(tmp_path):
    code = ("import sys\nfrom training.cli import main\n"
            f"sys.exit(main(['pipeline', '--corpus', {str(tmp_path / 'none')!r}, '--out', {str(tmp_path / 'o')!r}]))")
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"), PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert "first run for this user: compiling the numba functions" in done.stderr
