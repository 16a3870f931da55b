"""Progress: a tqdm bar on a terminal, whole lines (no carriage return) in a pipe or log.

The end-to-end checks run the real `moses-reorder pipeline` in a subprocess, once with
stderr on a pseudo-terminal and once on a pipe, as a user at a terminal and a user
redirecting to a log file would.
"""

from __future__ import annotations

import fcntl
import io
import os
import pty
import re
import select
import subprocess
import struct
import sys
import termios
from pathlib import Path

import pytest
from corpus_slice import write_corpus_slice

from training.defaults import EMBEDDED_CORPUS, FEATURES
from training.progress import LineProgress, progress

ROOT = Path(__file__).resolve().parents[2]
# Every stage that reports progress, as it names itself on stderr.
STAGES = ("extract:", f"count {FEATURES}:", "maxent-lbfgs:", "svm:")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    corpus = tmp_path_factory.mktemp("corpus") / "tanaka-300"
    write_corpus_slice(EMBEDDED_CORPUS, 300, corpus)
    return corpus


def pipeline_argv(corpus: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "training.cli", "pipeline", "--corpus", str(corpus), "--out", str(out),
            "--families", "maxent,svm", "--type", "wbe-msd-backward-fe"]


def env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="120")


def test_a_pipe_gets_lines_for_every_stage_and_no_carriage_return(corpus, tmp_path):
    result = subprocess.run(pipeline_argv(corpus, tmp_path / "out"), capture_output=True, text=True, env=env(),
                            timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    err = result.stderr
    assert "\r" not in err and "\x1b[" not in err
    lines = err.splitlines()
    for stage in STAGES:
        mine = [line for line in lines if line.startswith(stage)]
        assert any(line.endswith("done)") for line in mine), (stage, err[-3000:])
    assert any(line.startswith("train maxent backward:") for line in lines)


def test_a_terminal_gets_bars(corpus, tmp_path):
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))  # a 120-column terminal
    proc = subprocess.Popen(pipeline_argv(corpus, tmp_path / "out"), stdin=subprocess.DEVNULL, stdout=slave,
                            stderr=slave, env=env(), close_fds=True)
    os.close(slave)
    chunks = []
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 600)
            if not ready:
                break
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(master)
        assert proc.wait(timeout=600) == 0
    screen = b"".join(chunks).decode("utf-8", "replace")
    assert re.search(r"\rextract: +100%\|", screen)  # tqdm redraws its bar in place
    assert re.search(r"\rsvm: .*\| *\d+/\d+ ", screen)
    for stage in STAGES:
        assert stage in screen, (stage, screen[-3000:])
    assert "started)" not in screen  # no line reporter on a terminal


def test_line_reporter_writes_start_end_and_at_most_one_line_per_interval():
    out = io.StringIO()
    bar = progress(total=5, desc="svm", unit="pass", file=out, interval=3600)
    assert isinstance(bar, LineProgress)
    for k in range(5):
        bar.update(1)
        bar.set_postfix(viol=f"{1 / (k + 1):.3g}")
    bar.close()
    bar.close()
    assert out.getvalue().splitlines() == ["svm: 0/5 pass (0.0 s, started)",
                                           out.getvalue().splitlines()[1]]
    assert out.getvalue().splitlines()[1].startswith("svm: 5/5 pass, viol 0.2 (")
    assert out.getvalue().splitlines()[1].endswith("done)")

    # a line shows the postfix of the unit it counts (update, then set_postfix: tqdm's order)
    out = io.StringIO()
    bar = progress(total=3, desc="dual-mlr", unit="pass", file=out, interval=0)
    for k in range(1, 4):
        bar.update(1)
        bar.set_postfix(active=f"pass {k}")
    bar.close()
    assert [line.split(" (")[0] for line in out.getvalue().splitlines()[1:]] == \
        [f"dual-mlr: {k}/3 pass, active pass {k}" for k in (1, 2, 3)] + ["dual-mlr: 3/3 pass, active pass 3"]

    out = io.StringIO()
    for _ in progress(range(3), desc="count S7", unit="chunk", file=out, interval=0):
        pass
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 + 3 + 1 and lines[-1].startswith("count S7: 3/3 chunk") and "\r" not in out.getvalue()

    out = io.StringIO()
    progress(total=3, desc="quiet", file=out, enabled=False).close()
    assert out.getvalue() == ""
