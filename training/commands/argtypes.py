"""argparse value types shared by the subcommands, so a bad number reads the same everywhere.

argparse turns an ArgumentTypeError into a usage error (exit 2) naming the option.
"""

from __future__ import annotations

import argparse
import ast
from collections.abc import Callable

from training import defaults


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


def add_parallel_arguments(p: argparse.ArgumentParser) -> None:
    """--jobs, --scheduler, --memory: how a sharded stage runs (training.parallel)."""
    p.add_argument("--jobs", type=whole_number(0), default=defaults.JOBS,
                   help="local worker processes (default %(default)s = every core); the output is "
                        "byte-identical for any count")
    p.add_argument("--scheduler", metavar="ADDRESS", default=None,
                   help="run the tasks on this Dask scheduler (e.g. tcp://host:8786; workers must see the "
                        "same files at the same paths), or 'local' for a LocalCluster of --jobs workers")
    p.add_argument("--memory", default=defaults.MEMORY,
                   help="memory budget that sizes tasks, chunks and sort runs, e.g. 4G or 512M "
                        "(default %(default)s)")
