"""argparse value types shared by the subcommands, so a bad number reads the same everywhere.

argparse turns an ArgumentTypeError into a usage error (exit 2) naming the option.
"""

from __future__ import annotations

import argparse
import ast
from collections.abc import Callable


def whole_number(minimum: int) -> Callable[[str], int]:
    """An int option that must be at least `minimum`."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, not {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, not {value}")
        return value

    return parse


def fraction(text: str) -> float:
    """A float option in [0, 1)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, not {text!r}") from None
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"must be in [0, 1), not {value}")
    return value


def hyperparameter(text: str) -> tuple[str, object]:
    """NAME=VALUE -> (name, value): a Python literal, else the bare word (e.g. owlqn)."""
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    try:
        parsed = ast.literal_eval(value)
    except (ValueError, SyntaxError):
        parsed = value
    return name.replace("-", "_"), parsed


def family_hyperparameter(text: str) -> tuple[str, str, object]:
    """FAMILY:NAME=VALUE -> (family, name, value), the value parsed as by hyperparameter."""
    family, sep, rest = text.partition(":")
    if not sep or not family:
        raise argparse.ArgumentTypeError(f"expected FAMILY:NAME=VALUE, got {text!r}")
    return (family, *hyperparameter(rest))


def add_run_options(p: argparse.ArgumentParser, *, jobs: bool = True) -> None:
    """--memory (every stage) and, for the sharded stages, --jobs and --scheduler
    (training/parallel.py); None means training/defaults.py's value."""
    from training import defaults

    p.add_argument("--memory", metavar="SIZE",
                   help=f"memory budget that sizes chunks and tasks, e.g. 4G or 512M (default {defaults.MEMORY})")
    if jobs:
        p.add_argument("--jobs", type=whole_number(0),
                       help="worker processes for the sharded work (default 0: every core); "
                            "the output is the same for any number")
        p.add_argument("--scheduler", metavar="ADDRESS",
                       help="run the sharded work on this Dask scheduler (tcp://HOST:PORT), or "
                            "'local' for a LocalCluster of --jobs workers; results are identical")
