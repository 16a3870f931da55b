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

# Top-level modules of the `train` extra (pyproject.toml). `pip install moses-reorder` is the
# scoring server alone (the container image installs just that), so a training command can
# meet one missing: it then says which extra to install instead of a traceback.
TRAIN_EXTRA_MODULES = frozenset({"scipy", "threadpoolctl", "matplotlib", "dask", "distributed"})
TRAIN_EXTRA_HINT = "install moses-reorder[train] (pip install 'moses-reorder[train]', or -e '.[train]' in a checkout)"


def _needs_train_extra(module: str) -> str:
    return f"this command needs {module}, which is not installed: {TRAIN_EXTRA_HINT}"


def _missing_train_module(exc: ModuleNotFoundError) -> str | None:
    """The train-extra module whose absence raised `exc`, or None for any other import error."""
    top = (exc.name or "").partition(".")[0]
    return top if top in TRAIN_EXTRA_MODULES else None


def _register_unavailable(sub, name: str, module: str) -> None:
    """A subcommand whose module needs the train extra: it parses anything and fails clearly."""
    def refuse(args: argparse.Namespace) -> int:
        raise MosesReorderError(_needs_train_extra(module))

    # prefix_chars no argument uses: every word after the command, options too, is a positional.
    p = sub.add_parser(name, help=f"(needs moses-reorder[train]: {module} is not installed)", add_help=False,
                       prefix_chars="\0")
    p.add_argument("rest", nargs="*", help=argparse.SUPPRESS)
    p.set_defaults(func=refuse)


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
    for name, module_name in command_modules().items():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            missing = _missing_train_module(exc)
            if missing is None:
                raise
            _register_unavailable(sub, name, missing)
            continue
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except MosesReorderError as exc:
        print(f"moses-reorder {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except ModuleNotFoundError as exc:  # a lazy import of the train extra (e.g. matplotlib for eval's plots)
        missing = _missing_train_module(exc)
        if missing is None:
            raise
        print(f"moses-reorder {args.command}: error: {_needs_train_extra(missing)}", file=sys.stderr)
        return MosesReorderError.exit_code
    except KeyboardInterrupt:
        print(f"moses-reorder {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
