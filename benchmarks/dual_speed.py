"""Dual MLR against a baseline revision and against primal MaxEnt, as a new user trains them.

    python3 benchmarks/dual_speed.py --work DIR [--baseline 78832e3] [--features S7 S6]
        [--corpus ../shared/data/ja-en] [--heldout 5000] [--only dual-mlr@base ...] [--repeat N]

Why (issue 30): the dual-MLR paper's claim is at least 4x faster than primal MaxEnt at the
same accuracy, and the figure that matters is what `train` costs on the everyday corpus.
So every row is one `moses-reorder train` process (`--type hier-msd-bidirectional-fe
--heldout-fraction 0`, both directions), on the store of the first pairs of the corpus
(all but the last --heldout), evaluated by this checkout's `eval` on the store of
the last --heldout pairs (163,090 phrase pairs for ja-en): held-out accuracy and log-loss
per direction. Rows:

- `dual-mlr@base`: `train --family dual-mlr --eps 0.1` with the code of --baseline (a
  temporary git worktree first on PYTHONPATH, its own copy of the store);
- `dual-mlr`: the same with this checkout;
- `maxent`: `train --family maxent` (its defaults) with this checkout.

Each revision first trains once untimed with --max-passes 1 on its store copy, which
builds that copy's feature cache and compiles the numba kernels, so the timed runs
measure training, not feature counting or compilation. CPU seconds are the process's
user + system time (os.wait4), the fair figure on a shared machine; ratios are taken
within the run. Passes and dual objective (D of eq. 9 for the dual MLR, P of eq. 6 for
maxent, as the trainers report them) come from the weight file's metadata, per
direction (backward / forward). It measures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from training.modelfile.container import read_weight_file  # noqa: E402

TYPE = "hier-msd-bidirectional-fe"
RUNS = {  # name -> (code: "base" or "ours", family, extra train arguments)
    "dual-mlr@base": ("base", "dual-mlr", ["--eps", "0.1"]),
    "dual-mlr": ("ours", "dual-mlr", ["--eps", "0.1"]),
    "maxent": ("ours", "maxent", []),
}


def split_corpus(corpus: Path, heldout: int, out: Path) -> None:
    """out/train.* = all but the last `heldout` pairs, out/held.* = those pairs."""
    out.mkdir(parents=True, exist_ok=True)
    for side in ("ja", "en", "align"):
        lines = (corpus / f"train.{side}").read_text(encoding="utf-8").splitlines(keepends=True)
        (out / f"train.{side}").write_text("".join(lines[:-heldout]), encoding="utf-8")
        (out / f"held.{side}").write_text("".join(lines[-heldout:]), encoding="utf-8")


def cli(code: Path, *args: str) -> tuple[float, float]:
    """Run `python -m training.cli ARGS` with `code` first on PYTHONPATH; (CPU s, wall s)."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "training.cli", *args], cwd=code, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    err = proc.stderr.read()
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"training.cli {' '.join(args)} failed:\n{err[-3000:]}")
    return usage.ru_utime + usage.ru_stime, wall


def extract(store: Path, corpus: Path, part: str) -> None:
    if not store.exists():
        cli(ROOT, "extract", "--src", str(corpus / f"{part}.ja"), "--tgt", str(corpus / f"{part}.en"),
            "--align", str(corpus / f"{part}.align"), "--out", str(store), "--model", "hier-msd", "--quiet")


def evaluate(model: Path, held: Path) -> dict:
    """This checkout's `eval` on every sentence of the held-out store."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "training.cli", "eval", str(model), "--store", str(held),
                           "--heldout-fraction", "1", "--json", "--jobs", "1"],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    report = json.loads(done.stdout)
    return {d: {"accuracy": r["all"]["accuracy"], "log_loss": r["all"]["log_loss"]}
            for d, r in report["directions"].items()}


def run(name: str, features: str, code: Path, store: Path, held: Path, work: Path) -> dict:
    _, family, extra = RUNS[name]
    out = work / f"{name.replace('@', '-')}-{features}.mrw"
    common = ["train", "--family", family, "--features", features, "--type", TYPE, "--store", str(store),
              "--heldout-fraction", "0", "--quiet", *extra]
    cpu, wall = cli(code, *common, "--out", str(out))
    training = read_weight_file(out).metadata["training"]
    directions = {}
    for d, info in training["directions"].items():
        summary = info.get("summary", {})
        directions[d] = {"passes": summary.get("passes", summary.get("iterations")),
                         "objective": summary.get("dual_objective", summary.get("objective")),
                         "converged": summary.get("converged"), "fit_seconds": info["fit_seconds"]}
    scores = evaluate(out, held)
    for d in directions:
        directions[d].update(scores[d])
    return {"run": name, "features": features, "cpu": cpu, "wall": wall, "directions": directions}


def merged(rows: list[dict]) -> list[dict]:
    """One row per (features, run): the median CPU and wall seconds of its repeats (the
    other figures are those of its first run), with the CPU range and the count."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["features"], r["run"]), []).append(r)
    out = []
    for group in groups.values():
        cpu = sorted(r["cpu"] for r in group)
        out.append({**group[0], "cpu": statistics.median(cpu), "wall": statistics.median(r["wall"] for r in group),
                    "cpu_range": (cpu[0], cpu[-1]), "repeats": len(group)})
    return out


