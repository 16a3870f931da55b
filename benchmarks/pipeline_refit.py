"""What the refit after evaluation adds to the main job (issue 34).

    python benchmarks/pipeline_refit.py [--corpus DIR] [--rounds 3] [--work DIR]

Runs the README's main job, `moses-reorder pipeline --out DIR` (default corpus: the
embedded tanaka-3k; default families, type and features), each time into a new OUT as a
new user would, alternately as it is (evaluate, then refit every family on all sentences
and publish the refit models) and with `--no-refit` (publish the evaluated models), in
the order A B B A A B ... so drift in the machine's load falls on both. Prints every
run's wall seconds and the seconds of its refit stage (from pipeline's first
"refitting" stage line on stderr to its "report ->" line), then the medians and the
same-run ratio refit / no-refit: the median over rounds of the two runs of one round.
What it must not do: assert anything, or time anything but the command a user runs.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from training import defaults  # noqa: E402


def run_pipeline(corpus: Path, out: Path, refit: bool) -> tuple[float, float | None]:
    """(wall seconds of the whole command, seconds from the first refit line to the end's report line)."""
    command = [sys.executable, "-m", "training.cli", "pipeline", "--corpus", str(corpus), "--out", str(out),
               "--quiet", *([] if refit else ["--no-refit"])]
    started = time.perf_counter()
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    refit_started = refit_ended = None
    for line in proc.stderr:
        if line.startswith("pipeline: refitting") and refit_started is None:
            refit_started = time.perf_counter()
        elif line.startswith("pipeline: report ->"):
            refit_ended = time.perf_counter()
    if proc.wait() != 0:
        raise SystemExit(f"pipeline failed ({proc.returncode}): {' '.join(command)}")
    wall = time.perf_counter() - started
    return wall, (refit_ended - refit_started) if refit_started is not None else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=defaults.EMBEDDED_CORPUS)
    ap.add_argument("--rounds", type=int, default=3, help="runs of each setting (default %(default)s)")
    ap.add_argument("--work", type=Path, help="where the OUT directories go (default: a temporary directory)")
    args = ap.parse_args()

    order = [(True, False), (False, True)]  # A B, B A, ...
    walls: dict[bool, list[float]] = {True: [], False: []}
    refits: list[float] = []
    with tempfile.TemporaryDirectory(dir=args.work) as tmp:
        for i in range(args.rounds):
            for refit in order[i % 2]:
                out = Path(tmp) / f"out-{i}-{'refit' if refit else 'no-refit'}"
                wall, refit_seconds = run_pipeline(args.corpus, out, refit)
                walls[refit].append(wall)
                if refit_seconds is not None:
                    refits.append(refit_seconds)
                extra = f"  (refit stage {refit_seconds:.1f} s)" if refit_seconds is not None else ""
                print(f"round {i + 1}  {'refit   ' if refit else 'no-refit'}  {wall:6.1f} s{extra}", flush=True)
    with_refit, without = statistics.median(walls[True]), statistics.median(walls[False])
    ratios = [a / b for a, b in zip(walls[True], walls[False])]
    print(f"median wall: refit {with_refit:.1f} s, --no-refit {without:.1f} s (+{with_refit - without:.1f} s); "
          f"refit stage median {statistics.median(refits):.1f} s; same-round ratio refit / no-refit: median "
          f"{statistics.median(ratios):.2f}x (rounds: {', '.join(f'{r:.2f}' for r in ratios)}); "
          f"{args.rounds} runs each, corpus {args.corpus.name}")


if __name__ == "__main__":
    main()
