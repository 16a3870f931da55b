"""What a classifier beside Moses's table costs the decoder, and what one feature saves
(issue 29): moses2 decodes of the same test sentences, alternating, with

  lexical      Moses2's LexicalReordering alone, a tuned run's weights;
  table twice  the same table as two LexicalReordering features, each with half the weights
               (the same scores and translations: only the second reordering state differs);
  two          the table's LexicalReordering beside ExternalReordering (the served model),
               a beside run's tuned weights, as translation.py decoded it before path=;
  one          ExternalReordering with path=, the table's scores and the model's in one
               feature and one state: the same weights, the table's first.

Prints each configuration's decode time per sentence, the median over rounds, as wall
(Moses2's "Decoding took" minus its "Loaded" clock: the table is read once per feature, so
loading is apart) and as CPU (the decode's CPU time minus that of loading the same ini with
no input: on a loaded machine the wall follows the load, the CPU much less); its ratio to
`lexical` (the median of same-round ratios); and whether its translations equal those of
the configuration it must reproduce (table twice = lexical, one = two).

    python benchmarks/beside_cost.py --moses /work/moses/inst --work /work/mt/ja-en-kyoto \
        --lexical-run lexical-dl12/pro1 --model svm-S6 \
        --beside-weights benchmarks/translation-runs/ja-en-kyoto-47a432445d96-heldout0/svm-S6+lexical-dl12/mert1/weights.ini \
        --sentences 100 --rounds 2

WORK is translation.py's work directory for the corpus (filtered test tables, the Lexical
run's test.ini and tuned.ini, WORK/models). The phrase and reordering tables are filtered
again to the N sentences (WORK/beside-cost), so that a decode loads in seconds and in little
memory beside running tuning jobs. --beside-weights holds the tuned weights of the table
beside a model as two features (a run's tuned.ini, or the record's weights.ini); the server
is started here on a free loopback port.
What it must not do: tune, or build tables or models.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from pathlib import Path

from moses_system import decode, external_line, filter_table, load_seconds, source_ngrams
from server.local import LocalServer  # noqa: E402
from translation import beside_as_one_weights, feature_value, read_ini, weight_values, write_ini

DECODING = re.compile(r"Decoding took ([0-9.]+)")


def variant(base: dict[str, list[str]], features: list[str], weight_lines: list[str], out: Path) -> Path:
    """BASE (a decoded run's test ini) with its reordering features and [weight] replaced."""
    sections = {k: list(v) for k, v in base.items()}
    kept = [line for line in sections["feature"] if not line.startswith("LexicalReordering ")]
    sections["feature"] = kept + features
    sections["weight"] = weight_lines
    sections.pop("weight-file", None)
    write_ini(out, sections)
    return out


def with_path(line: str, path: Path) -> str:
    return " ".join(f"path={path}" if kv.startswith("path=") else kv for kv in line.split())


def filtered_base(work: Path, lexical_run: str, lines: list[str], out: Path) -> dict[str, list[str]]:
    """The Lexical run's test ini with its phrase and reordering tables filtered to LINES."""
    base = read_ini(work / "runs" / lexical_run / "test.ini")
    grams = source_ngrams(lines)
    for i, line in enumerate(base["feature"]):
        if line.startswith(("PhraseDictionaryMemory ", "LexicalReordering ")):
            dst = out / f"{line.split()[0]}.{len(lines)}.gz"
            filter_table(Path(feature_value(line, "path")), dst, grams)
            base["feature"][i] = with_path(line, dst)
    return base


def inis(base: dict[str, list[str]], tuned_ini: Path, beside_weights: Path | None, model: str, server: str,
         out: Path) -> dict[str, Path]:
    """The four configurations' inis, from BASE (a Lexical run's test ini) and weights."""
    table = next(line for line in base["feature"] if line.startswith("LexicalReordering "))
    tuned = weight_values(read_ini(tuned_ini)["weight"])
    plain = [f"{k}= {' '.join(v)}" for k, v in tuned.items() if k != "LexicalReordering0"]
    half = " ".join(repr(float(w) / 2) for w in tuned["LexicalReordering0"])
    found = {
        "lexical": variant(base, [table], plain + [f"LexicalReordering0= {' '.join(tuned['LexicalReordering0'])}"],
                           out / "lexical.ini"),
        "table twice": variant(base, [table, table.replace("name=LexicalReordering0", "name=LexicalReordering1")],
                               plain + [f"LexicalReordering0= {half}", f"LexicalReordering1= {half}"],
                               out / "twice.ini"),
    }
    if beside_weights:
        moses_type = feature_value(table, "type")
        beside = read_ini(beside_weights)["weight"]
        external = external_line(moses_type, server, model, name="ExternalReordering0", extra="version=1")
        one = external_line(moses_type, server, model, name="ExternalReordering0", n=12,
                            extra=f"version=1 path={feature_value(table, 'path')}")
        found["two"] = variant(base, [table, external], beside, out / "two.ini")
        found["one"] = variant(base, [one], beside_as_one_weights(beside), out / "one.ini")
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--moses", type=Path, required=True, help="Moses install with bin/moses2 (ExternalReordering)")
    ap.add_argument("--work", type=Path, required=True, help="translation.py's work directory")
    ap.add_argument("--lexical-run", required=True, help="SYSTEM/RUN under WORK/runs, decoded (test.ini)")
    ap.add_argument("--beside-weights", type=Path,
                    help="the table beside a model, tuned as two features: tuned.ini, or the record's weights.ini")
    ap.add_argument("--model", default="svm-S6", help="the served model of --beside-weights")
    ap.add_argument("--sentences", type=int, default=100, help="first N test sentences")
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()

    out = a.work / "beside-cost"
    out.mkdir(parents=True, exist_ok=True)
    src = out / f"test.{a.sentences}.ja"
    lines = (a.work / "corpus" / "test.ja").read_text(encoding="utf-8").splitlines()[:a.sentences]
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    server = LocalServer(a.work / "models", log=out / "serve.log").start() if a.beside_weights else None
    try:
        base = filtered_base(a.work, a.lexical_run, lines, out)
        configs = inis(base, a.work / "runs" / a.lexical_run / "tuned.ini", a.beside_weights, a.model,
                       server.address if server else "", out)
        empty = out / "empty.ja"
        empty.write_text("", encoding="utf-8")
        figures: dict[str, dict[str, list[float]]] = {name: {"wall": [], "cpu": []} for name in configs}
        outputs: dict[str, list[str]] = {}
        for r in range(a.rounds):
            for name, ini in configs.items():
                run = decode(a.moses / "bin" / "moses2", ini, src, threads=1, timeout=6 * 3600)
                idle = decode(a.moses / "bin" / "moses2", ini, empty, threads=1, timeout=3600)  # loading alone
                if run.returncode != 0 or idle.returncode != 0:
                    sys.exit(f"{name}: moses2 failed: {(run.stderr + idle.stderr)[-2000:]}")
                loaded = load_seconds(run.stderr)
                wall = (float(DECODING.findall(run.stderr)[-1]) - loaded) / a.sentences
                cpu = (run.cpu_seconds - idle.cpu_seconds) / a.sentences
                figures[name]["wall"].append(wall)
                figures[name]["cpu"].append(cpu)
                outputs.setdefault(name, run.lines)
                print(f"round {r + 1}: {name}: {wall:.3f} s/sent wall, {cpu:.3f} CPU s/sent "
                      f"(loading {loaded:.0f} s)", flush=True)
    finally:
        if server:
            server.stop()
    same = {"table twice": "lexical", "one": "two"}
    print(f"\n{a.sentences} test sentences, moses2 -threads 1, {a.rounds} rounds, alternating; CPU = the "
          "decode's CPU time minus that of loading the same ini with no input\n")
    print("| configuration | wall s/sent | x lexical | CPU s/sent | x lexical | translations |")
    print("|---|---|---|---|---|---|")

    def ratio(name: str, kind: str) -> float:  # the median of same-round ratios
        return statistics.median(x / y for x, y in zip(figures[name][kind], figures["lexical"][kind]))

    for name in configs:
        ref = same.get(name)
        check = "" if ref is None else ("identical to " + ref if outputs[name] == outputs[ref]
                                         else f"{sum(x != y for x, y in zip(outputs[name], outputs[ref]))} differ from {ref}")
        print(f"| {name} | {statistics.median(figures[name]['wall']):.3f} | {ratio(name, 'wall'):.2f} | "
              f"{statistics.median(figures[name]['cpu']):.3f} | {ratio(name, 'cpu'):.2f} | {check} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
