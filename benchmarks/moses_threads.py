"""moses -threads 1 and 2 with Moses's LexicalReordering (a table) and ExternalReordering
(the served `lexical` family of the same table): seconds per sentence, identical output,
Score RPCs in flight.

Runs alternate (lexical t1, external t1, lexical t2, external t2, and again with
--repeat), so load changes on a shared machine hit every configuration alike. Reports,
per configuration, the decoding wall time per sentence (process wall time minus Moses's
own "loaded" clock; the median over repeats), whether
the output equals the -threads 1 output of the same feature and the lexical output, and
for ExternalReordering the number of Score RPCs and the most that ran at once (the
feature's own count, printed at exit with -v 1).

    python benchmarks/moses_threads.py --moses-dir INST --models REPO \
        --type hier-msd-bidirectional-fe --table TABLE.gz --phrase-table PT --lm LM --work WORK

TABLE and the served model REPO/<type>/ come from benchmarks/moses_identity.py. With
`--binary moses2` (Moses2's LexicalReordering has no default-scores) neither line has
default-scores and LexicalReordering reads TABLE plus one prior row per unknown word
(moses_system.complete_table), so both features are the same model there too.
What it must not do: build Moses or tables (MOSES-NOTES.md section 8).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from pathlib import Path

from moses_system import (ROOT, complete_table, decode, external_line, lexical_line, moses_binary,
                          n_scores, served_prior, test_slice)
from server.local import LocalServer  # noqa: E402

TEST = ROOT.parent / "shared" / "data" / "ja-en" / "test.ja"
IN_FLIGHT = re.compile(r": (\d+) Score RPCs for (\d+) sentences, at most (\d+) in flight at once, ([0-9.e+-]+) s of RPC")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--moses-dir")
    ap.add_argument("--binary", default="moses", choices=("moses", "moses2"), help="the decoder (default moses)")
    ap.add_argument("--features", nargs="+", default=["lexical", "external"], choices=("lexical", "external"))
    ap.add_argument("--models", type=Path, required=True)
    ap.add_argument("--type", default="hier-msd-bidirectional-fe", help="also the served model's name")
    ap.add_argument("--table", type=Path, required=True, help="LexicalReordering's table (filtered to the test set)")
    ap.add_argument("--phrase-table", type=Path, required=True)
    ap.add_argument("--lm", type=Path, required=True)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--test", type=Path, default=TEST)
    ap.add_argument("--sentences", type=int, default=500)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--moses-flags", default="-s 10")
    ap.add_argument("--table-limit", type=int, default=10)
    args = ap.parse_args()

    moses = moses_binary(args.moses_dir, args.binary)
    work = args.work
    lines, src, system = test_slice(args.test, args.sentences, work, args.phrase_table, args.lm, args.table_limit)
    flags = tuple(args.moses_flags.split())
    n = n_scores(args.type)

    runs: dict[tuple[str, int], list] = {}
    with LocalServer(args.models, log=work / "serve.log", cache_size=0) as server:
        prior = served_prior(server.address, args.type)
        table, defaults, tag = args.table, ",".join(f"{p:.9g}" for p in prior), ""
        if args.binary == "moses2":
            table, defaults, tag = work / "table.moses2.gz", None, "moses2."
            complete_table(args.table, table, lines, system.phrase_table, prior)
        inis = {"lexical": system.ini(work / f"{tag}lex.ini", lexical_line(args.type, table, defaults), n),
                "external": system.ini(work / f"{tag}ext.ini",
                                       external_line(args.type, server.address, args.type, defaults), n)}
        for _ in range(args.repeat):
            for threads in args.threads:
                for feature in args.features:
                    run = decode(moses, inis[feature], src, threads, flags)
                    if run.returncode != 0 or len(run.lines) != len(lines):
                        raise SystemExit(f"{feature} -threads {threads} failed:\n{run.stderr[-3000:]}")
                    runs.setdefault((feature, threads), []).append(run)
                    print(f"  {feature:8s} -threads {threads}: {run.seconds:7.1f} s wall, "
                          f"{run.decode_wall:7.1f} s after loading, {run.cpu_seconds:7.1f} s CPU "
                          f"({run.cpu_seconds / run.seconds:.2f} cores busy on average)", flush=True)

    first = {f: runs[(f, args.threads[0])][0].lines for f in args.features}
    rows = []
    print(f"\n{args.sentences} ja-en test sentences, {args.type}, {args.binary} {' '.join(flags)}, "
          f"table-limit {args.table_limit}, repeats {args.repeat}")
    print("feature   threads  s/sentence (median)  speed-up  same as t1  same as lexical  RPCs  max in flight  RPC s")
    for (feature, threads), done in runs.items():
        per_sentence = statistics.median(r.decode_wall for r in done) / len(lines)
        base = statistics.median(r.decode_wall for r in runs[(feature, args.threads[0])]) / len(lines)
        same_t1 = all(r.lines == first[feature] for r in done)
        same_lex = all(r.lines == first["lexical"] for r in done) if "lexical" in first else None
        m = IN_FLIGHT.search(done[-1].stderr) if feature == "external" else None
        rpcs, most, rpc_s = (m.group(1), m.group(3), f"{float(m.group(4)):.2f}") if m else ("-", "-", "-")
        rows.append({"binary": args.binary, "feature": feature, "threads": threads, "s_per_sentence": per_sentence, "speedup": base / per_sentence,
                     "same_as_t1": same_t1, "same_as_lexical": same_lex, "rpcs": rpcs, "max_in_flight": most,
                     "rpc_seconds": rpc_s, "decode_walls": [round(r.decode_wall, 2) for r in done],
                     "load_seconds": [round(r.load_seconds, 2) for r in done],
                     "cpu_seconds": [round(r.cpu_seconds, 2) for r in done],
                     "walls": [round(r.seconds, 2) for r in done]})
        print(f"{feature:8s}  {threads:7d}  {per_sentence:19.4f}  {base / per_sentence:8.2f}  {str(same_t1):10s}  "
              f"{str(same_lex):15s}  {rpcs:>4s}  {most:>13s}  {rpc_s:>5s}")
    (work / f"threads-{args.binary}.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
