"""What `serve` tells a user who slipped, and what it leaves behind (issue 32)."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from serverkit import free_port, subprocess_env

from server.ports import reserve_shared_port


def test_the_pipeline_out_folder_as_models_is_refused_with_the_repository_it_holds(tmp_path):
    out = tmp_path / "demo"  # what `pipeline --out work/demo` leaves: models/ beside store/ and reports/
    (out / "models" / "tanaka-3k-svm" / "1").mkdir(parents=True)
    (out / "store").mkdir()
    (out / "reports").mkdir()
    proc = subprocess.run([sys.executable, "-m", "training.cli", "serve", "--models", str(out), "--port", "0"],
                          capture_output=True, text=True, env=subprocess_env(), timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert f"did you mean --models {out / 'models'}?" in proc.stderr


def test_the_port_reservation_leaves_no_lock_file(tmp_path):
    port = free_port()
    lock = Path(tempfile.gettempdir()) / f"moses-reorder-port-{port}.lock"
    sock = reserve_shared_port("127.0.0.1", port)
    sock.close()
    assert not lock.exists()


def serve(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "training.cli", "serve", *args],
                          capture_output=True, text=True, env=subprocess_env(), timeout=120)


def test_the_pipeline_out_folder_suggests_the_served_models_not_the_evaluated_ones(tmp_path):
    """OUT/evaluated (the models the report measured) sorts before OUT/models, and is a
    repository too: the hint must name the models to serve (issue 47)."""
    out = tmp_path / "demo"
    for folder in ("evaluated", "models"):
        (out / folder / "tanaka-3k-svm" / "1").mkdir(parents=True)
    proc = serve("--models", str(out), "--port", "0")
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert f"did you mean --models {out / 'models'}?" in proc.stderr


def test_the_repository_as_a_positional_gets_the_option_named(tmp_path):
    proc = serve(str(tmp_path))
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert f"moses-reorder serve: error: the model repository is an option: moses-reorder serve --models {tmp_path}" \
        in proc.stderr


def test_a_bare_port_gets_the_option_named_under_the_commands_name(tmp_path):
    proc = serve("--models", str(tmp_path), "50051")
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "moses-reorder serve: error: the port is an option: --port 50051" in proc.stderr


def test_an_unknown_option_is_reported_under_the_commands_name(tmp_path):
    proc = serve("--models", str(tmp_path), "--modles", "x")
    assert proc.returncode == 2
    assert "moses-reorder serve: error: unrecognized arguments: --modles" in proc.stderr
