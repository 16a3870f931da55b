"""Scale benchmark: wall time, CPU time and peak memory of each offline stage at 1.6M, 16M
and 50M examples, against Moses's own tools in the same run; 2 jobs against 1; a 2-worker
Dask LocalCluster against the in-process path, with checksums of what each path wrote.

Corpora come from benchmarks/make_corpus.py (ja-en copied 1, 10 and 32 times, the rare
vocabulary renamed per copy): --corpora DIR holds ja-en-1x, ja-en-10x, ja-en-32x.

    python benchmarks/make_corpus.py --copies 32 --out /work/scale/ja-en-32x   # and 1, 10
    nice python benchmarks/scale.py --corpora /work/scale --sizes 1 10 32 \\
        --moses-bin /work/moses/inst/bin --dask-sizes 10

Every measurement is a fresh `python -m training.cli ...` child (the worktree's code),
timed with os.wait4: wall seconds, CPU seconds (user + system, the child and the worker
processes it waited for), and the peak RSS of the largest single process (ru_maxrss;
with --jobs 2 each worker holds its own task's memory, not added). Moses: `extract E F A
out 7 orientation --model wbe-msd`, then `LC_ALL=C sort` of extract.o (its pipeline's
step), then `lexical-reordering-score ... 0.5 rt. --model "wbe msd wbe-msd-bidirectional-fe"`;
our table is compared with Moses's, byte for byte.

Stages are functions registered with @stage(name): `fn(ctx, size, jobs, scheduler) ->
(argv, output path)`; a stage may read an earlier stage's output through ctx (lexical
reads the store extract wrote at that size with one job). Add a stage by adding one
function; --stages picks them.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
EXTRACT_MODEL = "wbe-msd"
TABLE_TYPE = "wbe-msd-bidirectional-fe"


@dataclass
class Context:
    corpora: Path
    work: Path
    memory: str
    outputs: dict = field(default_factory=dict)   # (stage, size, variant) -> output path

    def corpus(self, size: int) -> Path:
        return self.work / "warm-up" if size == 0 else self.corpora / f"ja-en-{size}x"

    def out(self, *parts: str) -> Path:
        path = self.work.joinpath(*parts)
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            shutil.rmtree(path) if path.is_dir() else path.unlink()
        return path


STAGES: dict[str, Callable] = {}


def stage(name: str):
    def register(fn):
        STAGES[name] = fn
        return fn
    return register


def parallel_flags(ctx: Context, jobs: int, scheduler: str | None) -> list[str]:
    return ["--jobs", str(jobs), "--memory", ctx.memory] + (["--scheduler", scheduler] if scheduler else [])


@stage("extract")
def extract_stage(ctx: Context, size: int, jobs: int, scheduler: str | None) -> tuple[list[str], Path]:
    c = ctx.corpus(size)
    out = ctx.out(f"{size}x", f"store-j{jobs}{'-dask' if scheduler else ''}")
    return (["extract", "--src", str(c / "train.ja"), "--tgt", str(c / "train.en"), "--align",
             str(c / "train.align"), "--out", str(out), "--model", EXTRACT_MODEL, "--quiet",
             *parallel_flags(ctx, jobs, scheduler)], out)


@stage("lexical")
def lexical_stage(ctx: Context, size: int, jobs: int, scheduler: str | None) -> tuple[list[str], Path]:
    store = ctx.outputs[("extract", size, "j1")]
    out = ctx.out(f"{size}x", f"rt-j{jobs}{'-dask' if scheduler else ''}.{TABLE_TYPE}.gz")
    return (["lexical", "--store", str(store), "--type", TABLE_TYPE, "--out", str(out), "--quiet",
             *parallel_flags(ctx, jobs, scheduler)], out)


def run_measured(argv: list[str], cwd: Path = ROOT, env: dict | None = None, stdout=None) -> dict:
    """Run one child; wall, CPU (child + its reaped descendants) and peak RSS in MB."""
    with tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=stdout or subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            raise SystemExit(f"failed ({proc.returncode}): {' '.join(argv)}\n"
                             f"{err.read().decode(errors='replace')[-3000:]}")
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "peak_mb": usage.ru_maxrss / 1024}


def checksum(path: Path) -> str:
    """SHA-256 of a table's text (gunzipped) or of every file of a store (store.json
    without its creation time)."""
    digest = hashlib.sha256()
    if path.is_dir():
        for file in sorted(p for p in path.rglob("*") if p.is_file()):
            digest.update(str(file.relative_to(path)).encode())
            if file.name == "store.json":
                meta = json.loads(file.read_bytes())
                meta.pop("created_at", None)
                digest.update(json.dumps(meta, sort_keys=True).encode())
            else:
                with open(file, "rb") as fh:
                    while block := fh.read(1 << 24):
                        digest.update(block)
    else:
        opener = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "rb") as fh:
            while block := fh.read(1 << 24):
                digest.update(block)
    return digest.hexdigest()[:16]


def ours(ctx: Context, name: str, size: int, jobs: int, scheduler: str | None = None) -> dict:
    argv, out = STAGES[name](ctx, size, jobs, scheduler)
    result = run_measured([sys.executable, "-m", "training.cli", *argv])
    variant = f"j{jobs}" + ("-dask" if scheduler else "")
    ctx.outputs[(name, size, variant)] = out
    result.update(stage=name, size=size, variant=variant, checksum=checksum(out))
    print(json.dumps(result), flush=True)
    return result


def moses(ctx: Context, size: int, bin_dir: Path) -> list[dict]:
    """Moses's extract, sort and lexical-reordering-score on the same corpus."""
    c = ctx.corpus(size)
    work = ctx.out(f"{size}x", "moses")
    work.mkdir()
    results = []
    r = run_measured([str(bin_dir / "extract"), str(c / "train.en"), str(c / "train.ja"), str(c / "train.align"),
                      str(work / "extract"), "7", "orientation", "--model", EXTRACT_MODEL])
    results.append({**r, "stage": "moses extract", "size": size, "variant": "moses"})
    for name in ("extract", "extract.inv"):
        (work / name).unlink()
    with open(work / "extract.o.sorted", "wb") as sorted_out:
        r = run_measured(["sort", "-S", "1G", "-T", str(work), str(work / "extract.o")], stdout=sorted_out,
                         env={**os.environ, "LC_ALL": "C"})
    results.append({**r, "stage": "moses sort extract.o", "size": size, "variant": "moses"})
    (work / "extract.o").unlink()
    r = run_measured([str(bin_dir / "lexical-reordering-score"), str(work / "extract.o.sorted"), "0.5",
                      str(work / "rt."), "--model", f"wbe msd {TABLE_TYPE}"])
    table = work / f"rt.{TABLE_TYPE}.gz"
    results.append({**r, "stage": "moses lexical-reordering-score", "size": size, "variant": "moses",
                    "checksum": checksum(table)})
    (work / "extract.o.sorted").unlink()
    for result in results:
        print(json.dumps(result), flush=True)
    return results


