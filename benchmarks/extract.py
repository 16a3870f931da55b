"""Benchmark `moses-reorder extract`: sentence pairs/s, examples/s and peak memory.

Runs every measurement in a fresh child process so peak RSS belongs to that run alone:
the child loads the cached numba code with a 50-line warm-up (not timed), then times
reading + validating the corpus and writing the example store (and, with
--moses-format, Moses's `extract` and `extract.o` text). Numba compile time is measured
separately, in a child with an empty NUMBA_CACHE_DIR.

Baseline: Moses's own C++ `extract ... 7 orientation --model M` on the same 50k ja-en
pairs (data/golden/README.md): 3.77 s hier-msd, 3.51 s wbe-msd, 11 MB peak; it writes
`extract`, `extract.inv` and `extract.o` text.

    nice -n 10 python benchmarks/extract.py            # 10k/25k/50k, hier-msd and wbe-msd, 3 runs each
    nice -n 10 python benchmarks/extract.py --moses-extract /path/to/mosesdecoder/bin/extract
        # also times Moses's extract on the same slices in the same run (ratios from this run)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "ja-en"
MOSES_SECONDS = {"hier-msd": 3.77, "wbe-msd": 3.51}


def _maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def child_compile() -> dict:
    """First call of every kernel with an empty cache: numba compile time."""
    started = time.perf_counter()
    from training.store.build import build_store
    from training.corpus.reading import read_corpus
    from training.moses.extract import parse_models
    imported = time.perf_counter()
    src, tgt, align = sys.argv[-3:]
    work = Path(tempfile.mkdtemp())
    try:
        corpus = read_corpus(src, tgt, align)
        build_store(corpus, parse_models(["hier-msd", "wbe-msd"]), work / "s", moses_format=False, progress=False)
        build_store(corpus, parse_models(["hier-msd"]), work / "t", moses_format=True, progress=False)
    finally:
        shutil.rmtree(work)
    return {"import_s": imported - started, "compile_s": time.perf_counter() - imported}


def child_run(model: str, moses_format: bool, src: str, tgt: str, align: str, warm: list[str]) -> dict:
    from training.store.build import build_store
    from training.corpus.reading import read_corpus
    from training.moses.extract import parse_models

    models = parse_models([model])
    work = Path(tempfile.mkdtemp())
    try:
        build_store(read_corpus(*warm), models, work / "warm", moses_format=moses_format, progress=False)
        baseline = _maxrss_mb()
        wall, cpu = time.perf_counter(), time.process_time()
        corpus = read_corpus(src, tgt, align)
        meta = build_store(corpus, models, work / "store", moses_format=moses_format, progress=False)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        size = sum(p.stat().st_size for p in (work / "store").rglob("*") if p.is_file())
    finally:
        shutil.rmtree(work)
    return {"wall_s": wall, "cpu_s": cpu, "pairs": meta["counts"]["sentences"],
            "examples": meta["counts"]["examples"], "peak_rss_mb": _maxrss_mb(),
            "baseline_rss_mb": baseline, "output_mb": size / 1e6}


def spawn(args: list[str], env: dict | None = None) -> dict:
    out = subprocess.run([sys.executable, __file__, *args], check=True, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
    return json.loads(out.stdout.strip().splitlines()[-1])


def time_moses(binary: str, paths: list[str], model: str, work: Path) -> dict:
    """Moses's `extract E F A out 7 orientation --model M` (its argument order: target,
    source, alignment); wall, CPU and peak RSS of that one child (os.wait4)."""
    src, tgt, align = paths
    started = time.perf_counter()
    proc = subprocess.Popen([binary, tgt, src, align, str(work / "moses-extract"), "7", "orientation",
                             "--model", model], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{binary} exited with {proc.returncode}")
    for leftover in work.glob("moses-extract*"):
        leftover.unlink()
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "peak_rss_mb": usage.ru_maxrss / 1024.0}


def write_slice(data: Path, lines: int, out: Path) -> list[str]:
    paths = []
    for ext in ("ja", "en", "align"):
        with open(data / f"train.{ext}", "rb") as fh:
            chunk = b"".join(line for _, line in zip(range(lines), fh))
        (out / f"{lines}.{ext}").write_bytes(chunk)
        paths.append(str(out / f"{lines}.{ext}"))
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10000, 25000, 50000])
    parser.add_argument("--models", nargs="+", default=["hier-msd", "wbe-msd"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--moses-extract", metavar="PATH",
                        help="Moses's extract binary: time it on the same slices in this run")
    parser.add_argument("--child", choices=["compile", "run", "run-text"], help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("paths", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "compile":
        print(json.dumps(child_compile()))
        return
    if args.child:
        print(json.dumps(child_run(args.model, args.child == "run-text", *args.paths[:3], args.paths[3:])))
        return

    tmp = Path(tempfile.mkdtemp())
    try:
        warm = write_slice(args.data, 50, tmp)
        slices = {n: write_slice(args.data, n, tmp) for n in args.sizes}
        cache = tmp / "numba-cache"
        cold = spawn(["--child", "compile", *warm], env={"NUMBA_CACHE_DIR": str(cache)})
        print(f"numba compile (empty cache, every kernel, both modes): {cold['compile_s']:.1f} s "
              f"(imports {cold['import_s']:.1f} s); later runs load the on-disk cache")
        print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        print()
        header = (f"{'model':9} {'mode':6} {'pairs':>6} {'examples':>9} {'wall s':>7} {'cpu s':>6} "
                  f"{'pairs/s':>8} {'examples/s':>11} {'ex/cpu-s':>9} {'peak MB':>8} {'+MB':>6} {'out MB':>7} "
                  f"{'Moses/wall':>10} {'Moses/cpu':>9}")
        print(header)
        print("-" * len(header))
        rows = []
        plan = [(m, n, "store") for m in args.models for n in args.sizes]
        plan += [(m, max(args.sizes), "text") for m in args.models]
        for model, n, mode in plan:
            child = "run-text" if mode == "text" else "run"
            runs = [spawn(["--child", child, "--model", model, *slices[n], *warm]) for _ in range(args.repeats)]
            wall = statistics.median(r["wall_s"] for r in runs)
            cpu = statistics.median(r["cpu_s"] for r in runs)
            r = runs[0]
            ratio_wall = ratio_cpu = ""
            if args.moses_extract and mode == "store":
                moses = [time_moses(args.moses_extract, slices[n], model, tmp) for _ in range(args.repeats)]
                m_wall = statistics.median(x["wall_s"] for x in moses)
                m_cpu = statistics.median(x["cpu_s"] for x in moses)
                ratio_wall, ratio_cpu = f"{m_wall / wall:.2f}x", f"{m_cpu / cpu:.2f}x"
                print(f"{model:9} {'Moses':6} {n:>6} {'':>9} {m_wall:>7.2f} {m_cpu:>6.2f} {n / m_wall:>8.0f} "
                      f"{'':>11} {'':>9} {max(x['peak_rss_mb'] for x in moses):>8.0f}", flush=True)
            elif n == 50000 and model in MOSES_SECONDS:
                ratio_wall = f"{MOSES_SECONDS[model] / wall:.2f}x"
                ratio_cpu = f"{MOSES_SECONDS[model] / cpu:.2f}x"
            print(f"{model:9} {mode:6} {n:>6} {r['examples']:>9} {wall:>7.2f} {cpu:>6.2f} {n / wall:>8.0f} "
                  f"{r['examples'] / wall:>11.0f} {r['examples'] / cpu:>9.0f} "
                  f"{max(x['peak_rss_mb'] for x in runs):>8.0f} "
                  f"{max(x['peak_rss_mb'] - x['baseline_rss_mb'] for x in runs):>6.0f} {r['output_mb']:>7.1f} "
                  f"{ratio_wall:>10} {ratio_cpu:>9}", flush=True)
            rows.append((model, mode, n, wall, cpu))
        print()
        print("wall/cpu = median of", args.repeats, "runs; peak MB = child max RSS (Python + numba + data);")
        print("+MB = peak minus RSS after imports and warm-up. Moses/wall, Moses/cpu = Moses's time over ours:")
        if args.moses_extract:
            print("Moses's extract timed in this run on the same slice (its text output included, as it always writes text).")
        else:
            print("Moses's 50k wall time from golden/README.md (quiet machine) over our wall / CPU time.")
        print(f"load average at end: {os.getloadavg()[0]:.1f}")
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
