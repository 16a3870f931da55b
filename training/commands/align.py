"""`moses-reorder align`: word-align tokenized text so `extract` can start from it.

Only argument parsing and reporting live here; the work is training.corpus.align.
"""

from __future__ import annotations

import argparse
import sys
import time

from training.commands.argtypes import whole_number
from training.corpus.symmetrize import METHODS


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "align",
        description=(
            "Align tokenized SRC and TGT (line N of one is parallel to line N of the other; "
            "tokens separated by spaces or tabs) with eflomal in both directions, symmetrize the two "
            "directions, and write Pharaoh 'i-j' links (0-based, i = source, j = target), one "
            "line per sentence pair. Needs the optional extra: pip install 'moses-reorder[align]'. "
            "eflomal samples from a clock-seeded generator, so reruns differ slightly."
        ),
    )
    p.add_argument("--src", required=True, metavar="F", help="tokenized source text, one sentence per line")
    p.add_argument("--tgt", required=True, metavar="E", help="tokenized target text, one sentence per line")
    p.add_argument("--out", required=True, metavar="A", help="Pharaoh alignment to write (replaced atomically)")
    p.add_argument("--symmetrization", default="grow-diag-final-and", choices=list(METHODS),
                   help="how to combine the two directions, as Moses's symal (default: %(default)s)")
    p.add_argument("--samplers", type=whole_number(1), default=3, metavar="N",
                   help="independent eflomal samplers whose counts are combined (default: %(default)s)")
    p.add_argument("--threads", type=whole_number(1), default=None, metavar="N",
                   help="OpenMP threads for eflomal (default: OMP_NUM_THREADS or all cores)")
    p.add_argument("--verbose", action="store_true", help="show eflomal's own progress output")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from training.corpus.align import align_corpus

    start = time.perf_counter()
    n_links = align_corpus(args.src, args.tgt, args.out, method=args.symmetrization,
                           n_samplers=args.samplers, threads=args.threads, verbose=args.verbose,
                           report=lambda message: print(f"moses-reorder align: {message}", file=sys.stderr))
    print(f"moses-reorder align: wrote {n_links} links ({args.symmetrization}) to {args.out} "
          f"in {time.perf_counter() - start:.1f}s", file=sys.stderr)
    return 0
