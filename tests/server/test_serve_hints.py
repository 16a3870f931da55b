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
