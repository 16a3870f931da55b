"""Does a seeded `train` give bit-identical weights at two revisions? (issue 12's check)

Trains each family with the same arguments twice -- once with the code of `--before`
(checked out into a temporary git worktree and put first on PYTHONPATH), once with the
working tree -- on one example store, and compares every array of the two weight files
byte for byte. Prints one line per family; exits 1 if any differs.

    python benchmarks/same_weights.py --before 78832e3
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from training.modelfile.container import read_weight_file  # noqa: E402

EMBEDDED = ROOT / "training" / "data" / "tanaka-3k"
FAMILIES = ("svm", "dual-mlr", "maxent", "nb-map")


def cli(code: Path, *args: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(code)}
    subprocess.run([sys.executable, "-m", "training.cli", *args], cwd=code, env=env, check=True,
                   stdout=subprocess.DEVNULL)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="git revision to compare against")
    parser.add_argument("--corpus", type=Path, default=EMBEDDED, help="train.{ja,en,align} directory")
    parser.add_argument("--features", default="S7")
    parser.add_argument("--type", default="hier-msd-bidirectional-fe")
    parser.add_argument("--seed", default="7")
    parser.add_argument("--families", default=",".join(FAMILIES))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="same-weights-") as tmp:
        tmp = Path(tmp)
        before = tmp / "before"
        subprocess.run(["git", "worktree", "add", "--detach", str(before), args.before], cwd=ROOT, check=True,
                       capture_output=True)
        try:
            store = tmp / "store"
            c = args.corpus
            cli(ROOT, "extract", "--src", str(c / "train.ja"), "--tgt", str(c / "train.en"), "--align",
                str(c / "train.align"), "--out", str(store), "--model", "hier-msd", "--quiet")
            differing = 0
            for family in args.families.split(","):
                files = {}
                for label, code in (("before", before), ("after", ROOT)):
                    files[label] = tmp / f"{family}-{label}.mrw"
                    cli(code, "train", "--family", family, "--features", args.features, "--type", args.type,
                        "--store", str(store), "--out", str(files[label]), "--seed", args.seed, "--quiet")
                a, b = (read_weight_file(files[k]).arrays for k in ("before", "after"))
                same = sorted(a) == sorted(b) and all(
                    np.asarray(a[n]).dtype == np.asarray(b[n]).dtype
                    and np.asarray(a[n]).tobytes() == np.asarray(b[n]).tobytes() for n in a)
                differing += not same
                shapes = ", ".join(f"{n} {tuple(np.asarray(a[n]).shape)}" for n in sorted(a))
                gap = "" if same or sorted(a) != sorted(b) else "  max |dw| / max |w| = %.1e" % (
                    np.abs(np.asarray(a["weights"], np.float64) - np.asarray(b["weights"], np.float64)).max()
                    / max(np.abs(np.asarray(a["weights"], np.float64)).max(), 1e-300))
                print(f"{family:9s} {'identical' if same else 'DIFFERENT'}  ({shapes}){gap}")
            print(f"{args.before} vs working tree, {args.features}, {args.type}, seed {args.seed}, "
                  f"corpus {c}: {differing} of {len(args.families.split(','))} differ")
            return 1 if differing else 0
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(before)], cwd=ROOT, capture_output=True)


if __name__ == "__main__":
    sys.exit(main())
