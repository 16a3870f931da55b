"""What a new user waits for: `moses-reorder --help`, and README command 1's pipeline cold,
warm, and in a second clone (issue 47).

    python benchmarks/first_run.py [--commit HEAD] [--work DIR] [--top 12] [--help-runs 5]

Clones a commit of this checkout (default HEAD) twice with git (A and B, as a user would get it), gives both one
empty per-user cache folder (XDG_CACHE_HOME in a temporary directory, no NUMBA_CACHE_DIR),
and runs `python -m training.cli pipeline --out OUT --quiet` from each clone's root:
A cold (an empty cache: numba compiles every kernel the pipeline calls), A warm (the same
clone again, into a new OUT), then B (the second clone: it should compile nothing). Each run
records numba's compile events (numba.core.event "numba:compile") and prints its wall
seconds, the seconds spent compiling (sum of the outermost compiles) and how many functions
were compiled, with the load average at start and end; the cold run lists its most costly
kernels, each with the CPU time of its compile including the callees it compiled. Wall and
CPU seconds are given for each run: on a shared machine CPU seconds are the steadier figure.
`--help` is timed in clone A after the pipeline runs, beside `python3 -c pass` (medians of
--help-runs fresh processes each: wall and CPU seconds, and peak RSS from wait4).
What it must not do: assert anything, or time anything but the commands a user runs.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Runs the CLI in-process with numba's compile events recorded; writes them as JSON to argv[1].
CHILD = r"""
import json, sys, time
from numba.core import event
records, stack = [], []
class Recorder(event.Listener):  # CPU seconds of this process: less noisy than wall time on a shared machine
    def on_start(self, ev):
        stack.append(time.process_time())
    def on_end(self, ev):
        seconds = time.process_time() - stack.pop()
        f = ev.data["dispatcher"].py_func
        records.append({"name": f"{f.__module__}.{f.__qualname__}", "seconds": seconds, "depth": len(stack)})
event.register("numba:compile", Recorder())
from training.cli import main
code = main(sys.argv[2:])
json.dump(records, open(sys.argv[1], "w"))
sys.exit(code)
"""


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_pipeline(clone: Path, out: Path, env: dict[str, str], events: Path) -> tuple[float, float, list[dict]]:
    """(wall seconds, CPU seconds, compile events) of one `pipeline` run."""
    started, cpu = time.perf_counter(), children_cpu()
    subprocess.run([sys.executable, "-c", CHILD, str(events), "pipeline", "--out", str(out), "--quiet"],
                   cwd=clone, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started, children_cpu() - cpu, json.loads(events.read_text())


def summary(name: str, wall: float, cpu: float, records: list[dict], before: str) -> None:
    outer = [r for r in records if r["depth"] == 0]
    ours = sum(1 for r in records if r["name"].startswith(("training.", "server.")))
    print(f"{name:<20} {wall:6.1f} s wall, {cpu:6.1f} s CPU of which {sum(r['seconds'] for r in outer):5.1f} "
          f"compiling, {ours} of our functions compiled ({len(records)} with numba's own); "
          f"load {before} -> {load()}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, help="where the clones go (default: a temporary directory)")
    ap.add_argument("--top", type=int, default=12, help="kernels listed for the cold run (default %(default)s)")
    ap.add_argument("--help-runs", type=int, default=5, help="`--help` processes timed (default %(default)s)")
    ap.add_argument("--commit", default="HEAD", help="the commit cloned (default %(default)s)")
    args = ap.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", args.commit], cwd=ROOT, capture_output=True,
                            text=True, check=True).stdout.strip()
    print(f"commit {commit}; {os.cpu_count()} cores; load average {load()} at start")
    if args.work is not None:
        args.work.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=args.work) as tmp:
        tmp = Path(tmp)
        env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
        env.update(XDG_CACHE_HOME=str(tmp / "cache"), PYTHONPATH="")
        clones = {}
        for name in ("A", "B"):
            clones[name] = tmp / f"clone-{name}"
            subprocess.run(["git", "clone", "--quiet", "--no-checkout", str(ROOT), str(clones[name])], check=True)
            subprocess.run(["git", "checkout", "--quiet", commit], cwd=clones[name], check=True)
        runs = [("clone A, cold", "A"), ("clone A, warm", "A"), ("clone B, first run", "B")]
        cold = None
        for i, (label, clone) in enumerate(runs):
            before = load()
            wall, cpu, records = run_pipeline(clones[clone], tmp / f"out-{i}", env, tmp / f"events-{i}.json")
            summary(label, wall, cpu, records, before)
            cold = cold or records
        print("\ncold run's costliest compiles (CPU seconds, the callees compiled with them included):")
        for r in sorted((r for r in cold if r["depth"] == 0), key=lambda r: -r["seconds"])[:args.top]:
            print(f"  {r['seconds']:5.1f}  {r['name']}")
        for label, argv in (("moses-reorder --help", ["-m", "training.cli", "--help"]),
                            ("python3 -c pass (the interpreter alone)", ["-c", "pass"])):
            walls, cpus, peaks = [], [], []
            for _ in range(args.help_runs):
                started = time.perf_counter()
                child = subprocess.Popen([sys.executable, *argv], cwd=clones["A"], env=env, stdout=subprocess.DEVNULL)
                _, status, usage = os.wait4(child.pid, 0)  # this process's own figures, not every child's
                child.returncode = os.waitstatus_to_exitcode(status)
                assert child.returncode == 0, (label, child.returncode)
                walls.append(time.perf_counter() - started)
                cpus.append(usage.ru_utime + usage.ru_stime)
                peaks.append(usage.ru_maxrss / 1024)
            print(f"{label}: median {statistics.median(walls):.2f} s wall, {statistics.median(cpus):.2f} s CPU, "
                  f"peak RSS {statistics.median(peaks):.0f} MiB ({args.help_runs} runs)")
        print(f"load average {load()} at end")


if __name__ == "__main__":
    main()
