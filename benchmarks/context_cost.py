"""What decoder context costs the decoder (issue 48): the same test sentences decoded,
alternating, with ExternalReordering serving a model with decoder context
(`--context-model`, e.g. svm S6,neighbour) and a model of the same family and type without
it (`--plain-model`, svm S6), by moses and by moses2.

A context model's hypotheses carry the feature's own reordering states, which combine two
blocks with a softmax at every expansion and keep apart hypotheses whose last phrases end in
different words (ExternalReordering.h), where the plain model's rows are read as a table's.
Prints, per decoder and model, the decode CPU per sentence (the decode's CPU time minus that
of loading the same ini with no input: on a shared machine the wall follows the load, the
CPU much less), the wall per sentence (the process's minus Moses's own loading clock), the
Score RPCs' wall time (the feature's exit summary), and the median of same-round ratios
context / plain. The translations differ (they are other models); how many is printed.

    python benchmarks/context_cost.py --moses-dir MOSES --models REPO --context-model ctx \
        --plain-model plain --type hier-msd-bidirectional-fe --phrase-table PT --lm LM \
        --lm-order 3 --test test.ja --work WORK --sentences 40 --rounds 3

REPO holds both models (`moses-reorder train --features S6,neighbour` and `--features S6`
on one store); the server is started here on a free loopback port. The phrase table is
filtered to the sentences (WORK/phrase-table.test.gz).
What it must not do: build Moses, tables or models.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from pathlib import Path

from moses_system import decode, external_line, moses_binary, n_scores, test_slice
from server.local import LocalServer  # noqa: E402

RPC = re.compile(r": (\d+) Score RPCs for (\d+) sentences, at most \d+ in flight at once, ([0-9.e+-]+) s of RPC")


def rpc_seconds(stderr: str) -> float:
    found = RPC.findall(stderr)
    return float(found[-1][2]) if found else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--moses-dir", help="Moses tree or prefix with bin/moses and bin/moses2 (default $MOSES_DIR)")
    ap.add_argument("--models", type=Path, required=True, help="model repository holding both models")
    ap.add_argument("--context-model", required=True)
    ap.add_argument("--plain-model", required=True)
    ap.add_argument("--type", required=True, help="the models' Moses type (type= of the feature line)")
    ap.add_argument("--phrase-table", type=Path, required=True)
    ap.add_argument("--lm", type=Path, required=True)
    ap.add_argument("--lm-order", type=int, default=4)
    ap.add_argument("--test", type=Path, required=True, help="source sentences, one a line")
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--sentences", type=int, default=40, help="first N test sentences")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--table-limit", type=int, default=20)
    ap.add_argument("--decoders", nargs="+", default=["moses", "moses2"], choices=["moses", "moses2"])
    a = ap.parse_args()

    _, src, system = test_slice(a.test, a.sentences, a.work, a.phrase_table, a.lm, a.table_limit)
    system.lm_order = a.lm_order
    empty = a.work / "empty.ja"
    empty.write_text("", encoding="utf-8")
    n = n_scores(a.type)
    models = {"plain": a.plain_model, "context": a.context_model}
    cpu: dict[tuple[str, str], list[float]] = {}
    wall: dict[tuple[str, str], list[float]] = {}
    rpc: dict[tuple[str, str], list[float]] = {}
    outputs: dict[tuple[str, str], list[str]] = {}
    with LocalServer(a.models, log=a.work / "context-cost-serve.log") as server:
        inis = {name: system.ini(a.work / f"context-cost-{name}.ini", external_line(a.type, server.address, model), n)
                for name, model in models.items()}
        for r in range(a.rounds):
            for decoder in a.decoders:
                binary = moses_binary(a.moses_dir, decoder)
                for name, ini in inis.items():
                    run = decode(binary, ini, src, threads=1, timeout=3600)
                    idle = decode(binary, ini, empty, threads=1, timeout=3600)  # loading alone
                    if run.returncode != 0 or idle.returncode != 0:
                        sys.exit(f"{decoder} {name}: failed: {(run.stderr + idle.stderr)[-2000:]}")
                    key = (decoder, name)
                    cpu.setdefault(key, []).append((run.cpu_seconds - idle.cpu_seconds) / a.sentences)
                    wall.setdefault(key, []).append(run.decode_wall / a.sentences)
                    rpc.setdefault(key, []).append(rpc_seconds(run.stderr) / a.sentences)
                    outputs.setdefault(key, run.lines)
                    print(f"round {r + 1}: {decoder} {name}: {cpu[key][-1]:.4f} CPU s/sent, "
                          f"{wall[key][-1]:.4f} wall s/sent, RPC {rpc[key][-1]:.4f} s/sent", flush=True)

    def ratio(figures: dict, decoder: str) -> float:  # the median of same-round ratios
        return statistics.median(x / y for x, y in zip(figures[decoder, "context"], figures[decoder, "plain"]))

    print(f"\n{a.sentences} sentences, {a.type}, -threads 1, {a.rounds} rounds alternating; "
          f"context = {a.context_model}, plain = {a.plain_model}\n")
    print("| decoder | plain CPU s/sent | context CPU s/sent | context / plain CPU | context / plain wall | "
          "RPC s/sent plain / context | translations differing |")
    print("|---|---|---|---|---|---|---|")
    for decoder in a.decoders:
        differ = sum(x != y for x, y in zip(outputs[decoder, "plain"], outputs[decoder, "context"]))
        print(f"| {decoder} | {statistics.median(cpu[decoder, 'plain']):.4f} | "
              f"{statistics.median(cpu[decoder, 'context']):.4f} | {ratio(cpu, decoder):.2f} | "
              f"{ratio(wall, decoder):.2f} | {statistics.median(rpc[decoder, 'plain']):.4f} / "
              f"{statistics.median(rpc[decoder, 'context']):.4f} | {differ} of {a.sentences} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
