"""What NUMBA_CPU_NAME=generic (the serving image's setting) costs in scoring speed.

The image compiles its kernels at build time for a generic x86-64 CPU, so the cache serves on
any host; code for the host's own CPU may use wider vector instructions. This scores the same
tiled request with a model file (default: the pipeline's SVM) through `LoadedModel.predict_proba`
in fresh processes, generic and host code alternating, each with its own warm numba cache, and
prints pairs scored per second.

    python3 benchmarks/numba_generic.py MODEL.mrw [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import sys, time
sys.path[:0] = [sys.argv[2], sys.argv[2] + "/tests/server"]
from serverkit import sentences, score_request, tiled_request
from training.modelfile.model import load_model
from training.modelfile.request import batch_from_request_arrays
from server.service import arrays_from_message
model = load_model(sys.argv[1])
request = tiled_request(score_request(sentences(__import__("pathlib").Path(sys.argv[3]), "test", 1)[0], "m"), 20000)
batch = batch_from_request_arrays(**arrays_from_message(request))
model.predict_proba(batch)
best = float("inf")
for _ in range(5):
    t = time.perf_counter(); model.predict_proba(batch); best = min(best, time.perf_counter() - t)
print(batch.n_pairs / best)
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", type=Path)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    corpus = ROOT / "training" / "data" / "tanaka-3k"
    rates: dict[str, list[float]] = {"generic": [], "host": []}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.rounds):
            for name in rates:
                env = dict(os.environ, NUMBA_CACHE_DIR=f"{tmp}/{name}")
                env.pop("NUMBA_CPU_NAME", None)
                if name == "generic":
                    env["NUMBA_CPU_NAME"] = "generic"
                out = subprocess.run([sys.executable, "-c", CHILD, str(args.model), str(ROOT), str(corpus)],
                                     env=env, capture_output=True, text=True, check=True)
                rates[name].append(float(out.stdout.strip()))
    for name, r in rates.items():
        print(f"{name:8s} pairs/s: median {statistics.median(r):,.0f}  (runs: {', '.join(f'{x:,.0f}' for x in r)})")
    print(f"generic / host: {statistics.median(rates['generic']) / statistics.median(rates['host']):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
