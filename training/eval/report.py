"""Text layout of evaluation results: the SVM paper's Tables 4-6, as Markdown.

Table 4 layout (one model): the confusion matrix in percent of all examples with
rows = predicted orientation and columns = true orientation (the paper's reading:
precision is a row's diagonal share, recall a column's), then accuracy and per-class
precision / recall / F1. Tables 5-6 layout (a study): one row per model with time,
accuracy, and P / R / F1 per class, plus log-loss. A signature line in the manner of
sacrebleu says what made the numbers.

Only formatting lives here; the numbers come from training/eval/metrics.py.
"""

from __future__ import annotations

from pathlib import Path
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
    if report.get("warning"):
        out[3:3] = [f"WARNING: {report['warning']}"]
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


def features_label(name: str) -> str:
    """A feature set as a reader writes it: `pair`, not the canonical `pair,context=0,anova=1`
    (the defaults say nothing); S1..S15 and other combinations as they are."""
    return ",".join(part for part in name.split(",") if part not in ("context=0", "anova=1")) or name


def study_table(rows: list[dict[str, Any]], classes: list[str], baseline: str | None = None) -> str:
    """Families x feature sets, the SVM paper's Tables 5-6 plus log-loss and slices.

    Each row: family, features, seconds (training), summary (all), and optionally
    seen/unseen summaries. The family named `baseline` is marked as Moses's own model.
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
        family = f"{row['family']} (baseline: Moses's own)" if row["family"] == baseline else row["family"]
        cells = [family, features_label(row["features"]), f"{row['seconds']:.1f}", _pct(s["accuracy"])]
        for key in ("precision", "recall", "f1"):
            cells += [_pct(v) for v in s[key]]
        cells += [f"{s['log_loss']:.4f}", f"{s['ece']:.4f}",
                  _pct(seen["accuracy"]) if seen else "-", _pct(unseen["accuracy"]) if unseen else "-",
                  f"{seen['log_loss']:.4f}" if seen else "-", f"{unseen['log_loss']:.4f}" if unseen else "-"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# -- the pipeline's report: one file per run, and an index of the runs ---------------------------
BASELINE_FAMILY = "lexical"  # Moses's own lexicalized reordering model, as a served model
DIRECTION_MEANING = {"backward": "orientation of a phrase relative to the previous one (Moses's -backward)",
                     "forward": "orientation of the next phrase relative to this one (Moses's -forward)"}


def column_notes(classes: list[str]) -> str:
    """What each column of study_table means (Markdown list)."""
    abbrev = ", ".join(f"{c[0].upper()} = {c}" for c in classes)
    return "\n".join([
        "- **Time (s)**: seconds spent fitting and calibrating the model (all its directions), without "
        "feature extraction and without numba compiling its kernels (a first run's one-time cost): the "
        "figure `moses-reorder inspect MODEL` shows on its `training` line.",
        "- **Features**: the feature set, S1..S15 of the SVM paper or a combination; `pair` is the "
        "phrase-pair identity (one feature per phrase pair: what Moses's table counts), `source` the "
        "source phrase's.",
        "- **Acc.**: accuracy, % of held-out phrase pairs whose most probable orientation is the true one.",
        f"- **P / R / F1 X**: precision, recall and F1 (%) of orientation class X ({abbrev}).",
        "- **Log-loss**: mean -ln p(true orientation), ln p floored at -100 as Moses floors scores "
        "(lower is better; what the decoder's feature sees).",
        "- **ECE**: expected calibration error over 15 confidence bins (0 = probabilities mean what they say).",
        "- **Acc. seen / unseen**, **LL seen / unseen**: accuracy and log-loss on the held-out pairs whose "
        "phrase pair does / does not occur in the training sentences (Moses's table knows only seen pairs).",
    ])


def pipeline_report(run: dict[str, Any]) -> str:
    """One pipeline run as Markdown: what was run, a table per direction with Moses's own model
    marked as the baseline, what the columns mean, where the models are and what to run next.

    run: started (ISO time), corpus, sentences, fingerprint, moses_type, classes, directions,
    heldout_fraction, split (evaluate's split dict), refit (the published models were
    refit on all sentences; then each row's `evaluated` is the measured model's file),
    rows (run_experiment's, with `directions`, `published`, and the {fit, calibration,
    heldout} sentence counts `evaluated_sentences` and `published_sentences`),
    models_root, table, serve (the command line), moses_ini_line (the [feature] line of
    the first row's model), distortion_limit and distortion_advice
    (training.moses.distortion, from the alignments).
    """
    rows = run["rows"]
    families = [r["family"] for r in rows]
    if run["refit"]:
        shipped = (f"The figures below measure models that did not see these sentences; each model was then "
                   f"refit on all {run['sentences']:,} sentences with the same settings, and the refit one is "
                   "published (scikit-learn's refit=True; `--no-refit` publishes the evaluated ones).")
    else:
        shipped = "No model saw these sentences in training; the evaluated models are the published ones."
    out = [f"# Pipeline run {run['started']}", "",
           f"Corpus `{run['corpus']}` ({run['sentences']:,} sentence pairs, fingerprint {run['fingerprint'][:12]}); "
           f"Moses type `{run['moses_type']}`; families {', '.join(families)}.",
           f"Held out: {run['split']['description']}. {shipped}", "", *training_sentences(run), ""]
    if BASELINE_FAMILY in families:
        out += [f"`{BASELINE_FAMILY}` is the baseline: Moses's own lexicalized reordering model (the "
                "relative-frequency table Moses loads, smoothing 0.5), served like the others. "
                "A classifier is worth using where it beats it.", ""]
    else:
        out += [f"Moses's own model (`{BASELINE_FAMILY}`) was not among the families of this run: "
                "add it to --families for the baseline row.", ""]
    for direction in run["directions"]:
        out += [f"## {direction}: {DIRECTION_MEANING.get(direction, direction)}", ""]
        per_direction = [{**row, **row["directions"][direction]} for row in rows]
        out += [study_table(per_direction, run["classes"], baseline=BASELINE_FAMILY), ""]
    if len(run["directions"]) == 1:
        out += [f"`{run['moses_type']}` has one direction, so one table.", ""]
    note = demo_note(run)
    if note:
        out += [note, ""]
    out_dir = Path(run["models_root"]).parent
    out += ["Columns:", "", column_notes(run["classes"]), "", "## Models", "",
            f"Paths are relative to `{out_dir}` (the --out folder, where report.md is).", "",
            "| family | served as (name, version) | file |", "|---|---|---|"]
    for row in rows:
        published = Path(row["published"])
        out.append(f"| {row['family']} | {published.parent.parent.name}, {published.parent.name} | "
                   f"`{_relative(published, out_dir)}` |")
    out += ["", f"Moses's lexicalized table: `{_relative(Path(run['table']), out_dir)}`", "", "## Next", "",
            "Serve the models:", "", f"    {run['serve']}", "",
            "and point Moses's ExternalReordering feature at one of them (docs/moses.md), in moses.ini:", "",
            "    [feature]", f"    {run['moses_ini_line']}", "",
            "    [distortion-limit]", f"    {run['distortion_limit']}", "",
            run["distortion_advice"], ""]
    return "\n".join(out)


def demo_note(run: dict[str, Any]) -> str | None:
    """On the embedded corpus: what its figures are worth (a demo's, not a model's)."""
    if "embedded_corpus" not in run or Path(run["corpus"]).resolve() != Path(run["embedded_corpus"]).resolve():
        return None
    return (f"This is the embedded {run['sentences']:,}-pair demo corpus: its figures show the pipeline "
            "works, not what a model is worth. On all 50k ja-en pairs of the Tanaka corpus svm S6 "
            "reaches 79.5% against the table's 67.6% (README, \"Results on real text\"; "
            "benchmarks/RESULTS.md).")


def terminal_summary(run: dict[str, Any], report_path: Path) -> str:
    """What `pipeline` prints when it is done, for a person at a terminal: each family's held-out
    accuracy and log-loss per direction (the wide tables are in the report file), then what
    decoding needs (serve command, moses.ini lines, distortion limit), each said once."""
    import textwrap

    rows, directions = run["rows"], run["directions"]
    head = " / ".join(directions)
    table = [("family", f"accuracy ({head})", f"log-loss ({head})", "")]
    for i, row in enumerate(rows):
        summaries = [row["directions"][d]["all"] for d in directions]
        table.append((row["family"], " / ".join(f"{_pct(s['accuracy'])}%" for s in summaries),
                      " / ".join(f"{s['log_loss']:.3f}" for s in summaries),
                      "the moses.ini line below decodes with it" if i == 0 else
                      "Moses's own table, the baseline" if row["family"] == BASELINE_FAMILY else ""))
    widths = [max(len(r[c]) for r in table) for c in range(3)]
    wrap = textwrap.TextWrapper(width=100, break_on_hyphens=False)
    out = wrap.wrap(f"{run['sentences']:,} sentence pairs, {run['moses_type']}; held out: "
                    f"{run['split']['description']}.") + [""]
    out += ["  ".join(cell.ljust(w) for cell, w in zip(r[:3], widths)) + ("  " + r[3] if r[3] else "")
            for r in table]
    note = demo_note(run)
    if note:
        out += ["", *wrap.wrap(note)]
    published = Path(rows[0]["published"])
    name, version = published.parent.parent.name, published.parent.name
    out += ["", f"Every column (precision, recall and F1 per class; seen and unseen pairs): {report_path}", "",
            "Serve the models:", f"    {run['serve']}",
            "Decode with them: in moses.ini (docs/moses.md), replace the LexicalReordering line by", "",
            "    [feature]", f"    {run['moses_ini_line']}", "    [distortion-limit]", f"    {run['distortion_limit']}", "",
            *wrap.wrap(f"{name} was published as version {version}: add version={version} to the line to pin "
                       "it while tuning (a later pipeline run publishes the next version)."),
            *wrap.wrap(run["distortion_advice"])]
    return "\n".join(line.rstrip() for line in out) + "\n"


def _relative(path: Path, base: Path) -> Path:
    try:
        return path.resolve().relative_to(base.resolve())
    except ValueError:
        return path


def training_sentences(run: dict[str, Any]) -> list[str]:
    """Which sentences the table and every evaluated and published model were trained on
    (issue 34: a user comparing the table with a served model must know if they saw the
    same ones). Markdown lines of pipeline_report."""
    n = run["sentences"]
    out_dir = Path(run["models_root"]).parent
    out = ["Which sentences (numbered in corpus order) each file was trained on (paths relative to the "
           "--out folder):", "", "| file | trained on |", "|---|---|",
           f"| Moses's lexicalized table `{_relative(Path(run['table']), out_dir)}` | all {n:,} |"]
    for row in run["rows"]:
        published = _relative(Path(row["published"]), out_dir)
        served_as = f"served as {published.parent.parent.name}, version {published.parent.name}"
        if run["refit"]:
            out.append(f"| {row['family']}, evaluated (the figures below; not served) "
                       f"`{_relative(Path(row['evaluated']), out_dir)}` | "
                       f"{sentences_seen(row['evaluated_sentences'], n)} |")
            out.append(f"| {row['family']}, refit and published ({served_as}) `{published}` | "
                       f"{sentences_seen(row['published_sentences'], n)} |")
        else:
            out.append(f"| {row['family']}, evaluated and published ({served_as}) `{published}` | "
                       f"{sentences_seen(row['published_sentences'], n)} |")
    if not run["refit"]:
        out += ["", "The published models did not see every sentence the table counts: run without "
                    "--no-refit for models trained on the same sentences as the table."]
    return out


def sentences_seen(sentences: dict[str, int], total: int) -> str:
    """Which sentences (1-based, corpus order) a model was trained on, from train's
    {fit, calibration, heldout} counts: fit first, calibration next, the held-out tail last
    (training.api.train.SentenceSplit)."""
    fit, calibration = sentences["fit"], sentences["calibration"]
    seen = fit + calibration
    text = f"1–{seen:,} of {total:,}" if seen < total else f"all {total:,}"
    if calibration:
        text += f" (fit 1–{fit:,}, calibration {fit + 1:,}–{seen:,})"
    return text + (f"; not {seen + 1:,}–{total:,}" if seen < total else "")


def runs_index(runs: list[tuple[str, str, list[str]]]) -> str:
    """The index of every pipeline run in a directory: (report file name, start time, families)
    in the order the runs were made; printed newest first."""
    out = ["# Pipeline runs", "", "Newest first; each run's full report is its own file.", "",
           "| started | families | report |", "|---|---|---|"]
    for name, started, families in reversed(runs):
        out.append(f"| {started} | {', '.join(families)} | [{name}](reports/{name}) |")
    return "\n".join(out) + "\n"
