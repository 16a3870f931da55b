"""`moses-reorder experiment --corpus DIR`: the SVM paper's classification study on one corpus.

Extract (or reuse) an example store, then train and evaluate families x feature sets
on the held-out split and print one Markdown table in the layout of the paper's
Tables 5-6 (time, accuracy, P/R/F1 per class) plus log-loss, ECE and the seen/unseen
slices. Argument parsing and output only; the work is training.eval.studies.run_experiment.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from training.errors import InputError

DEFAULT_FAMILIES = "lexical,nb-map,nb-bayes,maxent"
DEFAULT_FEATURES = "S2,S4,S7"


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "experiment", help="families x feature sets on a held-out split, one Markdown table",
        description="Extract a corpus directory (train.SRC, train.TGT, train.align) into an example "
                    "store, train every family on every feature set, evaluate each on the held-out "
                    "sentences and print the SVM paper's Tables 5-6 layout plus log-loss and the "
                    "seen/unseen slices. Exit codes: 0 ok, 2 usage, 3 bad input.")
    p.add_argument("--corpus", required=True, help="directory with train.SRC, train.TGT and train.align")
    p.add_argument("--src-lang", default="ja", help="source suffix (default ja)")
    p.add_argument("--tgt-lang", default="en", help="target suffix (default en)")
    p.add_argument("--features", default=DEFAULT_FEATURES, help=f"comma-separated sets (default {DEFAULT_FEATURES}); "
                   "use ';' between free combinations, e.g. 'alignments,context=1;S9'")
    p.add_argument("--families", default=DEFAULT_FAMILIES, help=f"comma-separated (default {DEFAULT_FAMILIES})")
    p.add_argument("--type", dest="moses_type", default="wbe-msd-backward-fe",
                   help="Moses type string (default wbe-msd-backward-fe, the issue's reference)")
    p.add_argument("--work", default="experiment-out",
                   help="directory for the store (reused when present) and the weight files")
    p.add_argument("--threshold", type=int, help="feature count threshold (default 10)")
    p.add_argument("--heldout-fraction", type=float, default=0.1, help="held-out tail (default 0.1)")
    p.add_argument("--param", action="append", default=[], metavar="FAMILY:NAME=VALUE",
                   help="a hyper-parameter for one family, e.g. maxent:C=1.0; repeatable")
    p.add_argument("--json", metavar="FILE", help="also write all rows as JSON")
    p.set_defaults(func=run)


def _params(items: list[str]) -> dict[str, dict[str, object]]:
    """FAMILY:NAME=VALUE items -> {family: {name: value}}, values parsed like `train --param`."""
    from training.commands.train import _param

    out: dict[str, dict[str, object]] = {}
    for item in items:
        family, sep, rest = item.partition(":")
        if not sep:
            raise InputError(f"--param expects FAMILY:NAME=VALUE, got {item!r}")
        try:
            name, value = _param(rest)
        except argparse.ArgumentTypeError as exc:
            raise InputError(f"--param {item!r}: {exc}") from exc
        out.setdefault(family, {})[name] = value
    return out


def run(args: argparse.Namespace) -> int:
    from training.moses.types import MosesType
    from training.api.pipeline import CorpusFiles, ensure_store
    from training.eval.report import study_table
    from training.eval.studies import run_experiment

    mtype = MosesType.parse(args.moses_type)
    work = Path(args.work)
    store = work / "store"
    work.mkdir(parents=True, exist_ok=True)
    ensure_store(CorpusFiles.locate(Path(args.corpus), args.src_lang, args.tgt_lang), store,
                 mtype.extract_model, 7, log=lambda line: print(line, file=sys.stderr))
    features = args.features.split(";") if ";" in args.features else args.features.split(",")
    families = [f.strip() for f in args.families.split(",") if f.strip()]
    rows = run_experiment(store, work / "models", families=families, feature_sets=[f.strip() for f in features],
                          moses_type=args.moses_type, threshold=args.threshold,
                          heldout_fraction=args.heldout_fraction, params=_params(args.param),
                          log=lambda line: print(line, file=sys.stderr))
    print(f"Held-out: last {args.heldout_fraction:g} of sentences; {mtype} ({rows[0]['direction']}); "
          "time = training seconds (features cached separately)\n")
    print(study_table([{"family": r["family"], "features": r["features"], "seconds": r["seconds"],
                        "all": r["all"], "seen": r["seen"], "unseen": r["unseen"]} for r in rows],
                      list(mtype.classes)))
    if args.json:
        from training.commands.evaluate import _write_json

        _write_json(args.json, {"rows": rows})
    return 0
