"""The figures `eval --plot` draws for one model: which apply, and their data.

The active set per pass comes from the model's own training history; the NMI ranking
and error-against-selection curves refit naive Bayes on the model's features
(eval.studies.selection_curve); the scaling plot reads benchmark records. Drawing is
eval/plots.py's and eval/historyplot.py's.
"""

from __future__ import annotations

import json
from pathlib import Path

from training.errors import InputError
from training.eval.historyplot import plot_history
from training.eval.plots import plot_nmi_ranking, plot_scaling, plot_selection_error
from training.eval.studies import selection_curve


def report_figures(report: dict, model, store: str, out_dir: str, bench: str | None) -> list[str]:
    """Every figure the model and the options allow; returns the written paths."""
    written = []
    out = Path(out_dir)
    directions = (model.metadata.get("training") or {}).get("directions") or {}
    histories = {d: info.get("history") or [] for d, info in directions.items()}
    histories = {d: h for d, h in histories.items() if len(h) > 1 and all("objective" in x for x in h)}
    if histories:  # the dual papers' Figure 1, drawn by the trainers' own plot
        out.mkdir(parents=True, exist_ok=True)
        plot_history(histories, out / "active-set.png", title=f"{model.family} {model.moses_type}")
        written.append(out / "active-set.png")
    family = model.family if model.family in ("nb-map", "nb-bayes") else "nb-map"
    if "pair" not in model.spec.templates or len(model.spec.templates) > 1:
        curve = selection_curve(store, model.metadata["features"], model.moses_type, family=family,
                                threshold=model.metadata["threshold"],
                                heldout_fraction=report["split"]["heldout_fraction"])
        written.append(plot_nmi_ranking(curve["nmi"], out / "nmi-ranking.png"))
        pts = curve["points"]
        written.append(plot_selection_error([p["fraction"] for p in pts], [p["error"] for p in pts],
                                            out / "selection-error.png", label=f"{family} {curve['features']}"))
        report["selection_curve"] = {k: v for k, v in curve.items() if k != "nmi"}
    if bench:
        try:
            records = json.loads(Path(bench).read_text())
            records = records.get("records", records) if isinstance(records, dict) else records
            written.append(plot_scaling(records, out / "scaling.png"))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise InputError(f"cannot read benchmark records: {exc}", bench) from exc
    return [str(p) for p in written]
