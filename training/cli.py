"""The `moses-reorder` command line: one entry point, one subcommand per job.

Each subcommand lives in its own module that exposes `register(subparsers)`; this file
only wires them together and turns our errors into exit codes. Commands of other
packages (the server's `serve`) come in through the `moses_reorder.commands` entry-point
group of the installed distribution, so training never imports the server. Exit codes:
0 success, 1 unexpected failure, 2 usage error, 3 bad input data, 4 bad model file,
130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points

from training import __version__
from training.errors import MosesReorderError

# subcommand name -> module that registers it (imported lazily so `--help` is fast).
COMMANDS: dict[str, str] = {
    "pipeline": "training.commands.pipeline",
    "extract": "training.commands.extract",
    "align": "training.commands.align",
    "lexical": "training.commands.lexical",
    "features": "training.commands.features",
    "train": "training.commands.train",
    "eval": "training.commands.evaluate",
    "experiment": "training.commands.experiment",
    "inspect": "training.commands.inspect",
}
PLUGIN_GROUP = "moses_reorder.commands"


def command_modules() -> dict[str, str]:
    """Our commands, then those other installed packages declare (pyproject entry points)."""
    plugins = {ep.name: ep.value for ep in entry_points(group=PLUGIN_GROUP) if ep.name not in COMMANDS}
    return {**COMMANDS, **dict(sorted(plugins.items()))}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="moses-reorder",
        description="Discriminative phrase-reordering models for Moses: extract, train, evaluate, serve.",
    )
    parser.add_argument("--version", action="version", version=f"moses-reorder {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module_name in command_modules().values():
        importlib.import_module(module_name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except MosesReorderError as exc:
        print(f"moses-reorder {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"moses-reorder {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
