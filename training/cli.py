"""The `moses-reorder` command line: one entry point, one subcommand per job.

Each subcommand lives in its own module that exposes `register(subparsers)`; this file
only wires them together and turns our errors into exit codes. Commands of other
packages (the server's `serve`) come in through the `moses_reorder.commands` entry-point
group of the installed distribution, so training never imports the server. Exit codes:
0 success, 1 unexpected failure, 2 usage error, 3 bad input data, 4 bad model file,
5 cannot listen (a busy port), 130 interrupted (EXIT_CODES).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points

from training import __version__
from training.errors import MosesReorderError

# subcommand name -> (module that registers it, its line in `moses-reorder --help`). A module is
# imported only when its command runs (or when build_parser() is asked for every command), so
# `moses-reorder --help` imports none of them.
COMMANDS: dict[str, tuple[str, str]] = {
    "pipeline": ("training.commands.pipeline",
                 "the main job: extract, Moses table, train every family, evaluate, publish"),
    "extract": ("training.commands.extract",
                "extract phrase pairs with Moses's orientation labels into an example store"),
    "align": ("training.commands.align", "word-align a tokenized parallel corpus (eflomal + grow-diag-final-and)"),
    "lexical": ("training.commands.lexical", "write Moses's lexicalized reordering table from an example store"),
    "features": ("training.commands.features", "build and cache the feature matrix of an example store"),
    "train": ("training.commands.train", "train a reordering classifier into a weight file"),
    "eval": ("training.commands.evaluate", "evaluate a weight file on the held-out sentences of a store"),
    "experiment": ("training.commands.experiment", "families x feature sets on a held-out split, one Markdown table"),
    "inspect": ("training.commands.inspect", "print a weight file's metadata, schema and sizes"),
}
EXIT_CODES = ("exit codes: 0 success, 1 unexpected failure, 2 usage error, 3 bad input data (the message "
              "names the file and line or the field), 4 bad model file, 5 cannot listen (serve: the port is "
              "in use or the address is not this machine's), 130 interrupted")
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
    return {**{name: module for name, (module, _) in COMMANDS.items()}, **dict(sorted(plugins.items()))}


class _Subcommands:
    """What a command module's `register(subparsers)` is given: argparse's subparsers, with each
    command's one-line help from COMMANDS and the exit codes under every command's --help."""

    def __init__(self, action: argparse._SubParsersAction):
        self._action = action

    def add_parser(self, name: str, **kwargs) -> argparse.ArgumentParser:
        if name in COMMANDS:
            kwargs.setdefault("help", COMMANDS[name][1])
        kwargs.setdefault("epilog", EXIT_CODES)
        return self._action.add_parser(name, **kwargs)


def _command_word(argv: Sequence[str]) -> str | None:
    """The subcommand `argv` names: its first word that is not an option (the top level has none
    that take a value)."""
    return next((word for word in argv if not word.startswith("-")), None)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The whole command line; given `argv`, only the command it names is imported and built
    (the others are listed by name and help line), so `--help` and each command start fast."""
    parser = argparse.ArgumentParser(
        prog="moses-reorder",
        description="Discriminative phrase-reordering models for Moses: extract, train, evaluate, serve.",
        epilog=EXIT_CODES,
    )
    parser.add_argument("--version", action="version", version=f"moses-reorder {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    parser.commands = sub  # for _parse
    modules = command_modules()
    chosen = set(modules) if argv is None else {_command_word(argv)} & set(modules)
    for name, module_name in modules.items():
        if name not in chosen and name in COMMANDS:
            sub.add_parser(name, help=COMMANDS[name][1], add_help=False)  # listed, not built
            continue
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            missing = _missing_train_module(exc)
            if missing is None:
                raise
            _register_unavailable(sub, name, missing)
            continue
        module.register(_Subcommands(sub))  # a plugin's module is imported to list it: keep it light
    return parser


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """parse_args, but words the command does not take are reported by the command's own parser,
    so the message starts `moses-reorder COMMAND: error:` like every other error of that command."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        command = parser.commands.choices[args.command]
        command.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = _parse(build_parser(argv), argv)
    except KeyboardInterrupt:  # Ctrl-C while the command's modules are imported
        print("moses-reorder: interrupted", file=sys.stderr)
        return 130
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
