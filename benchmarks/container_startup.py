"""Serving image: size and `docker run` -> health SERVING, before and after issue 33, in one run.

"before" is the image as it was: serving plus every training dependency (matplotlib, dask,
scipy, ...) and no numba cache, so each container compiles its kernels when it loads its
models. "after" is docker/Dockerfile's default: `pip install moses-reorder` alone and the
kernels compiled into the image's cache at build time. Both come from docker/Dockerfile
(`--build-arg EXTRAS=[train] --build-arg PRECOMPILE=0` gives "before") on the same base and
wheelhouse, and their runs alternate, so a busy machine slows both alike.

Start-up is timed from `docker run` to the first grpc.health.v1 SERVING on 127.0.0.1 (polled
every 50 ms from this process), each container over the same model repository (the one
`moses-reorder pipeline` writes), with the image's own `--workers 2` (or --workers N), on the
host network.

    MOSES_REORDER_DOCKER_BASE=local/bookworm-python:3.11 python3 benchmarks/container_startup.py \
        [--models OUT/models] [--runs 5] [--workers 2]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "docker"))
sys.path.insert(0, str(ROOT / "tests" / "server"))

import dockerkit  # noqa: E402
from serverkit import free_port  # noqa: E402

IMAGES = {"before": ("moses-reorder-server:bench-before", {"EXTRAS": "[train]", "PRECOMPILE": "0"}),
          "after": ("moses-reorder-server:bench-after", {})}


def _pipeline_models(out: Path) -> Path:
    subprocess.run([sys.executable, "-m", "training.cli", "pipeline", "--out", str(out), "--quiet"], cwd=ROOT,
                   check=True, stdout=subprocess.DEVNULL)
    return out / "models"


def _startup(tag: str, models: Path, workers: int) -> float:
    port = free_port()
    cid = dockerkit.run_server(tag, models, port, "--workers", str(workers), "--poll-seconds", "0")
    try:
        return dockerkit.wait_serving(f"127.0.0.1:{port}", cid, step=0.05)
    finally:
        dockerkit.remove(cid)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=Path, help="model repository (default: run the pipeline on the embedded corpus)")
    ap.add_argument("--runs", type=int, default=5, help="containers started per image")
    ap.add_argument("--workers", type=int, default=2, help="serve --workers (the image's default is 2)")
    args = ap.parse_args()
    reason = dockerkit.unavailable()
    if reason:
        print(f"cannot measure: {reason}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="container-startup-") as tmp:
        models = args.models or _pipeline_models(Path(tmp) / "out")
        print(f"base image {dockerkit.base_image()}; models {models}; serve --workers {args.workers}")
        seconds = dockerkit.build_wheelhouse(".[train]")  # a superset: both images install from it
        print(f"wheelhouse (.[train]): {seconds:.0f} s")
        for name, (tag, build_args) in IMAGES.items():
            seconds = dockerkit.build_image(tag, **build_args)
            print(f"build {name:6s} {tag}: {seconds:.0f} s, {dockerkit.image_size(tag) / 1e6:.0f} MB")
        times: dict[str, list[float]] = {name: [] for name in IMAGES}
        for _ in range(args.runs):
            for name, (tag, _) in IMAGES.items():
                times[name].append(_startup(tag, models, args.workers))
    print(f"\n| image  | size MB | docker run -> SERVING, s: median | min  | max  | runs |")
    print("|--------|--------:|------:|-----:|-----:|-----:|")
    for name, (tag, _) in IMAGES.items():
        t = times[name]
        print(f"| {name:6s} | {dockerkit.image_size(tag) / 1e6:7.0f} | {statistics.median(t):5.1f} | {min(t):4.1f} "
              f"| {max(t):4.1f} | {len(t):4d} |")
    ratio = statistics.median(times["before"]) / statistics.median(times["after"])
    print(f"\nstart-up: after is {ratio:.1f}x faster (median before / median after, same run)")
    print("all runs (s): " + "; ".join(f"{n}: {', '.join(f'{x:.1f}' for x in t)}" for n, t in times.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
