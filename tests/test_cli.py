"""The `moses-reorder` program itself: what `--help` costs, what every command's help says about
exit codes, and Ctrl-C while a command is still starting (issue 47)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from training.cli import COMMANDS, build_parser, command_modules

ROOT = Path(__file__).resolve().parents[1]


def run_python(code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=300)


def test_top_level_help_imports_no_command_and_no_numba():
    done = run_python(
        "import sys\nfrom training.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = sorted(m for m in sys.modules if m.startswith(('training.commands', 'numba', 'scipy', 'numpy')))\n"
        "print('HEAVY', heavy)\n")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "HEAVY []" in done.stdout, done.stdout[-2000:]
    for name in command_modules():
        assert f"    {name}" in done.stdout  # every command is still listed, with its help line
    for name, (_, line) in COMMANDS.items():
        assert line.split()[0] in done.stdout


def test_every_command_help_lists_the_exit_codes():
    parser = build_parser()
    commands = parser.commands.choices
    assert set(commands) == set(command_modules())
    for name, command in commands.items():
        text = " ".join(command.format_help().split())
        assert "exit codes: 0 success" in text and "5 cannot listen" in text and "130 interrupted" in text, name


def test_a_command_named_builds_only_that_command():
    parser = build_parser(["inspect", "x.mrw"])
    built = {name for name, p in parser.commands.choices.items() if p._actions}
    assert "inspect" in built and "pipeline" not in built
    assert parser.parse_args(["inspect", "x.mrw"]).command == "inspect"


def test_ctrl_c_while_the_command_is_imported_is_no_traceback():
    # SIGALRM 50 ms into main() raises KeyboardInterrupt while the pipeline command's modules
    # (numba, scipy, the families) are being imported, as a Ctrl-C in the first seconds does.
    done = run_python(
        "import signal, sys\n"
        "def interrupt(*_):\n    raise KeyboardInterrupt\n"
        "signal.signal(signal.SIGALRM, interrupt)\n"
        "from training.cli import main\n"
        "signal.setitimer(signal.ITIMER_REAL, 0.05)\n"
        "sys.exit(main(['pipeline', '--help']))\n")
    assert done.returncode == 130, (done.returncode, done.stdout[-500:], done.stderr[-2000:])
    assert "interrupted" in done.stderr and "Traceback" not in done.stderr, done.stderr[-2000:]
