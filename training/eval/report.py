"""Text layout of evaluation results: the SVM paper's Tables 4-6, as Markdown.

Table 4 layout (one model): the confusion matrix in percent of all examples with
rows = predicted orientation and columns = true orientation (the paper's reading:
precision is a row's diagonal share, recall a column's), then accuracy and per-class
precision / recall / F1. Tables 5-6 layout (a study): one row per model with time,
accuracy, and P / R / F1 per class, plus log-loss. A signature line in the manner of
sacrebleu says what made the numbers.

Only formatting lives here; the numbers come from training/metrics.py.
"""

from __future__ import annotations

from typing import Any

SLICES = ("all", "seen", "unseen")


def _pct(x: float) -> str:
    return "-" if x != x else f"{100 * x:.1f}"  # NaN (empty slice) prints as "-"


def format_signature(signature: dict[str, Any]) -> str:
    """`family:nb-map|features:S7|...|version:0.1.0`, keys in insertion order."""
    return "|".join(f"{k}:{v}" for k, v in signature.items() if v is not None and v != "")


def confusion_table(summary: dict[str, Any]) -> str:
    """One slice in the layout of the SVM paper's Table 4 (Markdown)."""
    classes = summary["classes"]
    n = max(summary["examples"], 1)
    # summary["confusion"] is [true][predicted]; the paper prints predicted rows.
    conf = summary["confusion"]
    head = ("| Predicted \\ true | " + " | ".join(classes)
            + " | Accuracy | Precision | Recall | F1 |")
    rule = "|---" * (len(classes) + 5) + "|"
    lines = [head, rule]
    for p, name in enumerate(classes):
        cells = [_pct(conf[t][p] / n) for t in range(len(classes))]
        acc = _pct(summary["accuracy"]) if p == len(classes) // 2 else ""
        lines.append(f"| {name} | " + " | ".join(cells)
                     + f" | {acc} | {_pct(summary['precision'][p])} | {_pct(summary['recall'][p])}"
                     f" | {_pct(summary['f1'][p])} |")
    return "\n".join(lines)


def slices_line(result: dict[str, Any]) -> str:
    """Accuracy, log-loss and ECE of every slice on one line each (Markdown table)."""
    lines = ["| Slice | Examples | Accuracy | Log-loss | ECE |", "|---|---|---|---|---|"]
    for name in SLICES:
        s = result.get(name)
        if s is None:
            continue
        lines.append(f"| {name} | {s['examples']:,} | {_pct(s['accuracy'])} | "
                     f"{s['log_loss']:.4f} | {s['ece']:.4f} |")
    return "\n".join(lines)


def format_report(report: dict[str, Any]) -> str:
    """The whole `eval` report: signature, then per direction Table 4 per slice."""
    out = [f"Model: {report['model']}", f"Signature: {format_signature(report['signature'])}",
           f"Held-out: {report['split']['description']}", ""]
    for direction, result in report["directions"].items():
        out.append(f"## {direction}")
        out.append("")
        out.append(slices_line(result))
        out.append("")
        for name in SLICES:
            s = result.get(name)
            if s is None or s["examples"] == 0:
                continue
            out.append(f"### {direction}, {name} pairs ({s['examples']:,} examples; "
                       "confusion matrix in % of the slice)")
            out.append("")
            out.append(confusion_table(s))
            out.append("")
    return "\n".join(out)


def study_table(rows: list[dict[str, Any]], classes: list[str]) -> str:
    """Families x feature sets, the SVM paper's Tables 5-6 plus log-loss and slices.

    Each row: family, features, seconds (training), summary (all), and optionally
    seen/unseen summaries.
    """
    abbrev = [c[0].upper() for c in classes]
    names = (["Family", "Features", "Time (s)", "Acc."]
             + [f"{m} {a}" for m in ("P", "R", "F1") for a in abbrev]
             + ["Log-loss", "ECE", "Acc. seen", "Acc. unseen", "LL seen", "LL unseen"])
    head = "| " + " | ".join(names) + " |"
    n_cols = len(names)
    lines = [head, "|---" * n_cols + "|"]
    for row in rows:
        s = row["all"]
        seen, unseen = row.get("seen"), row.get("unseen")
        cells = [row["family"], row["features"], f"{row['seconds']:.1f}", _pct(s["accuracy"])]
        for key in ("precision", "recall", "f1"):
            cells += [_pct(v) for v in s[key]]
        cells += [f"{s['log_loss']:.4f}", f"{s['ece']:.4f}",
                  _pct(seen["accuracy"]) if seen else "-", _pct(unseen["accuracy"]) if unseen else "-",
                  f"{seen['log_loss']:.4f}" if seen else "-", f"{unseen['log_loss']:.4f}" if unseen else "-"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
