"""Time `moses-reorder align` on ja-en slices and score it against the shipped alignment.

Prints, for each slice size, the wall and CPU time of each stage (reading and checking
the text, eflomal in both directions, symmetrization, writing) and the link precision,
recall and F1 of our alignment against ../shared/data/ja-en/train.align (eflomal 2.0.0
+ grow-diag-final-and on all 50k pairs). Run it once, niced, on a quiet machine:

    nice -n 10 python benchmarks/align.py --sizes 5000 50000
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
from pathlib import Path

import numpy as np

from training.corpus.align import read_parallel, run_eflomal
from training.corpus.pharaoh import format_links, parse_links
from training.corpus.symmetrize import symmetrize

ROOT = Path(__file__).resolve().parents[1]
JA_EN = ROOT.parent / "shared" / "data" / "ja-en"


def cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class Stage:
    def __init__(self, timings: dict, name: str):
        self.timings, self.name = timings, name

    def __enter__(self):
        self.wall, self.cpu = time.perf_counter(), cpu_seconds()

    def __exit__(self, *exc):
        self.timings[self.name] = (time.perf_counter() - self.wall, cpu_seconds() - self.cpu)


def agreement(links, offsets, gold, gold_offsets) -> tuple[float, float, float]:
    """Link precision, recall, F1, counting (sentence, i, j) triples."""
    def keys(l, o):
        sentence = np.repeat(np.arange(o.shape[0] - 1, dtype=np.int64), np.diff(o))
        return (sentence << 32) | (l[:, 0].astype(np.int64) << 16) | l[:, 1].astype(np.int64)
    ours, ref = keys(links, offsets), keys(gold, gold_offsets)
    tp = np.intersect1d(ours, ref).size
    p, r = tp / ours.size, tp / ref.size
    return p, r, 2 * p * r / (p + r)


def run(n: int, tmp: Path, samplers: int) -> dict:
    for ext in ("ja", "en"):
        with open(JA_EN / f"train.{ext}", "rb") as f, open(tmp / f"train.{ext}", "wb") as g:
            for _ in range(n):
                g.write(next(f))
    gold, gold_off = parse_links((JA_EN / "train.align").read_bytes(), JA_EN / "train.align")
    gold, gold_off = gold[:gold_off[n]], gold_off[: n + 1]
    t: dict = {}
    with Stage(t, "read+check"):
        source, target = read_parallel(tmp / "train.ja", tmp / "train.en")
    with Stage(t, "eflomal (both directions)"):
        (fwd, fwd_off), (rev, rev_off) = run_eflomal(source, target, n_samplers=samplers)
    with Stage(t, "grow-diag-final-and"):
        links, offsets = symmetrize(source.lengths, target.lengths, rev, rev_off, fwd, fwd_off)
    with Stage(t, "format+write"):
        (tmp / "out.align").write_bytes(format_links(links, offsets))
    return {"timings": t, "agreement": agreement(links, offsets, gold, gold_off), "links": links.shape[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[5000, 50000])
    parser.add_argument("--samplers", type=int, default=3)
    args = parser.parse_args()
    # compile the numba kernels outside the timings (they are cached on disk after a first run)
    symmetrize(np.array([1]), np.array([1]), np.zeros((0, 2)), np.array([0, 0]), np.zeros((0, 2)), np.array([0, 0]))
    format_links(np.zeros((1, 2)), np.array([0, 1]))
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start; "
          f"eflomal samplers={args.samplers}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}")
    print("| pairs | stage | wall s | CPU s |")
    print("|---:|---|---:|---:|")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            results[n] = r = run(n, Path(tmp), args.samplers)
            for stage, (wall, cpu) in r["timings"].items():
                print(f"| {n} | {stage} | {wall:.2f} | {cpu:.2f} |")
            wall = sum(w for w, _ in r["timings"].values())
            cpu = sum(c for _, c in r["timings"].values())
            print(f"| {n} | **total** | **{wall:.2f}** | **{cpu:.2f}** |")
    print()
    print("| pairs | links | precision | recall | F1 (vs train.align) |")
    print("|---:|---:|---:|---:|---:|")
    for n, r in results.items():
        p, rec, f1 = r["agreement"]
        print(f"| {n} | {r['links']} | {p:.3f} | {rec:.3f} | {f1:.3f} |")
    print(f"\nload average {os.getloadavg()[0]:.1f} at end")


if __name__ == "__main__":
    main()
