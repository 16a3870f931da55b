"""The `moses-reorder` command line: one entry point, one subcommand per job.

Each subcommand lives in its own module that exposes `register(subparsers)`; this file
only wires them together and turns our errors into exit codes:
0 success, 1 unexpected failure, 2 usage error, 3 bad input data, 4 bad model file,
130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

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
    "serve": "server.commands.serve",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="moses-reorder",
        description="Discriminative phrase-reordering models for Moses: extract, train, evaluate, serve.",
    )
    parser.add_argument("--version", action="version", version=f"moses-reorder {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, module_name in COMMANDS.items():
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
