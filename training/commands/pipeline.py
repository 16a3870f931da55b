"""`moses-reorder pipeline`: the main job, from an aligned corpus to served models.

Argument parsing and output only; the work is training.api.pipeline.run_pipeline.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from training.commands.argtypes import fraction, whole_number
from training import defaults
from training.families import FAMILIES  # needs the train extra: without it the command says so (cli.py)


def run(args: argparse.Namespace) -> int:
    from training.api import run_pipeline
    from training.errors import UsageError

    if args.stray_corpus is not None:  # `pipeline DIR`: argparse alone would say "unrecognized arguments"
        raise UsageError(f"the corpus is an option: moses-reorder pipeline --corpus {args.stray_corpus} ...")
    if not args.quiet:
        from training.jitcache import FIRST_RUN_NOTE, cache_root, is_cold
        from training.moses.extract import extract_block

        if is_cold(extract_block):
            print(f"pipeline: {FIRST_RUN_NOTE.format(root=cache_root())}", file=sys.stderr)
    families = None if args.families is None else [f.strip() for f in args.families.split(",") if f.strip()]
    result = run_pipeline(Path(args.corpus), Path(args.out), src_lang=args.src_lang, tgt_lang=args.tgt_lang,
                          moses_type=args.type, features=args.features, families=families, name=args.name,
                          max_phrase_length=args.max_phrase_length, heldout_fraction=args.heldout_fraction,
                          refit=not args.no_refit, log=lambda line: print(line, file=sys.stderr),
                          progress=not args.quiet)
    # stdout: the summary a person reads at the end (the families' accuracy, then what decoding
    # needs, each said once); the wide tables are in the report file, named there and on stderr.
    print(f"pipeline: report -> {result['report_path']} (every run: {result['index']})", file=sys.stderr)
    print(result["summary"], end="")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "pipeline",
        description="Extract phrase pairs with Moses's orientation classes, write Moses's lexicalized "
                    "table, train every model family, evaluate them on held-out sentences, refit each "
                    "on all sentences and publish the refit models into a model repository that "
                    "`moses-reorder serve` loads (the evaluated ones are kept in OUT/evaluated). "
                    "Without --corpus it runs on the embedded 3k-pair ja-en slice of the Tanaka Corpus.")
    p.add_argument("--corpus", default=str(defaults.EMBEDDED_CORPUS),
                   help="directory with train.SRC, train.TGT and train.align (default: the embedded tanaka-3k)")
    p.add_argument("--src-lang", default=defaults.SRC_LANG, help="source file suffix (default %(default)s)")
    p.add_argument("--tgt-lang", default=defaults.TGT_LANG, help="target file suffix (default %(default)s)")
    p.add_argument("--out", default=defaults.PIPELINE_OUT, help="output directory (default %(default)s)")
    p.add_argument("--type", default=defaults.MOSES_TYPE,
                   help="Moses reordering type the models serve (default %(default)s)")
    p.add_argument("--features", default=defaults.FEATURES,
                   help="feature set of the families without their own, S1..S15 or a combination "
                        "(default %(default)s)")
    p.add_argument("--families",
                   help=f"comma-separated families, or all; the first is the one the printed moses.ini line "
                        f"decodes with (default: {','.join(defaults.PIPELINE_FAMILIES)}: the best measured on "
                        f"ja-en and Moses's own table as the baseline row; known: {', '.join(sorted(FAMILIES))})")
    p.add_argument("stray_corpus", nargs="?", help=argparse.SUPPRESS)  # a hint, not a way in: see run()
    p.add_argument("--name", help="model name prefix in the repository (default: the corpus directory's name)")
    p.add_argument("--max-phrase-length", type=whole_number(1), default=defaults.MAX_PHRASE_LENGTH,
                   help="maximum phrase length (default %(default)s)")
    p.add_argument("--heldout-fraction", type=fraction, default=defaults.HELDOUT_FRACTION,
                   help="last fraction of sentences held out for evaluation (default %(default)s)")
    p.add_argument("--no-refit", action="store_true",
                   help="publish the evaluated models, trained without the held-out sentences, instead of "
                        "refitting each on all sentences (the Moses table is counted over all of them either way)")
    p.add_argument("--quiet", action="store_true",
                   help="no progress (a bar per stage on a terminal, a line per stage and pass every "
                        f"{defaults.PROGRESS_SECONDS:g} s otherwise); stage lines and the report still print")
    p.set_defaults(func=run)
