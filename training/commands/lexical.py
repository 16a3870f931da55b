"""`moses-reorder lexical`: example store -> Moses lexicalized reordering table (text or .gz).

Argument parsing only; the work is training.api.lexical_table.
"""

from __future__ import annotations

import argparse
import sys
import time

from training import defaults
from training.commands.argtypes import add_parallel_arguments


def _smoothing(text: str) -> float:
    if text.endswith("u"):
        raise argparse.ArgumentTypeError("Moses's --SmoothWithCounts ('u' suffix) is not supported; "
                                         "give a constant such as 0.5")
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def run(args: argparse.Namespace) -> int:
    from training.api import lexical_table

    started = time.perf_counter()
    summary = lexical_table(args.store, args.moses_type, args.out, smoothing=args.smoothing, jobs=args.jobs,
                            scheduler=args.scheduler, memory=args.memory)
    if not args.quiet:
        mtype = summary.moses_type
        print(f"lexical: {summary.examples} examples -> {summary.rows} rows of {mtype} "
              f"({', '.join(mtype.outputs)}); {time.perf_counter() - started:.1f} s; table {args.out}",
              file=sys.stderr)
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "lexical",
        description="Relative-frequency lexicalized reordering table with Moses's constant smoothing, in "
                    "Moses's text format (gzip when --out ends in .gz), as lexical-reordering-score "
                    "writes it. Exit codes: 0 ok, 2 usage, 3 bad input.")
    p.add_argument("--store", required=True, help="example store made by `moses-reorder extract`")
    # --type as in `train`; --model is the older spelling (Moses's scorer calls it a model).
    p.add_argument("--type", "--model", required=True, dest="moses_type", metavar="TYPE",
                   help="Moses reordering type, e.g. hier-msd-bidirectional-fe or wbe-msd-backward-f")
    p.add_argument("--out", required=True, help="table file to write (atomically); .gz compresses")
    p.add_argument("--smoothing", type=_smoothing, default=defaults.SMOOTHING,
                   help="constant added to every class count (Moses's default %(default)s)")
    add_parallel_arguments(p)
    p.add_argument("--quiet", action="store_true", help="no summary line")
    p.set_defaults(func=run)
