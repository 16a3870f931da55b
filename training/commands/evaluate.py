"""`moses-reorder eval MODEL --store DIR`: held-out accuracy, Tables 4-6 layout, log-loss, ECE.

Argument parsing and output only; the numbers come from training.eval.evaluate, the layout
from training.eval.report, the figures from training.eval.plots.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from training.errors import InputError


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "eval", help="evaluate a weight file on the held-out sentences of a store",
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
    p.set_defaults(func=run)


def _write_json(path: str, data: dict) -> None:
    from training.atomic import write_bytes_atomic

    write_bytes_atomic(path, json.dumps(data, indent=2).encode())


def make_plots(report: dict, model, store: str, out_dir: str, bench: str | None) -> list[str]:
    """Every figure the model and the options allow; returns the written paths."""
    from training.eval import plots
    from training.eval.studies import selection_curve

    written = []
    out = Path(out_dir)
    directions = (model.metadata.get("training") or {}).get("directions") or {}
    histories = {d: info.get("history") or [] for d, info in directions.items()}
    histories = {d: h for d, h in histories.items() if len(h) > 1 and all("objective" in x for x in h)}
    if histories:  # the dual papers' Figure 1, drawn by the trainers' own plot
        from training.eval.historyplot import plot_history

        out.mkdir(parents=True, exist_ok=True)
        plot_history(histories, out / "active-set.png", title=f"{model.family} {model.moses_type}")
        written.append(out / "active-set.png")
    family = model.family if model.family in ("nb-map", "nb-bayes") else "nb-map"
    if "pair" not in model.spec.templates or len(model.spec.templates) > 1:
        curve = selection_curve(store, model.metadata["features"], model.moses_type, family=family,
                                threshold=model.metadata["threshold"],
                                heldout_fraction=report["split"]["heldout_fraction"])
        written.append(plots.plot_nmi_ranking(curve["nmi"], out / "nmi-ranking.png"))
        pts = curve["points"]
        written.append(plots.plot_selection_error([p["fraction"] for p in pts], [p["error"] for p in pts],
                                                  out / "selection-error.png",
                                                  label=f"{family} {curve['features']}"))
        report["selection_curve"] = {k: v for k, v in curve.items() if k != "nmi"}
    if bench:
        try:
            records = json.loads(Path(bench).read_text())
            records = records.get("records", records) if isinstance(records, dict) else records
            written.append(plots.plot_scaling(records, out / "scaling.png"))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise InputError(f"cannot read benchmark records: {exc}", bench) from exc
    return [str(p) for p in written]


def run(args: argparse.Namespace) -> int:
    from training.eval.evaluate import evaluate
    from training.modelfile.model import load_model
    from training.eval.report import format_report

    model = load_model(args.model)
    report = evaluate(args.model, args.store, args.heldout_fraction, model=model)
    if args.plot:
        report["plots"] = make_plots(report, model, args.store, args.plot, args.bench)
    if args.out:
        _write_json(args.out, report)
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(format_report(report))
        for path in report.get("plots", []):
            print(f"wrote {path}")
    return 0
