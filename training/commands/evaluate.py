"""`moses-reorder eval MODEL --store DIR`: held-out accuracy, Tables 4-6 layout, log-loss, ECE.

Argument parsing and output only; the numbers come from training.eval.evaluate, the layout
from training.eval.report, the figures from training.eval.plots.
"""

from __future__ import annotations

import argparse
import json
import sys

from training.commands.argtypes import add_parallel_arguments


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "eval",
        description="Score the held-out phrase pairs of an example store (the last "
                    "--heldout-fraction of sentences, by default the fraction the model was "
                    "trained with) and print accuracy, the confusion matrix and per-class "
                    "precision/recall/F1 (the SVM paper's Table 4 layout: rows = predicted, "
                    "columns = true, in % of the slice), log-loss and expected calibration "
                    "error, overall and for phrase pairs seen / unseen in training. "
                    "Exit codes: 0 ok, 2 usage, 3 bad input, 4 bad model file.")
    p.add_argument("model", help="weight file written by `moses-reorder train`")
    p.add_argument("--store", required=True, help="example store the model was trained on")
    p.add_argument("--heldout-fraction", type=float,
                   help="override the held-out fraction recorded in the model")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--out", help="also write the JSON report to this file (atomically)")
    p.add_argument("--plot", metavar="DIR",
                   help="write PNGs: active set per pass (from the model's history), NMI ranking and "
                        "error against NMI selection (naive Bayes refits on the model's features), "
                        "time and memory against data size (with --bench)")
    p.add_argument("--bench", metavar="JSON",
                   help="benchmark records [{family, examples, seconds, peak_mb}] for the scaling plot")
    add_parallel_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from training.api import evaluate
    from training.atomic import write_json_atomic
    from training.eval.figures import report_figures
    from training.eval.report import format_report
    from training.modelfile.model import load_model

    model = load_model(args.model)
    report = evaluate(args.model, args.store, args.heldout_fraction, model=model, jobs=args.jobs,
                      scheduler=args.scheduler, memory=args.memory)
    if args.plot:
        report["plots"] = report_figures(report, model, args.store, args.plot, args.bench)
    if report.get("warning"):
        print(f"moses-reorder eval: warning: {report['warning']}", file=sys.stderr)
    if args.out:
        write_json_atomic(args.out, report)
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(format_report(report))
        for path in report.get("plots", []):
            print(f"wrote {path}")
    return 0
