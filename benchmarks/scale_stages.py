"""Scale figures of the features, trainer and eval stages: wall, CPU and peak RSS per stage.

    nice -n 5 python benchmarks/scale_stages.py --store STORE [--jobs 1 2] [--stages ...]

STORE: an example store with wbe-msd labels (`moses-reorder extract ... --model wbe-msd`),
e.g. all 50k ja-en pairs (1.6M examples) or benchmarks/make_corpus.py's 10x corpus
(16M). Every stage runs as its own process (`python -m training.cli ...` from this
checkout), in this order, so later stages reuse the feature caches the earlier ones
built, as a user's pipeline would:

- features S6 / S9: build the matrix with the split `train` uses (vocabulary counted on
  the fit sentences), once per --jobs value (the cache is removed before each run);
- svm S6, dual-mlr S6, nb-bayes S9: `train --type wbe-msd-backward-fe` on the cached
  matrix (fit, calibration, weight file);
- eval: the model of the last train stage before it on the held-out 10%, once per --jobs value.

Columns: wall s, CPU s (user+system of the stage and every process it waited for),
peak MiB (the largest resident set of the stage's process or of any worker it started:
ru_maxrss of the waited-for tree), and the stage's own figures (passes, accuracy).
Prints one JSON line per stage and a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TYPE = "wbe-msd-backward-fe"
THREADS = {v: "1" for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")}


def run_reaped(cmd: list[str], log: Path | None = None) -> dict:
    """Run cmd to completion; wall, CPU and peak RSS of it and the processes it waited for
    (os.wait4 on the child we spawned). log: a file that receives its stderr as it runs."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), **THREADS}
    start = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, \
            (open(log, "w+") if log else tempfile.TemporaryFile("w+")) as err:
        pid = os.posix_spawn(sys.executable if cmd[0] == "python" else cmd[0],
                             [sys.executable] + cmd[1:] if cmd[0] == "python" else cmd,
                             env, file_actions=[(os.POSIX_SPAWN_DUP2, out.fileno(), 1),
                                                (os.POSIX_SPAWN_DUP2, err.fileno(), 2)])
        _, status, usage = os.wait4(pid, 0)
        wall = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{stderr[-3000:]}")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "peak_mib": usage.ru_maxrss / 1024,
            "stdout": stdout}


def feature_worker(store_dir: str, features: str, jobs: int) -> None:
    """Build the matrix `train` would build (same split), from an empty cache."""
    sys.path.insert(0, str(ROOT))
    from training import defaults
    from training.api.train import SentenceSplit
    from training.features.matrix import build_matrix, cache_name
    from training.features.spec import FeatureSpec
    from training.store.examples import ExampleStore

    store = ExampleStore.open(store_dir)
    split = SentenceSplit.make(store.n_sentences, defaults.HELDOUT_FRACTION, defaults.CALIBRATION_FRACTION)
    spec = FeatureSpec.parse(features)
    target = Path(store_dir) / "features" / cache_name(spec, defaults.THRESHOLD, split.fit)
    shutil.rmtree(target, ignore_errors=True)
    fm = build_matrix(store, spec, defaults.THRESHOLD, split.fit, jobs=jobs)
    print(json.dumps({"n_features": int(fm.X.shape[1]), "nnz": int(fm.X.nnz), "rows": int(fm.X.shape[0])}))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--store", required=True)
    p.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    p.add_argument("--stages", nargs="+", default=["features S6", "features S9", "svm S6", "dual-mlr S6",
                                                   "nb-bayes S9", "eval"])
    p.add_argument("--label", default="", help="names the store in the table (e.g. 1.6M)")
    p.add_argument("--log", type=Path, help="directory for each train stage's progress (its stderr; "
                   "without it the stages run --quiet)")
    p.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        feature_worker(args.worker[0], args.worker[1], int(args.worker[2]))
        return
    out = Path(tempfile.mkdtemp(prefix="scale-stages-"))
    rows = []
    last_model, last_stage = None, ""
    try:
        for stage in args.stages:
            name, _, features = stage.partition(" ")
            if name == "features":
                for jobs in args.jobs:
                    r = run_reaped(["python", str(Path(__file__).resolve()), "--store", args.store,
                                    "--worker", args.store, features, str(jobs)])
                    r.update(json.loads(r.pop("stdout").strip().splitlines()[-1]))
                    rows.append({"stage": f"features {features}", "jobs": jobs, **r})
                    print(json.dumps(rows[-1]), flush=True)
            elif name == "eval":
                for jobs in args.jobs:
                    if last_model is None:
                        raise SystemExit("eval needs a train stage before it")
                    r = run_reaped(["python", "-m", "training.cli", "eval", str(last_model),
                                    "--store", args.store, "--json", "--jobs", str(jobs)])
                    report = json.loads(r.pop("stdout"))
                    d = next(iter(report["directions"].values()))["all"]
                    rows.append({"stage": f"eval ({last_stage})", "jobs": jobs, **r, "accuracy": d["accuracy"],
                                 "examples": d["examples"]})
                    print(json.dumps(rows[-1]), flush=True)
            else:
                model = out / f"{name}.mrw"
                cmd = ["python", "-m", "training.cli", "train", "--family", name, "--features", features,
                       "--type", TYPE, "--store", args.store, "--out", str(model), "--jobs", "1"]
                if args.log:
                    args.log.mkdir(parents=True, exist_ok=True)
                r = run_reaped(cmd + ([] if args.log else ["--quiet"]),
                               args.log / f"{args.label or 'store'}-{name}-{features}.err" if args.log else None)
                r.pop("stdout")
                last_model, last_stage = model, stage
                meta = json.loads(subprocess.run(
                    [sys.executable, "-m", "training.cli", "inspect", str(model), "--json"], cwd=ROOT,
                    env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                    check=True).stdout)["metadata"]["training"]
                info = next(iter(meta["directions"].values()))
                rows.append({"stage": stage, "jobs": 1, **r, "fit_seconds": info["fit_seconds"],
                             "passes": len(info["history"]), "summary": info["summary"],
                             "feature_seconds": meta["feature_seconds"],
                             "calibration_accuracy": (info.get("calibration") or {}).get("accuracy")})
                print(json.dumps(rows[-1]), flush=True)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    print("\n| store | stage | jobs | wall s | CPU s | peak MiB | notes |\n|---|---|---:|---:|---:|---:|---|")
    for r in rows:
        notes = []
        if "passes" in r:
            notes.append(f"fit {r['fit_seconds']:.1f} s, {r['passes']} passes")
        if "nnz" in r:
            notes.append(f"{r['rows']:,} rows, {r['n_features']:,} features, {r['nnz']:,} nnz")
        if "accuracy" in r:
            notes.append(f"accuracy {100 * r['accuracy']:.2f}% on {r['examples']:,}")
        print(f"| {args.label} | {r['stage']} | {r['jobs']} | {r['wall']:.1f} | {r['cpu']:.1f} | "
              f"{r['peak_mib']:.0f} | {'; '.join(notes)} |")


if __name__ == "__main__":
    main()
