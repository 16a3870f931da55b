"""Where the classifier and Moses's table disagree on held-out sentences (issue 16).

The translation study (benchmarks/translation.py) compares Moses's LexicalReordering
table with ExternalReordering serving a classifier for the same type. This script takes
sentence pairs held out of both, and for every phrase pair of them and each direction
compares the two models' orientation predictions with the gold class:

1. the held-out pairs (the last --heldout lines of CORPUS/train.{ja,en,align}) are
   extracted with this project's extractor (`extract`, Moses's exact orientations) into
   a temporary example store;
2. both models score every example as the server scores it (PairBatch ->
   LoadedModel.predict_proba, as training/eval/evaluate.py does): the classifier
   (--model) and the table, i.e. the `lexical` family trained on the same training store
   (--table-model; it is Moses's table row for a pair the table has, the class prior
   for one it lacks, what moses_identity.py serves with default-scores). With
   --moses-table the table's rows are checked against Moses's own reordering table
   (same pairs found, same probabilities to its 6 printed digits);
3. per direction, slice (all; seen = the pair is in the table; unseen; with
   --phrase-table the pairs in the decoder's phrase table; with --train-store the seen
   pairs by how often they occur in training) and gold class: support,
   each model's recall, how often their argmax differs and who is right then, the mean
   probability of the gold class and the log-loss (the decoder adds log-probabilities).

    python3 benchmarks/disagreement.py --corpus ../shared/data/ja-en --heldout 5000 \
        --model /work/mt/ja-en/models/svm-S6/1/model.mrw --table-model lexical.mrw \
        --moses-table /work/mt/ja-en/tm/model/reordering-table.hier-msd-bidirectional-fe.gz \
        --phrase-table /work/mt/ja-en/tm/model/phrase-table.gz --train-store STORE --json disagreement.json

Prints Markdown tables (per class; by training frequency); --json writes the report with the confusion matrices. It
measures; it trains nothing and asserts nothing.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
from scipy.stats import entropy

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))      # this checkout's training/, whatever is installed

from training.cli import main as cli_main                       # noqa: E402
from training.features.batch import pair_slice                  # noqa: E402
from training.features.matrix import SUB_BATCH_PAIRS            # noqa: E402
from training.features.templates import extract_keys, pair_keys  # noqa: E402
from training.modelfile.model import LoadedModel, load_model    # noqa: E402
from training.eval.evaluate import example_probabilities       # noqa: E402
from training.moses.types import MosesType, class_labels        # noqa: E402
from training.store.examples import ExampleStore                # noqa: E402

SUFFIXES = ("ja", "en", "align")   # source, target, alignment (as translation.py: ja -> en)
SEP = " ||| "


def heldout_store(corpus: Path, n: int, extract_model: str, work: Path, pairs: Path | None = None) -> Path:
    """Example store of the last `n` lines of corpus/train.* (the study's held-out pairs), or
    of every line of PAIRS.{ja,en,align} (a test set of its own, e.g. whole articles)."""
    for suffix in SUFFIXES:
        if pairs is not None:
            (work / f"heldout.{suffix}").write_bytes(pairs.with_name(f"{pairs.name}.{suffix}").read_bytes())
            continue
        with open(corpus / f"train.{suffix}", "rb") as f:
            lines = f.readlines()          # on b"\n" only: a token may hold a b"\r"
        (work / f"heldout.{suffix}").write_bytes(b"".join(lines[-n:]))
    out = work / "store"
    code = cli_main(["extract", "--src", str(work / "heldout.ja"), "--tgt", str(work / "heldout.en"),
                     "--align", str(work / "heldout.align"), "--out", str(out), "--model", extract_model,
                     "--jobs", "1", "--quiet"])
    if code != 0:
        raise SystemExit(f"extract failed ({code})")
    return out


def pair_strings(store: ExampleStore, chunk) -> list[str]:
    """`src ||| tgt` of each example of a chunk, as Moses's tables key their rows."""
    s, sv, tv = store.sentences, store.src_vocab, store.tgt_vocab
    out = []
    for sent, a, b, c, d in zip(chunk.sentence, chunk.src_start, chunk.src_end, chunk.tgt_start, chunk.tgt_end):
        src = s["src_ids"][s["src_offsets"][sent] + a:s["src_offsets"][sent] + b]
        tgt = s["tgt_ids"][s["tgt_offsets"][sent] + c:s["tgt_offsets"][sent] + d]
        out.append(" ".join(sv[i] for i in src) + SEP + " ".join(tv[i] for i in tgt))
    return out


def table_rows(path: Path, wanted: set[str]) -> dict[str, str]:
    """The rest of the line (scores ...) of each `src ||| tgt` of `wanted` that a Moses
    phrase or reordering table (text, .gz or not) has."""
    rows = {}
    with (gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else open(path, encoding="utf-8")) as f:
        for line in f:
            cut = line.find(SEP, line.find(SEP) + len(SEP))
            key = line[:cut]
            if key in wanted:
                rows[key] = line[cut + len(SEP):]
    return rows


def score(store: ExampleStore, model: LoadedModel, table: LoadedModel) -> dict[str, np.ndarray]:
    """Gold labels, both models' probabilities and whether the table has the pair, per example."""
    mtype = MosesType.parse(model.moses_type)
    parts: dict[str, list] = {"model": [], "table": [], "seen": [], "keys": [], "strings": [],
                              **{d: [] for d in mtype.directions}}
    for chunk in store.iter_chunks():
        for d in mtype.directions:
            parts[d].append(class_labels(store, mtype, d, chunk.labels).astype(np.int64))
        parts["strings"] += pair_strings(store, chunk)
        for a in range(0, chunk.batch.n_pairs, SUB_BATCH_PAIRS):
            batch = pair_slice(chunk.batch, a, min(a + SUB_BATCH_PAIRS, chunk.batch.n_pairs))
            parts["model"].append(example_probabilities(model, store, chunk, a, a + batch.n_pairs))
            indptr, keys = extract_keys(batch, table.spec)
            parts["table"].append(table.predict_proba_keys(indptr, keys))
            parts["seen"].append(table.scores(indptr, keys)[1] > 0)   # its pair key is a table row
            parts["keys"].append(pair_keys(batch))
    return {k: np.concatenate(v) if k != "strings" else v for k, v in parts.items()}


def training_counts(train_store: Path, keys: np.ndarray) -> np.ndarray:
    """How often each pair (its identity key) occurs among the training store's examples:
    the N of its table row."""
    train = ExampleStore.open(train_store)
    seen, counts = np.unique(np.concatenate([pair_keys(c.batch) for c in train.iter_chunks()]), return_counts=True)
    pos = np.minimum(np.searchsorted(seen, keys), seen.size - 1)
    return np.where(seen[pos] == keys, counts[pos], 0)


FREQUENCY_BINS = ((1, 1), (2, 9), (10, 99), (100, None))   # training occurrences of a seen pair


def moses_check(scored: dict, moses_table: Path) -> dict:
    """Do Moses's own table rows match the served table: same pairs found, same numbers?"""
    strings = scored["strings"]
    rows = table_rows(moses_table, set(strings))
    found = np.array([s in rows for s in strings])
    diff = 0.0
    if found.any():
        moses = np.array([[float(v) for v in rows[s].split()] for s, f in zip(strings, found) if f])
        diff = float(np.max(np.abs(moses - scored["table"][found]) / np.maximum(moses, 1e-6)))
    return {"table": str(moses_table), "examples_found": int(found.sum()),
            "examples_seen_by_served_table": int(scored["seen"].sum()),
            "found_differs_from_seen": int(np.count_nonzero(found != scored["seen"])),
            "max_relative_difference": diff}


def prior_log_loss(slice_summary: dict) -> float:
    """The log-loss of a model that knows only how often each gold class occurs in the slice
    (the entropy of its class shares): the point from which the table's and the model's gains
    are measured, so a model's lead can be read as a share of what the table itself adds."""
    return float(entropy([r["n"] for r in slice_summary["classes"].values()]))


def summary(y: np.ndarray, p_table: np.ndarray, p_model: np.ndarray, classes: tuple[str, ...]) -> dict:
    """Per gold class and overall: support, recalls, disagreements and who is right in
    them, mean probability of the gold class and log-loss, for one direction and slice."""
    t, m = p_table.argmax(axis=1), p_model.argmax(axis=1)
    idx = np.arange(y.size)
    pt, pm = p_table[idx, y].astype(np.float64), p_model[idx, y].astype(np.float64)
    K = len(classes)

    def row(mask: np.ndarray) -> dict:
        n = int(mask.sum())
        dis = mask & (t != m)
        return {
            "n": n,
            "table_recall": float(np.mean(t[mask] == y[mask])) if n else None,
            "model_recall": float(np.mean(m[mask] == y[mask])) if n else None,
            "disagree": int(dis.sum()),
            "table_right": int(np.count_nonzero(dis & (t == y))),
            "model_right": int(np.count_nonzero(dis & (m == y))),
            "both_wrong": int(np.count_nonzero(dis & (t != y) & (m != y))),
            "table_p_gold": float(pt[mask].mean()) if n else None,
            "model_p_gold": float(pm[mask].mean()) if n else None,
            "table_log_loss": float(-np.log(np.maximum(pt[mask], 1e-300)).mean()) if n else None,
            "model_log_loss": float(-np.log(np.maximum(pm[mask], 1e-300)).mean()) if n else None,
        }

    return {
        "classes": {c: row(y == k) for k, c in enumerate(classes)},
        "all": row(np.ones(y.size, dtype=bool)),
        "confusion_table": np.bincount(y * K + t, minlength=K * K).reshape(K, K).tolist(),  # [gold, predicted]
        "confusion_model": np.bincount(y * K + m, minlength=K * K).reshape(K, K).tolist(),
    }


def disagreement(store_path: Path, model_path: Path, table_path: Path, moses_table: Path | None = None,
                 phrase_table: Path | None = None, train_store: Path | None = None) -> dict:
    """The report (JSON-ready) for the held-out store's every example and direction."""
    model, table = load_model(model_path), load_model(table_path)
    if table.family != "lexical" or table.moses_type != model.moses_type:
        raise SystemExit(f"--table-model must be a lexical model of {model.moses_type} "
                         f"(it is {table.family} {table.moses_type})")
    store = ExampleStore.open(store_path)
    mtype = MosesType.parse(model.moses_type)
    scored = score(store, model, table)
    slices = {"all": np.ones(scored["seen"].size, dtype=bool), "seen": scored["seen"], "unseen": ~scored["seen"]}
    report = {"store": str(store_path), "model": str(model_path), "table_model": str(table_path),
              "type": model.moses_type, "family": model.family, "features": model.metadata.get("features"),
              "sentences": store.n_sentences, "examples": int(slices["all"].sum()),
              "distinct_pairs": len(set(scored["strings"]))}
    if moses_table is not None:
        report["moses_table_check"] = moses_check(scored, moses_table)
    if phrase_table is not None:
        rows = table_rows(phrase_table, set(scored["strings"]))
        slices["phrase-table"] = np.array([s in rows for s in scored["strings"]])
        report["phrase_table_examples"] = int(slices["phrase-table"].sum())
        report["phrase_table_is_seen"] = bool(np.array_equal(slices["phrase-table"], slices["seen"]))
        report["phrase_table"] = str(phrase_table)
    if train_store is not None:
        counts = training_counts(train_store, scored["keys"])
        report["train_store"] = str(train_store)
        report["counted_differs_from_seen"] = int(np.count_nonzero((counts > 0) != scored["seen"]))
        for lo, hi in FREQUENCY_BINS:
            slices[f"seen {lo}x" if lo == hi else f"seen {lo}-{hi}x" if hi else f"seen {lo}x+"] = (
                (counts >= lo) & (counts <= (hi or counts.max())))
    K = len(mtype.classes)
    report["directions"] = {
        d: {name: summary(scored[d][mask], scored["table"][mask, i * K:(i + 1) * K],
                          scored["model"][mask, i * K:(i + 1) * K], mtype.classes)
            for name, mask in slices.items()}
        for i, d in enumerate(mtype.directions)}
    return report


def pct(x, n) -> str:
    return f"{100 * x / n:.1f}" if n else ""


def markdown(report: dict) -> str:
    """Per gold class for the slices all / seen / unseen (/ phrase-table unless it is the
    seen slice), then one line per direction and training frequency of the pair."""
    head = ("| direction | slice | gold class | n | share % | recall table | recall model | disagree % "
            "| of which table right % | model right % | both wrong % | p(gold) table | p(gold) model "
            "| log-loss table | log-loss model |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for d, by_slice in report["directions"].items():
        for name, s in by_slice.items():
            if name.startswith("seen ") or (name == "phrase-table" and report.get("phrase_table_is_seen")):
                continue
            total = s["all"]["n"]
            for cls, r in [*s["classes"].items(), ("all", s["all"])]:
                n, dis = r["n"], r["disagree"]
                if not n:
                    continue
                lines.append(
                    f"| {d} | {name} | {cls} | {n:,} | {pct(n, total)} | {100 * r['table_recall']:.1f} "
                    f"| {100 * r['model_recall']:.1f} | {pct(dis, n)} | {pct(r['table_right'], dis)} "
                    f"| {pct(r['model_right'], dis)} | {pct(r['both_wrong'], dis)} | {r['table_p_gold']:.3f} "
                    f"| {r['model_p_gold']:.3f} | {r['table_log_loss']:.3f} | {r['model_log_loss']:.3f} |")
    bins = [name for name in next(iter(report["directions"].values())) if name.startswith("seen ")]
    if bins:
        classes = list(next(iter(report["directions"].values()))["all"]["classes"])
        head = ("| direction | training count of the pair | n | accuracy table | accuracy model | "
                + " | ".join(f"recall {c} table / model" for c in classes)
                + " | disagree % | log-loss table | log-loss model |")
        lines += ["", head, "|" + "---|" * (head.count("|") - 1)]
        for d, by_slice in report["directions"].items():
            for name in bins:
                s = by_slice[name]
                r = s["all"]
                if not r["n"]:
                    continue
                recalls = " | ".join(
                    f"{100 * c['table_recall']:.1f} / {100 * c['model_recall']:.1f}" if c["n"] else ""
                    for c in s["classes"].values())
                lines.append(f"| {d} | {name[5:]} | {r['n']:,} | {100 * r['table_recall']:.1f} "
                             f"| {100 * r['model_recall']:.1f} | {recalls} | {pct(r['disagree'], r['n'])} "
                             f"| {r['table_log_loss']:.3f} | {r['model_log_loss']:.3f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "data" / "ja-en",
                    help="directory of train.{ja,en,align} (default ../shared/data/ja-en)")
    ap.add_argument("--heldout", type=int, default=5000, help="its last N lines are the held-out pairs")
    ap.add_argument("--pairs", type=Path, metavar="PREFIX",
                    help="score every line of PREFIX.{ja,en,align} instead (e.g. a test set of whole articles "
                         "with its gold alignment); --corpus and --heldout are then not read")
    ap.add_argument("--model", type=Path, required=True, help="the classifier's weight file")
    ap.add_argument("--table-model", type=Path, required=True,
                    help="`train --family lexical --heldout-fraction 0` on the same training store")
    ap.add_argument("--moses-table", type=Path, help="Moses's reordering table to check the served table against")
    ap.add_argument("--phrase-table", type=Path, help="the decoder's phrase table (adds the phrase-table slice)")
    ap.add_argument("--train-store", type=Path,
                    help="the training store (adds slices by how often the pair occurs in training)")
    ap.add_argument("--json", type=Path, help="write the report here")
    args = ap.parse_args()

    extract_model = MosesType.parse(load_model(args.model).moses_type).extract_model
    with tempfile.TemporaryDirectory(prefix="disagree-") as tmp:
        store = heldout_store(args.corpus, args.heldout, extract_model, Path(tmp), args.pairs)
        report = disagreement(store, args.model, args.table_model, args.moses_table, args.phrase_table,
                              args.train_store)
    report.update({"pairs": str(args.pairs)} if args.pairs else {"corpus": str(args.corpus),
                                                                  "heldout_lines": args.heldout})
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(f"{report['sentences']:,} {'test' if args.pairs else 'held-out'} sentence pairs, {report['examples']:,} phrase pairs "
          f"({report['distinct_pairs']:,} distinct); model {report['family']} {report['features']}, "
          f"type {report['type']}")
    if "moses_table_check" in report:
        print("Moses table check: " + json.dumps(report["moses_table_check"]))
    if "phrase_table" in report:
        print(f"in the phrase table: {report['phrase_table_examples']:,} phrase pairs"
              + (" (exactly the seen ones: the phrase-table slice is the seen slice)"
                 if report["phrase_table_is_seen"] else ""))
    print()
    print(markdown(report))


if __name__ == "__main__":
    main()