def examples_of(store: Path) -> int:
    return json.loads((store / "store.json").read_text())["counts"]["examples"]


def report(results: list[dict], ctx: Context) -> None:
    print("\n| size | examples | stage | path | wall s | CPU s | peak RSS MB | checksum |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        store = ctx.outputs.get(("extract", r["size"], "j1"))
        n = f"{examples_of(store) / 1e6:.1f}M" if store and store.exists() else "?"
        print(f"| {r['size']}x | {n} | {r['stage']} | {r['variant']} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | "
              f"{r['peak_mb']:.0f} | {r.get('checksum', '')} |")
    by = {(r["stage"], r["size"], r["variant"]): r for r in results}
    print()
    for (name, size, variant), r in sorted(by.items(), key=lambda kv: (kv[0][1], kv[0][0], kv[0][2])):
        base = by.get((name, size, "j1"))
        if base and variant != "j1":
            same = "identical" if r.get("checksum") == base.get("checksum") else "DIFFERENT"
            print(f"{size}x {name} {variant} vs j1: wall x{base['wall_s'] / r['wall_s']:.2f} "
                  f"(speed-up), CPU x{r['cpu_s'] / base['cpu_s']:.2f}, output {same}")
    for size in sorted({r["size"] for r in results}):
        m = [by.get((s, size, "moses")) for s in ("moses extract", "moses sort extract.o",
                                                  "moses lexical-reordering-score")]
        if all(m):
            e, lx = by.get(("extract", size, "j1")), by.get(("lexical", size, "j1"))
            mw = sum(x["wall_s"] for x in m)
            mc = sum(x["cpu_s"] for x in m)
            if e and lx:
                same = "identical" if lx.get("checksum") == m[2].get("checksum") else "DIFFERENT"
                print(f"{size}x extract+lexical (1 job) {e['wall_s'] + lx['wall_s']:.1f} s wall / "
                      f"{e['cpu_s'] + lx['cpu_s']:.1f} s CPU against Moses extract+sort+score {mw:.1f} s wall / "
                      f"{mc:.1f} s CPU; table {same} to Moses's")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpora", type=Path, default=Path("/work/scale"))
    ap.add_argument("--work", type=Path, default=Path("/work/scale/runs"))
    ap.add_argument("--sizes", type=int, nargs="+", default=[1, 10, 32], help="copies of ja-en")
    ap.add_argument("--stages", nargs="+", default=list(STAGES), choices=list(STAGES))
    ap.add_argument("--jobs", type=int, nargs="+", default=[1, 2], help="job counts to time")
    ap.add_argument("--dask-sizes", type=int, nargs="*", default=[10],
                    help="sizes also run on a 2-worker Dask LocalCluster (--scheduler local --jobs 2)")
    ap.add_argument("--moses-bin", type=Path, default=Path("/work/moses/inst/bin"))
    ap.add_argument("--memory", default="4G")
    ap.add_argument("--keep", action="store_true", help="keep the stores and tables under --work")
    args = ap.parse_args()
    ctx = Context(args.corpora, args.work, args.memory)
    have_moses = all((args.moses_bin / b).is_file() for b in ("extract", "lexical-reordering-score"))
    if not have_moses:
        print(f"Moses binaries not found in {args.moses_bin}: the Moses column is skipped", flush=True)
    # Warm-up (not reported): every stage once on 500 lines, so numba's cache is filled
    # before anything is timed (a fresh checkout compiles its kernels on first use).
    warm = ctx.corpus(0)
    warm.mkdir(parents=True, exist_ok=True)
    for name in ("train.ja", "train.en", "train.align"):
        with open(ctx.corpus(1) / name, "rb") as fh:
            (warm / name).write_bytes(b"".join(fh.readline() for _ in range(500)))
    for name in args.stages:
        for jobs in args.jobs:
            ours(ctx, name, 0, jobs)
    results: list[dict] = []
    for size in args.sizes:
        if not (ctx.corpus(size) / "train.align").is_file():
            raise SystemExit(f"{ctx.corpus(size)} missing: python benchmarks/make_corpus.py --copies {size} "
                             f"--out {ctx.corpus(size)}")
        for name in args.stages:
            for jobs in args.jobs:
                results.append(ours(ctx, name, size, jobs))
            if size in args.dask_sizes:
                results.append(ours(ctx, name, size, 2, "local"))
        if have_moses:
            results += moses(ctx, size, args.moses_bin)
        report(results, ctx)
        if not args.keep:
            for (name, s, variant), path in list(ctx.outputs.items()):
                if s == size and not (name == "extract" and variant == "j1"):
                    shutil.rmtree(path) if path.is_dir() else path.unlink()
            shutil.rmtree(ctx.work / f"{size}x" / "moses", ignore_errors=True)
    print("\n## all sizes")
    report(results, ctx)
    print(json.dumps(results), file=sys.stderr)


if __name__ == "__main__":
    main()
