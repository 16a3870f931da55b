"""Trainer benchmark on ja-en: time, peak memory and held-out accuracy per trainer.

    nice -n 10 python benchmarks/train.py --store STORE [--features S7 S6] [--column wbe-msd/prev]
        [--only NAME ...] [--out benchmarks/RESULTS.md]

STORE is an example store of all 50k ja-en pairs with the wbe-msd labels, e.g.
    moses-reorder extract --src train.ja --tgt train.en --align train.align --out STORE --model wbe-msd
Training rows = the examples of the first 90% of sentences (training.eval.split), held-out
rows = the last 10%; features kept if seen > 10 times in training (the papers). The
feature matrix is built (and cached in the store) before any trainer runs, so no
trainer pays for it. Each trainer then runs in its own subprocess that loads the cached
matrix, so the peak memory (VmHWM) of one cannot contaminate another. Memory columns:
the whole-process peak; the runtime, i.e. the resident size after the imports, mapping
the data (untouched) and a warm-up fit on 2,000 rows (libraries, compiled kernels, the
labels: what every trainer process carries); the peak above that runtime (the data the
trainer holds resident plus its own state: what the papers compare); and the largest
anonymous resident size (without the mapped matrix and shared libraries). CPU seconds
are the subprocess's own user+system time, the fair figure on a shared machine; wall
seconds are reported too. Every worker runs with one thread.

Baselines: liblinear-official `-s 4` for the SVM; for the dual MLR our fused numba
L-BFGS and scikit-learn's LogisticRegression (lbfgs, the issue's reference primal). Dual
MLR and L-BFGS rows also carry P(w) (eq. 6 at the final weights, untimed) and L-BFGS its
per-iteration (seconds, objective); the time-to-same-objective table is printed after
the main one, or later from saved JSON lines with `--race FILE...`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# name -> (kind, parameters). "ours" trainers are FAMILIES entries.
TRAINERS: dict[str, tuple[str, dict]] = {
    "svm C=0.1 eps=0.1": ("svm", {"C": 0.1, "eps": 0.1}),
    "liblinear -s 4 -c 0.1 -e 0.1": ("liblinear", {"C": 0.1, "eps": 0.1}),
    "svm C=1 eps=0.1": ("svm", {"C": 1.0, "eps": 0.1}),
    "liblinear -s 4 -c 1 -e 0.1": ("liblinear", {"C": 1.0, "eps": 0.1}),
    "svm C=0.1 eps=0.1 shrinking=paper": ("svm", {"C": 0.1, "eps": 0.1, "shrinking": "paper"}),
    "dual-mlr C=1 eps=0.01": ("dual-mlr", {"C": 1.0, "eps": 0.01}),
    "dual-mlr C=1 eps=0.1": ("dual-mlr", {"C": 1.0, "eps": 0.1}),
    "dual-mlr C=1 eps=1.0": ("dual-mlr", {"C": 1.0, "eps": 1.0}),
    "maxent L-BFGS C=1, 100 iterations": ("maxent", {"C": 1.0, "max_passes": 100, "tol": 1e-12}),
    "maxent L-BFGS C=1, 600 iterations (ftol 1e-7)": ("maxent", {"C": 1.0, "max_passes": 600, "tol": 1e-7}),
    # The reference primal: scikit-learn's multinomial LogisticRegression, whose
    # lbfgs solver is scipy.optimize L-BFGS-B (intercept unregularised, otherwise eq. 6).
    "sklearn LR lbfgs C=1, 100 iterations": ("sklearn", {"C": 1.0, "max_iter": 100, "tol": 1e-4}),
    "sklearn LR lbfgs C=1, converged (tol 1e-4)": ("sklearn", {"C": 1.0, "max_iter": 1000, "tol": 1e-4}),
}


# Warm-up parameters: a few iterations are enough to load everything a trainer runs.
WARMUP = {"maxent": {"max_passes": 3}, "sklearn": {"max_iter": 3}}

THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")


def _statuses(*fields: str) -> list[int]:
    """Byte sizes of /proc/self/status fields, read in one go."""
    found = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in fields:
            found[name] = int(value.split()[0]) * 1024
    return [found.get(f, 0) for f in fields]


def _status(field: str) -> int:
    return _statuses(field)[0]


def load_data(store_dir: str, features: str, column: str):
    """Training and held-out rows: views of the cached (memory-mapped) matrix, untouched."""
    import numpy as np

    from training.store.examples import ExampleStore
    from training.api.train import heldout_sentences, select_rows
    from training.features.matrix import build_matrix

    store = ExampleStore.open(store_dir)
    heldout = heldout_sentences(store.n_sentences, 0.1)
    matrix = build_matrix(store, features, 10, ~heldout)
    sentence = store.sentence_of_examples()
    fit_rows, held_rows = np.flatnonzero(~heldout[sentence]), np.flatnonzero(heldout[sentence])
    X = select_rows(matrix.X, fit_rows)
    X_held = select_rows(matrix.X, held_rows)
    labels = store.load_labels(column).astype(np.int64)
    return X, labels[fit_rows], X_held, labels[held_rows]


class PeakSampler:
    """Largest anonymous (private) and file-backed resident sizes, sampled every 10 ms.

    VmHWM counts the pages of the memory-mapped feature matrix too; RssAnon is what the
    process allocated itself, the figure streaming from the store keeps small.
    """

    def __init__(self) -> None:
        import threading

        self.anon = self.file = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            anon, file = _statuses("RssAnon", "RssFile")
            self.anon, self.file = max(self.anon, anon), max(self.file, file)
            self._stop.wait(0.01)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def fit_and_score(kind: str, params: dict, X, y, X_held, y_held) -> tuple[dict, object]:
    """Train one trainer, time it and score it on the held-out rows."""
    import numpy as np

    t_cpu, t_wall = time.process_time(), time.perf_counter()
    extra: dict = {}
    if kind == "sklearn":
        import warnings

        from sklearn.exceptions import ConvergenceWarning
        from sklearn.linear_model import LogisticRegression

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            model = LogisticRegression(solver="lbfgs", **params).fit(X, y)
        cpu, wall = time.process_time() - t_cpu, time.perf_counter() - t_wall
        accuracy = float(np.mean(model.predict(X_held) == y_held))
        n_iter = int(np.max(model.n_iter_))
        extra = {"passes": n_iter, "work": float(n_iter),
                 "converged": not any(issubclass(w.category, ConvergenceWarning) for w in caught)}
    elif kind == "liblinear":
        from liblinear.liblinearutil import parameter, predict, problem, train

        prob = problem(y.astype(float), X.astype(np.float64))  # liblinear needs its own copy
        model = train(prob, parameter(f"-s 4 -c {params['C']} -e {params['eps']} -B 1 -q"))
        cpu, wall = time.process_time() - t_cpu, time.perf_counter() - t_wall
        pred, _, _ = predict(y_held.astype(float), X_held.astype(np.float64), model, "-q")
        accuracy = float(np.mean(np.asarray(pred) == y_held))
    else:
        from training.families import FAMILIES

        model = FAMILIES[kind](**params, n_classes=3).fit(X, y)
        cpu, wall = time.process_time() - t_cpu, time.perf_counter() - t_wall
        accuracy = float(np.mean(model.predict(X_held) == y_held))
        history = model.history_
        extra = {"passes": len(history), "work": sum(h.get("active", 1.0) for h in history),
                 "objective": history[-1]["objective"] if history else None,
                 "converged": getattr(model, "converged_", None)}
        if kind == "maxent":
            extra["trajectory"] = [[h["seconds"], h["objective"]] for h in history]
    return {"cpu": cpu, "wall": wall, "accuracy": accuracy, **extra}, model


def worker(args: argparse.Namespace) -> None:
    import numpy as np

    from training.api.train import select_rows

    kind, params = TRAINERS[args.worker]
    X, y, X_held, y_held = load_data(args.store, args.features[0], args.column)
    # Warm-up on the first rows: loads the trainer's libraries and compiled kernels,
    # which every later step shares; the resident size after it is the runtime.
    few = np.arange(min(2000, X.shape[0]))
    fit_and_score(kind, {**params, **WARMUP.get(kind, {})}, select_rows(X, few), y[few],
                  select_rows(X_held, few[:500]), y_held[:500])
    runtime = _status("VmRSS")
    sampler = PeakSampler()
    result, model = fit_and_score(kind, params, X, y, X_held, y_held)
    sampler.stop()
    peak = _status("VmHWM")  # before the untimed extras below read all of X again
    if kind in ("dual-mlr", "maxent"):  # both minimise eq. 6: compare them on it (untimed)
        from training.families.maxent import primal_objective

        W = np.vstack([model.coef_, model.intercept_ / model.bias]).astype(np.float64)
        result["primal"] = primal_objective(X, y, W, model.C, model.bias)
    print(json.dumps({"trainer": args.worker, "features": args.features[0], **result,
                      "peak": peak, "runtime": runtime,
                      "peak_anon": sampler.anon, "peak_file": sampler.file,
                      "n_train": int(X.shape[0]), "n_features": int(X.shape[1])}))


def run_one(args: argparse.Namespace, trainer: str, features: str) -> dict:
    cmd = [sys.executable, __file__, "--worker", trainer, "--store", args.store, "--features", features,
           "--column", args.column]
    # One core per trainer, as in the reference figures: an idle BLAS thread
    # pool spinning next to scipy's L-BFGS would only add CPU seconds.
    env = {**os.environ, "PYTHONPATH": str(ROOT), **{v: "1" for v in THREAD_VARS}}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{trainer} on {features} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def table(rows: list[dict]) -> str:
    out = ["| features | trainer | CPU s | wall s | held-out acc. | peak MiB | runtime MiB | above runtime MiB | anon MiB | passes (work) |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        passes = f"{r['passes']} ({r['work']:.1f})" if "passes" in r else "-"
        if r.get("converged") is False:
            passes += " not converged"
        out.append(f"| {r['features']} | {r['trainer']} | {r['cpu']:.1f} | {r['wall']:.1f} | "
                   f"{100 * r['accuracy']:.2f}% | {r['peak'] / 2**20:.0f} | "
                   f"{r['runtime'] / 2**20:.0f} | {(r['peak'] - r['runtime']) / 2**20:.0f} | "
                   f"{r.get('peak_anon', 0) / 2**20:.0f} | {passes} |")
    return "\n".join(out)


def race(rows: list[dict]) -> str:
    """Seconds the primal L-BFGS needed to reach each dual-MLR run's primal objective.

    Both minimise eq. 6, so the fair speed comparison is time to the same objective:
    the first L-BFGS iteration whose objective is at most the dual run's P(w).
    """
    out = ["| features | dual MLR run | its wall s | its P(w) | L-BFGS run | L-BFGS wall s to reach it | ratio |",
           "|---|---|---:|---:|---|---:|---:|"]
    for dual in (r for r in rows if "primal" in r and "trajectory" not in r):
        for primal in (r for r in rows if "trajectory" in r and r["features"] == dual["features"]):
            reached = next((t for t, obj in primal["trajectory"] if obj <= dual["primal"]), None)
            when = f"{reached:.1f}" if reached is not None else f"> {primal['trajectory'][-1][0]:.1f} (not reached)"
            ratio = f"{reached / dual['wall']:.1f}x" if reached is not None else f"> {primal['trajectory'][-1][0] / dual['wall']:.1f}x"
            out.append(f"| {dual['features']} | {dual['trainer']} | {dual['wall']:.1f} | {dual['primal']:,.1f} | "
                       f"{primal['trainer']} | {when} | {ratio} |")
    return "\n".join(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--store", help="example store with the --column labels (required unless --race)")
    p.add_argument("--features", nargs="+", default=["S7", "S6"])
    p.add_argument("--column", default="wbe-msd/prev")
    p.add_argument("--only", nargs="+", help="trainer names (default: all)", choices=sorted(TRAINERS))
    p.add_argument("--skip", nargs="+", default=[], help="trainer names to leave out")
    p.add_argument("--out", help="also append the table to this Markdown file")
    p.add_argument("--race", nargs="+", metavar="JSONL",
                   help="only print the time-to-same-objective table from earlier runs' JSON lines")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args)
        return
    if args.race:
        rows = [json.loads(line) for f in args.race for line in Path(f).read_text().splitlines()
                if line.startswith("{")]
        print(race(rows))
        return
    if not args.store:
        p.error("--store is required")
    names = [n for n in (args.only or TRAINERS) if n not in args.skip]
    rows = []
    for features in args.features:
        # Build (or reuse) the cached matrix once, outside every measurement.
        subprocess.run([sys.executable, "-c", f"import sys; sys.argv=['x']; from benchmarks.train import load_data; "
                        f"load_data({args.store!r}, {features!r}, {args.column!r})"],
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
        for name in names:
            row = run_one(args, name, features)
            rows.append(row)
            print(json.dumps(row), flush=True)
    text = table(rows)
    if any("trajectory" in r for r in rows) and any("trajectory" not in r and "primal" in r for r in rows):
        text += "\n\n" + race(rows)
    print(text)
    if args.out:
        header = (f"\n## {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.node()}, "
                  f"{os.cpu_count()} cores, column {args.column}\n\n"
                  f"    nice -n 10 python benchmarks/train.py --store STORE --features {' '.join(args.features)}"
                  f"{' --only ' + ' '.join(repr(n) for n in args.only) if args.only else ''}\n\n")
        with open(args.out, "a", encoding="utf-8") as fh:
            fh.write(header + text + "\n")


if __name__ == "__main__":
    main()
