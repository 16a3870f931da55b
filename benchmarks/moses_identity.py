"""The identity check: Moses's own LexicalReordering on a table vs ExternalReordering
serving the `lexical` family trained from the same store, on the ja-en test set, for
every reordering type; prints the number of differing translations per type (goal 0).

For each type T: `moses-reorder lexical --type T` writes the table and `moses-reorder
train --family lexical --type T --heldout-fraction 0` the model (both from one example
store); one `moses-reorder serve` serves every model; two moses.ini files differ only in
the reordering line (LexicalReordering path=table vs ExternalReordering model=T, the
latter spelled differently, e.g. `fe-bidirectional-msd-allff` for
`wbe-msd-bidirectional-fe`, so the schema comparison is exercised too). Both lines carry
default-scores = the served model's row for an unseen pair (the class prior): Moses gives
a pair missing from its table (the OOV options) the default scores, the lexical family
gives it the prior, so with this setting the two configurations mean the same model.

    python benchmarks/moses_identity.py --moses-dir INST --store STORE \
        --phrase-table TM/model/phrase-table.gz --lm lm.kenlm --work WORK [--types T ...]
    python benchmarks/moses_identity.py ... --binary moses2 --types hier-msd-bidirectional-fe ...

With `--binary moses2` both sides run moses2. Moses2's LexicalReordering has no
default-scores and reads only `-fe` tables, so: `-f` types are skipped, neither line has
default-scores, and the LexicalReordering side reads the table plus one prior row per
unknown word of the test set (`moses_system.complete_table`), which again makes the two
configurations the same model.

Results accumulate in WORK/identity.jsonl (moses2: WORK/identity-moses2.jsonl; a rerun
skips the types done).
What it must not do: build Moses, the phrase table or the LM (MOSES-NOTES.md section 8).
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from moses_system import (ROOT, System, compare, complete_table, decode, external_line, filter_table,
                          lexical_line, moses_binary, other_spelling, served_prior, source_ngrams)
from server.local import LocalServer  # noqa: E402

TEST = ROOT.parent / "shared" / "data" / "ja-en" / "test.ja"
ALL_TYPES = [f"{k}-{o}-{d}-{lang}" for k, o, d, lang in itertools.product(
    ("wbe", "phrase", "hier"), ("msd", "mslr", "monotonicity", "leftright"), ("backward", "forward", "bidirectional"),
    ("fe", "f"))]


def cli(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "training.cli", *args, "--quiet"], cwd=ROOT, check=True)


def prepare(store: Path, work: Path, moses_type: str, grams: set[str]) -> Path:
    """The type's table (filtered to the test set) and its lexical model in WORK/repo."""
    table = work / "tables" / f"{moses_type}.gz"
    filtered = work / "tables" / f"{moses_type}.test.gz"
    model = work / "repo" / moses_type / "1" / "model.mrw"
    table.parent.mkdir(parents=True, exist_ok=True)
    if not filtered.is_file():
        if not table.is_file():
            cli("lexical", "--store", str(store), "--type", moses_type, "--out", str(table))
        filter_table(table, filtered, grams)
        table.unlink()
    if not model.is_file():
        tmp = work / "repo" / f".tmp-{moses_type}"
        (tmp / "1").mkdir(parents=True, exist_ok=True)
        cli("train", "--family", "lexical", "--type", moses_type, "--store", str(store),
            "--heldout-fraction", "0", "--out", str(tmp / "1" / "model.mrw"))
        tmp.rename(model.parent.parent)
    return filtered


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--moses-dir", help="Moses install prefix with bin/moses (default $MOSES_DIR)")
    ap.add_argument("--binary", choices=("moses", "moses2"), default="moses",
                    help="the decoder under --moses-dir/bin for both sides (default moses)")
    ap.add_argument("--store", type=Path, required=True, help="example store with labels of every kind "
                    "(mslr labels give msd, monotonicity and leftright too) "
                    "(extract --model wbe-mslr --model phrase-mslr --model hier-mslr)")
    ap.add_argument("--phrase-table", type=Path, required=True)
    ap.add_argument("--lm", type=Path, required=True)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--test", type=Path, default=TEST)
    ap.add_argument("--sentences", type=int, default=500)
    ap.add_argument("--types", nargs="*", default=ALL_TYPES)
    ap.add_argument("--moses-flags", default="-s 10", help="extra decoder flags for both runs (default: -s 10)")
    ap.add_argument("--table-limit", type=int, default=10, help="phrase-table table-limit (default 10)")
    ap.add_argument("--side", choices=("both", "lexical", "external"), default="both",
                    help="decode one side only (its outputs are kept in WORK/out; a later run compares)")
    ap.add_argument("--lexical-moses-dir", help="another Moses build for the LexicalReordering side "
                    "(its LexicalReordering is Moses's own, untouched by moses_ff)")
    ap.add_argument("--prepare-only", action="store_true", help="write tables and models, decode nothing")
    args = ap.parse_args()

    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    src = work / f"test.{args.sentences}.ja"
    lines = args.test.read_text(encoding="utf-8").splitlines()[:args.sentences]
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    grams = source_ngrams(lines)
    moses2 = args.binary == "moses2"
    if moses2:
        skipped = [t for t in args.types if not t.endswith("-fe")]
        if skipped:
            print(f"skipped (Moses2's LexicalReordering reads -fe tables only): {' '.join(skipped)}", flush=True)
        args.types = [t for t in args.types if t.endswith("-fe")]
    tables = {t: prepare(args.store, work, t, grams) for t in args.types}
    if args.prepare_only:
        return
    moses = moses_binary(args.moses_dir, args.binary)
    pt = work / "phrase-table.test.gz"
    filter_table(args.phrase_table, pt, grams)
    system = System(pt, args.lm, table_limit=args.table_limit)
    results = work / ("identity-moses2.jsonl" if moses2 else "identity.jsonl")
    done = {json.loads(x)["type"] for x in results.read_text().splitlines()} if results.is_file() else set()
    flags = tuple(args.moses_flags.split())

    outputs = work / "out"
    outputs.mkdir(exist_ok=True)
    lexical_moses = moses_binary(args.lexical_moses_dir, args.binary) if args.lexical_moses_dir else moses
    tag = "moses2." if moses2 else ""  # keeps moses's file names as they were

    def run_side(side: str, moses_type: str, binary, ini: Path) -> dict:
        """Decode once per (side, type); the output and its timing are kept in WORK/out."""
        out, meta = outputs / f"{tag}{side}.{moses_type}.txt", outputs / f"{tag}{side}.{moses_type}.json"
        if not meta.is_file():
            run = decode(binary, ini, src, 1, flags)
            if run.returncode != 0 or len(run.lines) != len(lines):
                raise SystemExit(f"{moses_type}: {side} run failed ({run.returncode}, {len(run.lines)} lines):\n"
                                 f"{run.stderr[-3000:]}")
            out.write_text("\n".join(run.lines) + "\n", encoding="utf-8")
            meta.write_text(json.dumps({"decode_s": round(run.decode_seconds, 2), "wall_s": round(run.seconds, 2),
                                        "binary": str(binary), "flags": args.moses_flags}))
        return {"lines": out.read_text(encoding="utf-8").splitlines(), **json.loads(meta.read_text())}

    sides = ("lexical", "external") if args.side == "both" else (args.side,)
    with LocalServer(work / "repo", log=work / "serve.log") as server:
        for moses_type in args.types:
            if moses_type in done:
                continue
            prior = served_prior(server.address, moses_type)
            defaults = ",".join(f"{p:.9g}" for p in prior)
            spelled = other_spelling(moses_type)
            table = tables[moses_type]
            if moses2:
                defaults = None
                table = work / "tables" / f"{moses_type}.moses2.test.gz"
                if not table.is_file():
                    complete_table(tables[moses_type], table, lines, pt, prior)
            inis = {"lexical": system.ini(work / f"{tag}lex.{moses_type}.ini",
                                          lexical_line(moses_type, table, defaults), len(prior)),
                    "external": system.ini(work / f"{tag}ext.{moses_type}.ini",
                                           external_line(spelled, server.address, moses_type, defaults), len(prior))}
            binaries = {"lexical": lexical_moses, "external": moses}
            with ThreadPoolExecutor(len(sides)) as pool:
                got = dict(zip(sides, pool.map(lambda side: run_side(side, moses_type, binaries[side], inis[side]), sides)))
            if len(got) < 2:
                print(f"{moses_type}: {sides[0]} done", flush=True)
                continue
            lex_run, ext_run = got["lexical"], got["external"]
            differ = compare(lex_run["lines"], ext_run["lines"])
            row = {"binary": args.binary, "type": moses_type, "external_type": spelled, "sentences": len(lines), "differ": len(differ),
                   "differing_lines": differ[:20], "lexical_decode_s": lex_run["decode_s"],
                   "external_decode_s": ext_run["decode_s"], "lexical_wall_s": lex_run["wall_s"],
                   "external_wall_s": ext_run["wall_s"], "flags": args.moses_flags,
                   "at": time.strftime("%H:%M:%S", time.gmtime())}
            with open(results, "a") as f:
                f.write(json.dumps(row) + "\n")
            # moses2 prints no per-sentence "Translation took": its process wall time instead
            clock = "wall" if moses2 else "decode"
            print(f"{moses_type:32s} as {spelled:34s} differ {len(differ):3d}/{len(lines)}  "
                  f"{clock} lex {lex_run[clock + '_s']:6.1f} s ext {ext_run[clock + '_s']:6.1f} s", flush=True)

    if not results.is_file():
        return
    rows = [json.loads(x) for x in results.read_text().splitlines()]
    total = sum(r["differ"] for r in rows)
    print(f"{len(rows)} types, {sum(r['sentences'] for r in rows)} sentence pairs compared, {total} differ")


if __name__ == "__main__":
    main()
