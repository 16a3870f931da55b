"""moses-reorder-megam against scikit-learn on PRO sample files: same optimum, how fast.

For each file: runs the optimizer as mert-moses.pl does (`-fvals -maxi 30 -nobias binary
FILE`, a subprocess, wall time includes Python's start-up), reads the weights it prints,
fits scikit-learn's LogisticRegression(C=1, fit_intercept=False, lbfgs, tol 1e-12) on the
same samples, and prints the largest weight difference relative to the largest weight,
both objectives (sum of log-losses + ||w||^2 / 2) and whether the optimizer warned.

    python3 benchmarks/megam_check.py tests/moses/data/pro.data /work/mt/prosample/run1.pro.data

It measures; it asserts nothing (tests/moses/test_megam.py asserts).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent


def objective(X, y, w) -> float:
    from scipy.special import log_expit

    return float(-log_expit(y * (X @ w)).sum() + 0.5 * w @ w)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("files", nargs="+", type=Path)
    args = p.parse_args(argv)
    sys.path.insert(0, str(REPO))
    from sklearn.linear_model import LogisticRegression

    from training.moses.megam import read_samples

    print("| file | examples | features | megam wall s | Newton steps | sklearn s | max |dw| / max |w| "
          "| objective megam | objective sklearn |")
    print("|---|---|---|---|---|---|---|---|---|")
    for path in args.files:
        start = time.time()
        done = subprocess.run([sys.executable, "-m", "training.moses.megam", "-fvals", "-maxi", "30", "-nobias",
                               "binary", str(path)], cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)),
                              capture_output=True, text=True, check=True)
        wall = time.time() - start
        steps = sum(1 for line in done.stderr.splitlines() if line.startswith("it "))
        printed = dict((name, float(value)) for name, value in (line.split() for line in done.stdout.splitlines()))
        s = read_samples(str(path), fvals=True, bias=False)
        ours = np.array([printed.get(n, 0.0) for n in s.names])
        start = time.time()
        ref = LogisticRegression(C=1.0, fit_intercept=False, tol=1e-12, max_iter=100_000).fit(s.X, s.y).coef_[0]
        sk = time.time() - start
        rel = np.abs(ours - ref).max() / np.abs(ref).max()
        warned = " (warned)" if "warning" in done.stderr else ""
        print(f"| {path.name} | {s.X.shape[0]} | {s.X.shape[1]} | {wall:.2f} | {steps}{warned} | {sk:.2f} | "
              f"{rel:.1e} | {objective(s.X, s.y, ours):.6f} | {objective(s.X, s.y, ref):.6f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
