"""`moses-reorder experiment`: the SVM paper's classification study on one corpus.

Argument parsing and output only; the work is training.api.pipeline.run_corpus_experiment.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from training import defaults
from training.commands.argtypes import family_hyperparameter


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "experiment",
        description="Extract a corpus directory (train.SRC, train.TGT, train.align) into an example "
                    "store, train every family on every feature set, evaluate each on the held-out "
                    "sentences and print the SVM paper's Tables 5-6 layout plus log-loss and the "
                    "seen/unseen slices. Exit codes: 0 ok, 2 usage, 3 bad input.")
    p.add_argument("--corpus", required=True, help="directory with train.SRC, train.TGT and train.align")
    p.add_argument("--src-lang", default=defaults.SRC_LANG, help="source suffix (default %(default)s)")
    p.add_argument("--tgt-lang", default=defaults.TGT_LANG, help="target suffix (default %(default)s)")
    p.add_argument("--features", default=defaults.EXPERIMENT_FEATURES,
                   help="comma-separated sets (default %(default)s); use ';' between free combinations, "
                        "e.g. 'alignments,context=1;S9'")
    p.add_argument("--families", default=defaults.EXPERIMENT_FAMILIES, help="comma-separated (default %(default)s)")
    p.add_argument("--type", dest="moses_type", default=defaults.EXPERIMENT_TYPE,
                   help="Moses type string (default %(default)s, the SVM paper's study)")
    p.add_argument("--work", default=defaults.EXPERIMENT_WORK,
                   help="directory for the store (reused when present) and the weight files")
    p.add_argument("--threshold", type=int, help=f"feature count threshold (default {defaults.THRESHOLD})")
    p.add_argument("--heldout-fraction", type=float, default=defaults.HELDOUT_FRACTION,
                   help="held-out tail (default %(default)s)")
    p.add_argument("--param", action="append", default=[], type=family_hyperparameter,
                   metavar="FAMILY:NAME=VALUE", help="a hyper-parameter for one family, e.g. maxent:C=1.0; repeatable")
    p.add_argument("--json", metavar="FILE", help="also write all rows as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from training.api.pipeline import run_corpus_experiment
    from training.atomic import write_json_atomic
    from training.eval.report import study_table
    from training.moses.types import MosesType

    params: dict[str, dict[str, object]] = {}
    for family, name, value in args.param:
        params.setdefault(family, {})[name] = value
    features = args.features.split(";") if ";" in args.features else args.features.split(",")
    rows = run_corpus_experiment(Path(args.corpus), Path(args.work),
                                 families=[f.strip() for f in args.families.split(",") if f.strip()],
                                 feature_sets=[f.strip() for f in features], moses_type=args.moses_type,
                                 src_lang=args.src_lang, tgt_lang=args.tgt_lang, threshold=args.threshold,
                                 heldout_fraction=args.heldout_fraction, params=params,
                                 log=lambda line: print(line, file=sys.stderr))
    mtype = MosesType.parse(args.moses_type)
    print(f"Held-out: last {args.heldout_fraction:g} of sentences; {mtype} ({rows[0]['direction']}); "
          "time = training seconds (features cached separately)\n")
    print(study_table([{"family": r["family"], "features": r["features"], "seconds": r["seconds"],
                        "all": r["all"], "seen": r["seen"], "unseen": r["unseen"]} for r in rows],
                      list(mtype.classes)))
    if args.json:
        write_json_atomic(args.json, {"rows": rows})
    return 0
