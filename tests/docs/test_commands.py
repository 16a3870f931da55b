"""Every command in the README and the guides runs as written.

Code blocks marked `bash` run, in order, one shell per document (`bash -e`, so the first
failing command fails the test), from a scratch directory that holds the repository's
files (its training/data, benchmarks ...) but writes its work/ there, not in the checkout.
Blocks marked `sh` need what a test machine does not have (a Moses checkout, root for
apt-get, minutes at the papers' scale): every `moses-reorder` command in them, and every
one quoted inline, is parsed by the real command-line parser, so a renamed or removed
option fails here. The README's two commands are the exception to running as a shell:
CI runs command 2 verbatim (.ci/run) and this test runs command 1's main job without
reinstalling the package it is testing.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from training.cli import build_parser, command_modules

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = ["README.md", "docs/training.md", "docs/serving.md", "docs/moses.md", "docs/scale.md"]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
INSTALL = "python3 -m pip install -e "


def blocks(document: str) -> list[tuple[str, str]]:
    """(language, text) of every fenced code block of a document."""
    text = (ROOT / document).read_text(encoding="utf-8")
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(text)]


def command_lines(text: str) -> list[str]:
    """Shell text -> its lines with continuations joined, comments and blank lines dropped."""
    joined = re.sub(r"\\\n\s*", " ", text)
    return [line.split(" #")[0].strip() for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def moses_reorder_commands(document: str) -> list[str]:
    """Every `moses-reorder ...` command of a document: in its code blocks and inline."""
    found = []
    for _, text in blocks(document):
        for line in command_lines(text):
            for part in re.split(r"&&|;|\|", line):
                part = part.strip().rstrip("&").strip()
                if part.startswith("moses-reorder "):
                    found.append(part)
    prose = FENCE.sub("", (ROOT / document).read_text(encoding="utf-8"))
    found += [m.group(1) for m in re.finditer(r"`(moses-reorder [^`]*)`", prose)]
    return found


def scratch_checkout(tmp_path: Path) -> Path:
    """A directory that looks like the repository root (links to its files) but is empty of
    work/, so the documents' commands write there and never into the checkout."""
    root = tmp_path / "repo"
    root.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in ("work", ".git"):
            (root / entry.name).symlink_to(entry)
    return root


def run_shell(script: str, cwd: Path, timeout: float = 1200) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    return subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_moses_reorder_command_parses(document):
    commands = moses_reorder_commands(document)
    assert commands, f"{document} quotes no moses-reorder command"
    parser = build_parser()
    for command in commands:
        argv = shlex.split(command)[1:]
        if len(argv) == 1:  # the name of a command, e.g. `moses-reorder serve`
            assert argv[0] in command_modules(), f"{document}: no command {argv[0]!r}"
            continue
        try:
            parser.parse_args(argv)
        except SystemExit as exc:
            pytest.fail(f"{document}: `{command}` does not parse (exit {exc.code})")


@pytest.mark.parametrize("document", [d for d in DOCUMENTS if d != "README.md"])
def test_the_guide_bash_blocks_run_as_written(document, tmp_path):
    script = "\n".join(text for language, text in blocks(document) if language == "bash")
    assert script, f"{document} has no runnable (bash) block"
    done = run_shell(script, scratch_checkout(tmp_path))
    assert done.returncode == 0, f"{document} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


def test_the_readme_two_commands(tmp_path):
    [two] = [text for language, text in blocks("README.md") if language == "bash"]
    first, second = command_lines(two)
    # command 2 is what CI runs, verbatim
    assert second == "python3 -m pip install -e '.[test,align]' && python3 -m pytest -q"
    assert second in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    # command 1: the package is installed already (this test imports it); run the main job as written
    install = INSTALL + "'.[train]' && "        # the training extra: `pip install -e .` is the server alone
    assert first.startswith(install)
    root = scratch_checkout(tmp_path)
    done = run_shell(first.removeprefix(install), root)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "ExternalReordering name=LexicalReordering0" in done.stdout and "[distortion-limit]" in done.stdout
    assert (root / "work" / "demo" / "report.md").is_file()


@pytest.mark.parametrize("document", DOCUMENTS)
def test_python_examples_compile(document):
    for language, text in blocks(document):
        if language == "python":
            compile(text, document, "exec")
