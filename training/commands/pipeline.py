"""`moses-reorder pipeline`: the main job, from an aligned corpus to served models.

Argument parsing and output only; the work is training.api.pipeline.run_pipeline.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from training.commands.argtypes import fraction, whole_number
from training.api.pipeline import EMBEDDED_CORPUS


def run(args: argparse.Namespace) -> int:
    from training.api.pipeline import run_pipeline

    families = None if args.families is None else [f.strip() for f in args.families.split(",") if f.strip()]
    result = run_pipeline(Path(args.corpus), Path(args.out), src_lang=args.src_lang, tgt_lang=args.tgt_lang,
                          moses_type=args.type, features=args.features, families=families, name=args.name,
                          max_phrase_length=args.max_phrase_length, heldout_fraction=args.heldout_fraction,
                          log=lambda line: print(line, file=sys.stderr))
    print(result["report"])
    print(f"Models:      {result['models_root']}/<name>/<version>/model.mrw")
    for row in result["rows"]:
        print(f"             {row['published']}")
    print(f"Moses table: {result['table']}")
    print(f"Serve them:  moses-reorder serve --models {result['models_root']} --port 50051")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "pipeline", help="the main job: extract, Moses table, train every family, evaluate, publish",
        description="Extract phrase pairs with Moses's orientation classes, write Moses's lexicalized "
                    "table, train every model family, evaluate them on held-out sentences and publish "
                    "them into a model repository that `moses-reorder serve` loads. Without --corpus it "
                    "runs on the embedded 3k-pair ja-en slice of the Tanaka Corpus.")
    p.add_argument("--corpus", default=str(EMBEDDED_CORPUS),
                   help="directory with train.SRC, train.TGT and train.align (default: the embedded tanaka-3k)")
    p.add_argument("--src-lang", default="ja", help="source file suffix (default ja)")
    p.add_argument("--tgt-lang", default="en", help="target file suffix (default en)")
    p.add_argument("--out", default="work/pipeline", help="output directory (default work/pipeline)")
    p.add_argument("--type", default="hier-msd-bidirectional-fe",
                   help="Moses reordering type the models serve (default hier-msd-bidirectional-fe)")
    p.add_argument("--features", default="S7", help="feature set, S1..S15 or a combination (default S7)")
    p.add_argument("--families", help="comma-separated families (default: all)")
    p.add_argument("--name", help="model name prefix in the repository (default: the corpus directory's name)")
    p.add_argument("--max-phrase-length", type=whole_number(1), default=7, help="maximum phrase length (default 7)")
    p.add_argument("--heldout-fraction", type=fraction, default=0.1,
                   help="last fraction of sentences held out for evaluation (default 0.1)")
    p.set_defaults(func=run)