def table(rows: list[dict], baseline: str) -> str:
    rows = merged(rows)

    def both(r: dict, key: str, fmt: str) -> str:
        return " / ".join(fmt.format(r["directions"][d][key]) if r["directions"][d][key] is not None else "-"
                          for d in ("backward", "forward"))

    out = ["| features | run | CPU s | wall s | passes (b / f) | objective (b / f) | held-out acc. % (b / f) "
           "| log-loss (b / f) |",
           "|---|---|---:|---:|---|---|---|---|"]
    for r in rows:
        acc = " / ".join(f"{100 * r['directions'][d]['accuracy']:.2f}" for d in ("backward", "forward"))
        cpu = f"{r['cpu']:.1f}" if r["repeats"] == 1 else \
            f"{r['cpu']:.1f} ({r['cpu_range'][0]:.1f}-{r['cpu_range'][1]:.1f}, {r['repeats']} runs)"
        out.append(f"| {r['features']} | {r['run'].replace('@base', f' @ {baseline}')} | {cpu} | "
                   f"{r['wall']:.1f} | {both(r, 'passes', '{}')} | {both(r, 'objective', '{:,.2f}')} | {acc} | "
                   f"{both(r, 'log_loss', '{:.5f}')} |")
    ratios = []
    for features in dict.fromkeys(r["features"] for r in rows):
        got = {r["run"]: r for r in rows if r["features"] == features}
        if "dual-mlr" in got and "dual-mlr@base" in got:
            ratios.append(f"- {features}: dual-mlr CPU / {baseline}'s = "
                          f"{got['dual-mlr']['cpu'] / got['dual-mlr@base']['cpu']:.2f}")
        for dual in ("dual-mlr", "dual-mlr@base"):
            if dual in got and "maxent" in got:
                m, d = got["maxent"], got[dual]
                acc = max(abs(m["directions"][k]["accuracy"] - d["directions"][k]["accuracy"])
                          for k in ("backward", "forward"))
                ratios.append(f"- {features}: maxent / {dual.replace('@base', f' @ {baseline}')}: wall "
                              f"{m['wall'] / d['wall']:.2f}x, CPU {m['cpu'] / d['cpu']:.2f}x, largest accuracy "
                              f"difference {100 * acc:.2f} points")
    return "\n".join(out + [""] + ratios)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", type=Path, required=True, help="scratch directory (stores, worktree, models)")
    p.add_argument("--baseline", default="78832e3", help="git revision of the dual-mlr@base rows")
    p.add_argument("--features", nargs="+", default=["S7", "S6"])
    p.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "data" / "ja-en")
    p.add_argument("--heldout", type=int, default=5000, help="last pairs kept out of training")
    p.add_argument("--only", nargs="+", choices=sorted(RUNS), help="runs (default: all)")
    p.add_argument("--repeat", type=int, default=1,
                   help="run each N times, alternating (CPU and wall: the median; the load moves)")
    args = p.parse_args()
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    split_corpus(args.corpus, args.heldout, work / "corpus")
    extract(work / "store", work / "corpus", "train")
    extract(work / "held", work / "corpus", "held")
    base = work / "baseline"
    if not base.exists():
        subprocess.run(["git", "worktree", "add", "--detach", str(base), args.baseline], cwd=ROOT, check=True,
                       capture_output=True)
    try:
        codes = {"base": base, "ours": ROOT}
        stores = {}
        for label in codes:  # one store copy per revision: each writes its own feature cache
            stores[label] = work / f"store-{label}"
            if not stores[label].exists():
                shutil.copytree(work / "store", stores[label])
        names = args.only or list(RUNS)
        rows = []
        for features in args.features:
            for label, family in dict.fromkeys(RUNS[n][:2] for n in names):  # untimed: cache + compile
                cli(codes[label], "train", "--family", family, "--features", features, "--type", TYPE,
                    "--store", str(stores[label]), "--heldout-fraction", "0", "--quiet",
                    "--max-passes", "1", "--out", str(work / f"warmup-{label}.mrw"))
            for _ in range(args.repeat):
                for name in names:
                    label = RUNS[name][0]
                    row = run(name, features, codes[label], stores[label], work / "held", work)
                    rows.append(row)
                    print(json.dumps(row), flush=True)
        print(f"\n{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.node()}, "
              f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}\n")
        print(table(rows, args.baseline))
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=ROOT, capture_output=True)


if __name__ == "__main__":
    main()
