"""`moses-reorder features`: build and cache the feature matrix of an example store.

Argument parsing only; the work is training.api.feature_matrix. Several trainers on
the same store, spec, threshold and split then reuse the cached matrix.
"""

from __future__ import annotations

import argparse
import sys

from training import defaults
from training.commands.argtypes import add_parallel_arguments, fraction, whole_number
from training.moses.types import DIRECTIONS


def run(args: argparse.Namespace) -> int:
    from training.api import feature_matrix
    from training.features.spec import FeatureSpec

    # A context model's rows hold one direction's neighbour, so it has a matrix a direction
    # (training.features.matrix.chunk_keys); `train` reads whichever its type needs.
    spec = FeatureSpec.parse(args.features)
    if not spec.neighbour:
        directions = [None]
    else:
        directions = [args.direction] if args.direction else list(DIRECTIONS["bidirectional"])
    for direction in directions:
        fm = feature_matrix(args.store, args.features, threshold=args.threshold, heldout_fraction=args.heldout,
                            progress=not args.quiet, jobs=args.jobs, scheduler=args.scheduler,
                            memory=args.memory, direction=direction)
        m = fm.meta
        if not args.quiet:
            which = f" ({direction})" if direction else ""
            print(f"features {fm.spec.name}{which}: {fm.X.shape[0]} examples x {fm.X.shape[1]} features kept "
                  f"(seen > {args.threshold} times; {m['n_distinct']} distinct), {fm.X.nnz} non-zeros; "
                  f"built in {m['seconds']} s; cache {fm.path}", file=sys.stderr)
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "features",
        description="Extract feature keys (the SVM paper's templates S1..S15 or a combination such as "
                    "alignments,context=1,anova=2), keep those seen more than --threshold times and cache "
                    "the CSR matrix under STORE/features/. Exit codes: 0 ok, 2 usage, 3 bad input.")
    p.add_argument("--store", required=True, help="example store made by `moses-reorder extract`")
    p.add_argument("--features", required=True, metavar="SPEC",
                   help="S1..S15, or templates (words, boundaries, alignments, pair, source) with "
                        "context=0..3 and anova=1|2|le2, comma-separated")
    p.add_argument("--threshold", type=whole_number(0), default=defaults.THRESHOLD,
                   help="keep features seen more than this many times (default %(default)s, as the papers)")
    p.add_argument("--heldout", type=fraction, default=0.0, metavar="FRACTION",
                   help="count the vocabulary without the last FRACTION of sentences (the held-out split "
                        "of eval/experiment; default 0: all sentences)")
    p.add_argument("--direction", choices=DIRECTIONS["bidirectional"],
                   help="with neighbour features, build only this direction's matrix (default: both; "
                        "ignored without them)")
    add_parallel_arguments(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    p.set_defaults(func=run)
