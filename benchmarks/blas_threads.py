"""BLAS threads while training, with and without a CPU hog on the other core (issue 15).

    python benchmarks/blas_threads.py [--corpus DIR] [--families maxent hybrid] [--repeats 1]

Extracts the corpus (default: the embedded tanaka-3k, what `pipeline` trains on) into a
temporary store, builds each family's feature matrix once (cached, so no timed run pays
for it), then trains each family on hier-msd-bidirectional-fe with `train_model`'s
`blas_threads=None` (the BLAS library's own thread count) and `blas_threads=1` (the
default), first on the machine as it is, then with a busy-loop process on the other
core (bounded: it exits by itself after --hog-seconds, and is killed when the runs end).
Prints the fit seconds of every run (sum over directions, best of --repeats) and the
ratio unlimited / one thread in each setting.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from threadpoolctl import threadpool_info  # noqa: E402

from training import defaults  # noqa: E402
from training.api import extract_store, feature_matrix, train_model  # noqa: E402
from training.families import get_family  # noqa: E402

TYPE = "hier-msd-bidirectional-fe"
HOG = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"


def start_hog(seconds: float) -> subprocess.Popen:
    """A busy loop on the last core that stops by itself after `seconds`."""
    hog = subprocess.Popen([sys.executable, "-c", HOG.format(seconds=seconds)])
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) > 1:
        os.sched_setaffinity(hog.pid, {cpus[-1]})
    return hog


def settings(family: str) -> defaults.FamilySettings:
    """The family's features as `pipeline` trains it: its own set, else pipeline's."""
    own = get_family(family).default_features is not None or get_family(family).features_by_language
    return defaults.family_settings(family, "fe", features=None if own else defaults.FEATURES)


def fit_seconds(store: Path, family: str, out: Path, blas_threads: int | None, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        meta = train_model(store, family=family, moses_type=TYPE, out=out, blas_threads=blas_threads,
                           features=settings(family).features)
        best = min(best, sum(d["fit_seconds"] for d in meta["training"]["directions"].values()))
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=defaults.EMBEDDED_CORPUS)
    ap.add_argument("--families", nargs="+", default=["maxent", "hybrid"])
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--hog-seconds", type=float, default=900.0, help="upper bound of the hog's life")
    args = ap.parse_args()

    blas = [p for p in threadpool_info() if p["user_api"] == "blas"]
    names = [f"{p['internal_api']} {p['version']} ({p['num_threads']} threads)" for p in blas]
    print(f"BLAS libraries: {', '.join(names)}")
    print(f"cores: {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}, "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', '(unset)')}")
    with tempfile.TemporaryDirectory(prefix="blas-threads-") as tmp:
        work = Path(tmp)
        c = args.corpus
        extract_store(c / "train.ja", c / "train.en", c / "train.align", work / "store", models=["hier-msd"])
        for family in args.families:  # warm: matrix cache and numba compilation
            s = settings(family)
            feature_matrix(work / "store", s.features, threshold=s.threshold,
                           heldout_fraction=defaults.HELDOUT_FRACTION)
            train_model(work / "store", family=family, moses_type=TYPE, out=work / "warm.mrw", features=s.features,
                        params={"max_passes": 2} if family == "maxent" else None)
        rows = []
        for hogged in (False, True):
            hog = start_hog(args.hog_seconds) if hogged else None
            try:
                for family in args.families:
                    t_all = fit_seconds(work / "store", family, work / "m.mrw", None, args.repeats)
                    t_one = fit_seconds(work / "store", family, work / "m.mrw", 1, args.repeats)
                    rows.append((family, "busy-loop on the other core" if hogged else "as it is", t_all, t_one))
                    print(f"  {rows[-1][1]:28s} {family:8s} unlimited {t_all:6.1f} s   one thread {t_one:6.1f} s"
                          f"   ratio {t_all / t_one:5.2f}", flush=True)
            finally:
                if hog is not None:
                    hog.kill()
                    hog.wait()
    print()
    print("| machine | family | BLAS unlimited (s) | BLAS 1 thread (s) | unlimited / 1 |")
    print("|---|---|---|---|---|")
    for family, setting, t_all, t_one in rows:
        print(f"| {setting} | {family} | {t_all:.1f} | {t_one:.1f} | {t_all / t_one:.2f} |")


if __name__ == "__main__":
    main()
