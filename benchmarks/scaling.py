"""Issue 5 / SVM paper Figure 2: training time and peak memory against data size.

    PYTHONPATH=. nice -n 10 python benchmarks/scaling.py --work DIR [--sizes 10000 25000 50000] \
        [--corpus /work/shared/data/ja-en/train] [--out benchmarks/scaling.json]

For each size N, the first N lines of CORPUS.{ja,en,align} are extracted into a wbe-msd
store (DIR/store-N); then svm, dual-mlr and maxent (L-BFGS capped at 100 iterations)
each train wbe-msd-backward-fe on S7 through training.api.train.train_model, every run in a
fresh child process so its peak memory is its own; the fit's own memory (peak during
the fit minus resident size before it) is measured too, by resetting the process's
peak just before the fit; the peak before the reset is kept, so peak_mb is still the
whole run's (up to the end of training). Writes the records `moses-reorder
eval --plot DIR --bench JSON` reads ({family, examples, seconds, peak_mb}, plus extra
fields) after every run, and prints a Markdown table. Timings are single runs on a
shared 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

MOSES_TYPE = "wbe-msd-backward-fe"
FEATURES = "S7"
RUNS = {  # family -> hyper-parameters (the settings of benchmarks/train.py)
    "svm": {"C": 0.1, "eps": 0.1},
    "dual-mlr": {"C": 1.0, "eps": 0.1},
    "maxent": {"C": 1.0, "max_passes": 100, "tol": 1e-12},
}


def _status_mib(key: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    raise KeyError(key)


def _measure_fit(family: str, fits: list[dict]) -> None:
    """Make train_model's `FAMILIES[family](...).fit` record the fit's own memory.

    Right before fit the process's peak (VmHWM) is reset through /proc/self/clear_refs
    (Linux), so VmHWM after the fit minus VmRSS before it is what the trainer added on
    top of the loaded feature matrix and labels. The trained model is the family's own.
    """
    from training.families import FAMILIES

    base = FAMILIES[family]

    class Measured(base):
        def fit(self, *a, **kw):
            peak_before = _status_mib("VmHWM")  # the reset below also resets ru_maxrss
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            before = _status_mib("VmRSS")
            result = super().fit(*a, **kw)
            fits.append({"peak_before_fit_mb": peak_before, "rss_before_fit_mb": before, "fit_peak_mb": _status_mib("VmHWM")})
            return result

    Measured.__name__, Measured.__qualname__, Measured.__module__ = base.__name__, base.__qualname__, base.__module__
    FAMILIES[family] = Measured


def child(store: str, family: str, out: str) -> None:
    """One training run (in its own process): prints a JSON record on the last line."""
    from training.eval.evaluate import evaluate
    from training.moses.types import MosesType
    from training.api.train import train_model

    fits: list[dict] = []
    _measure_fit(family, fits)

    t = time.perf_counter()
    meta = train_model(store, family=family, moses_type=MOSES_TYPE, features=FEATURES, out=out,
                       params=dict(RUNS[family]))
    wall = time.perf_counter() - t
    direction = MosesType.parse(MOSES_TYPE).directions[0]
    tr = meta["training"]
    rep = evaluate(out, store)["directions"][direction]["all"]
    print(json.dumps({
        "examples": tr["examples"]["fit"],
        "seconds": tr["directions"][direction]["fit_seconds"],
        # the peak reset before fit hides earlier peaks from peak_memory_bytes: add them back
        "peak_mb": max(tr["peak_memory_bytes"] / 2**20, fits[0]["peak_before_fit_mb"]),
        "peak_memory_bytes_after_reset_mb": tr["peak_memory_bytes"] / 2**20,
        "feature_seconds": tr["feature_seconds"], "train_wall_seconds": wall,
        "accuracy": rep["accuracy"], "heldout_examples": tr["examples"]["heldout"],
        "summary": tr["directions"][direction].get("summary"),
        **fits[0], "fit_own_mb": fits[0]["fit_peak_mb"] - fits[0]["rss_before_fit_mb"],
    }, default=str))


def make_store(corpus: str, n: int, work: Path) -> Path:
    from training.store.build import build_store
    from training.corpus.reading import read_corpus
    from training.moses.extract import parse_models

    store = work / f"store-{n}"
    if (store / "meta.json").exists() or (store.exists() and any(store.iterdir())):
        return store
    text = work / f"text-{n}"
    text.mkdir(parents=True, exist_ok=True)
    for ext in ("ja", "en", "align"):
        with open(f"{corpus}.{ext}", encoding="utf-8") as src, open(text / f"train.{ext}", "w", encoding="utf-8") as dst:
            for i, line in enumerate(src):
                if i == n:
                    break
                dst.write(line)
    t = time.perf_counter()
    c = read_corpus(text / "train.ja", text / "train.en", text / "train.align")
    build_store(c, parse_models(["wbe-msd"]), store, progress=False)
    print(f"extracted {n} sentences into {store} in {time.perf_counter() - t:.1f} s", flush=True)
    return store


def table(records: list[dict]) -> str:
    lines = ["| sentences | family | fit examples | fit s | child CPU s | peak MiB | fit's own MiB | held-out acc |",
             "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in sorted(records, key=lambda r: (r["sentences"], list(RUNS).index(r["family"]))):
        lines.append(f"| {r['sentences']:,} | {r['family']} | {r['examples']:,} | {r['seconds']:.1f} | "
                     f"{r['child_cpu_seconds']:.1f} | {r['peak_mb']:.0f} | {r['fit_own_mb']:.0f} | {100 * r['accuracy']:.2f}% |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", required=True)
    ap.add_argument("--corpus", default="/work/shared/data/ja-en/train")
    ap.add_argument("--sizes", type=int, nargs="+", default=[10000, 25000, 50000])
    ap.add_argument("--families", nargs="+", default=list(RUNS), choices=list(RUNS))
    ap.add_argument("--out", default="benchmarks/scaling.json")
    ap.add_argument("--child", nargs=3, metavar=("STORE", "FAMILY", "MODEL"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return 0
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    out = Path(args.out)
    records = json.loads(out.read_text()) if out.exists() else []
    done = {(r["sentences"], r["family"]) for r in records}
    for n in args.sizes:
        store = make_store(args.corpus, n, work)
        for family in args.families:
            if (n, family) in done:
                continue
            model = work / f"{family}-{n}.mrw"
            proc = subprocess.Popen([sys.executable, __file__, "--work", str(work), "--child", str(store),
                                     family, str(model)], stdout=subprocess.PIPE, text=True)
            stdout = proc.stdout.read()
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            if proc.returncode != 0:
                print(f"{family} {n}: child failed with {proc.returncode}", file=sys.stderr, flush=True)
                continue
            rec = {"family": family, "sentences": n, **json.loads(stdout.strip().splitlines()[-1]),
                   "child_maxrss_mb": usage.ru_maxrss / 1024,
                   "child_cpu_seconds": usage.ru_utime + usage.ru_stime, "params": RUNS[family],
                   "features": FEATURES, "moses_type": MOSES_TYPE}
            records.append(rec)
            out.write_text(json.dumps(records, indent=1))
            print(f"{n} {family}: {rec['examples']} ex, fit {rec['seconds']:.1f} s, peak {rec['peak_mb']:.0f} MiB, "
                  f"acc {100 * rec['accuracy']:.2f}%", flush=True)
    print(table(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
