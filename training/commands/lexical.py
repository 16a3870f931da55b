"""`moses-reorder lexical`: example store -> Moses lexicalized reordering table (text or .gz)."""

from __future__ import annotations

import argparse
import sys
import time

from training.errors import InputError
from training.moses.table import DEFAULT_SMOOTHING, build_table
from training.moses.types import MosesType
from training.store.examples import ExampleStore


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
    started = time.perf_counter()
    store = ExampleStore.open(args.store)
    moses_type = MosesType.parse(args.model)
    if moses_type.collapse:
        raise InputError(f"--model {args.model}: collapseff is a decoder setting; the table is the same "
                         "as for allff, give the type without it")
    counts = build_table(store, moses_type, args.out, smoothing=args.smoothing)
    if not args.quiet:
        print(f"lexical: {store.n_examples} examples -> {counts.keys.size} rows of {moses_type} "
              f"({', '.join(moses_type.outputs)}); {time.perf_counter() - started:.1f} s; table {args.out}",
              file=sys.stderr)
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "lexical", help="write Moses's lexicalized reordering table from an example store",
        description="Relative-frequency lexicalized reordering table with Moses's constant smoothing, in "
                    "Moses's text format (gzip when --out ends in .gz), as lexical-reordering-score "
                    "writes it. Exit codes: 0 ok, 2 usage, 3 bad input.")
    p.add_argument("--store", required=True, help="example store made by `moses-reorder extract`")
    p.add_argument("--model", required=True, metavar="TYPE",
                   help="Moses reordering type, e.g. hier-msd-bidirectional-fe or wbe-msd-backward-f")
    p.add_argument("--out", required=True, help="table file to write (atomically); .gz compresses")
    p.add_argument("--smoothing", type=_smoothing, default=DEFAULT_SMOOTHING,
                   help="constant added to every class count (Moses's default %(default)s)")
    p.add_argument("--quiet", action="store_true", help="no summary line")
    p.set_defaults(func=run)
