"""Failover and restarts of the scoring service in the middle of a real Moses decode.

Scenarios (each decodes the first --sentences ja-en test sentences with moses -threads 1
and ExternalReordering, and acts on the server once --after sentences were scored, as
the feature's own "Line N: ... scored" log lines tell):

- replicas: `server=A,B` names two `moses-reorder serve` processes; replica A is killed
  (SIGKILL). Goal: no sentence fails (round_robin moves on; the RPC that was running on A
  is retried on B), and the output equals a run with no failure.
- restart-fail: the only server is killed and started again --down seconds later, with
  `on-error=fail`. Goal: Moses stops with an error naming the server, within timeout-ms of
  the first sentence that could not be scored.
- restart-default: the same with `on-error=default`. Goal: the sentences decoded while the
  server was down get the default scores, Moses finishes every sentence and reports how
  many failed; the others equal the reference run.
- hung: the only server stops answering (SIGSTOP), `on-error=fail`. Goal: the error
  comes at the RPC's deadline, timeout-ms, naming the server.

    python benchmarks/moses_failover.py --moses-dir INST --models REPO --model NAME \
        --type hier-msd-bidirectional-fe --phrase-table PT --lm LM [--repeat 2]

Repeatable: every run starts its own servers on free loopback ports.
What it must not do: build Moses or tables (MOSES-NOTES.md section 8).
"""

from __future__ import annotations

import argparse
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

from moses_system import ROOT, compare, decode, external_line, moses_binary, n_scores, test_slice
from server.local import LocalServer  # noqa: E402

TEST = ROOT.parent / "shared" / "data" / "ja-en" / "test.ja"
SCORED = re.compile(r"^Line (\d+): \S+ scored \d+ translation options in one RPC")


class Watched:
    """moses running in the background; calls `act` once `after` sentences were scored."""

    def __init__(self, moses: Path, ini: Path, src: Path, after: int, act, flags: tuple[str, ...]):
        self.after, self.act = after, act
        self.scored = 0
        self.acted_at: float | None = None
        self.stderr: list[str] = []
        self.stderr_at: list[float] = []
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen([str(moses), "-f", str(ini), "-threads", "1", "-v", "1", *flags],
                                     stdin=open(src, "rb"), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.out: list[str] = []
        self._reader = threading.Thread(target=self._read_err, daemon=True)
        self._reader.start()

    def _read_err(self) -> None:
        for raw in self.proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.stderr.append(line)
            self.stderr_at.append(time.monotonic())
            if SCORED.match(line):
                self.scored += 1
                if self.scored == self.after and self.acted_at is None:
                    self.acted_at = time.monotonic()
                    self.act()

    def wait(self, timeout: float = 1800) -> int:
        self.out = self.proc.stdout.read().decode("utf-8").splitlines()
        code = self.proc.wait(timeout)
        self._reader.join(10)
        return code


def scenario_replicas(moses, system, work, src, models, model, moses_type, after, flags, reference):
    with LocalServer(models, log=work / "serve-a.log") as a, LocalServer(models, log=work / "serve-b.log") as b:
        ini = system.ini(work / "replicas.ini", external_line(moses_type, f"{a.address},{b.address}", model,
                                                               extra="on-error=default timeout-ms=5000"),
                         reference.n_scores)
        run = Watched(moses, ini, src, after, lambda: a.stop(signal.SIGKILL), flags)
        code = run.wait()
    failed = failures(run.stderr)
    differ = compare(reference.lines, run.out)
    return {"scenario": "replicas: kill 1 of 2", "exit": code, "sentences": len(run.out), "failed": failed,
            "differ_from_reference": len(differ), "after": after}


def scenario_restart(moses, system, work, src, models, model, moses_type, after, flags, reference, on_error,
                     down: float, timeout_ms: int):
    server = LocalServer(models, log=work / f"serve-{on_error}.log").start()
    restarted = threading.Event()

    def restart() -> None:
        server.stop(signal.SIGKILL)

        def later() -> None:
            time.sleep(down)
            server.start()
            restarted.set()
        threading.Thread(target=later, daemon=True).start()

    ini = system.ini(work / f"restart-{on_error}.ini",
                     external_line(moses_type, server.address, model, extra=f"on-error={on_error} timeout-ms={timeout_ms}"),
                     reference.n_scores)
    run = Watched(moses, ini, src, after, restart, flags)
    code = run.wait()
    exited = time.monotonic()
    restarted.wait(down + 130)
    server.stop()
    row = {"scenario": f"restart the only server (down {down:g} s), on-error={on_error}", "exit": code,
           "sentences": len(run.out), "failed": failures(run.stderr), "after": after}
    if on_error == "fail":
        errors = [line for line in run.stderr if "on-error=default would use default scores" in line]
        row["error"] = errors[0][:400] if errors else None
        row["names_server"] = bool(errors) and server.address in errors[0]
        row["seconds_kill_to_exit"] = round(exited - run.acted_at, 2) if run.acted_at else None
    else:
        failed = {int(m.group(1)) for m in map(re.compile(r"sentence (\d+) scored with default scores \(").search,
                                               run.stderr) if m}
        differ = compare(reference.lines, run.out)
        row["failed_ids"] = f"{min(failed)}-{max(failed)}" if failed else ""
        row["differ_among_scored"] = len([i for i in differ if i not in failed])
        row["differ_among_failed"] = len([i for i in differ if i in failed])
        row["count_reported"] = next((line for line in run.stderr if "sentences were scored with default" in line), None)
    return row


def scenario_hung(moses, system, work, src, models, model, moses_type, after, flags, reference, timeout_ms: int):
    """The only server stops answering (SIGSTOP: the port stays open, nothing replies):
    with on-error=fail the RPC must give up at its deadline, timeout-ms."""
    server = LocalServer(models, log=work / "serve-hung.log").start()
    ini = system.ini(work / "hung.ini", external_line(moses_type, server.address, model,
                                                      extra=f"on-error=fail timeout-ms={timeout_ms}"), reference.n_scores)
    run = Watched(moses, ini, src, after, lambda: server.proc.send_signal(signal.SIGSTOP), flags)
    code = run.wait()
    exited = time.monotonic()
    server.proc.send_signal(signal.SIGCONT)
    server.stop()
    errors = [line for line in run.stderr if "on-error=default would use default scores" in line]
    return {"scenario": "the only server hangs (SIGSTOP), on-error=fail", "exit": code, "sentences": len(run.out),
            "after": after, "error": errors[0][:300] if errors else None,
            "names_server": bool(errors) and server.address in errors[0],
            "seconds_hang_to_exit": round(exited - run.acted_at, 2) if run.acted_at else None,
            "timeout_ms": timeout_ms}


def failures(stderr: list[str]) -> int:
    for line in stderr:
        m = re.search(r": (\d+) of (\d+) sentences were scored with default scores", line)
        if m:
            return int(m.group(1))
    return 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--moses-dir")
    ap.add_argument("--models", type=Path, required=True, help="model repository to serve")
    ap.add_argument("--model", required=True)
    ap.add_argument("--type", required=True, help="the served model's Moses type")
    ap.add_argument("--phrase-table", type=Path, required=True)
    ap.add_argument("--lm", type=Path, required=True)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--test", type=Path, default=TEST)
    ap.add_argument("--sentences", type=int, default=100)
    ap.add_argument("--after", type=int, default=30, help="act after this many sentences were scored")
    ap.add_argument("--down", type=float, default=3.0, help="seconds the restarted server stays down")
    ap.add_argument("--timeout-ms", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--scenarios", nargs="+", default=["replicas", "restart-fail", "restart-default", "hung"],
                    choices=("replicas", "restart-fail", "restart-default", "hung"))
    ap.add_argument("--moses-flags", default="-s 10")
    ap.add_argument("--table-limit", type=int, default=10)
    args = ap.parse_args()

    moses = moses_binary(args.moses_dir)
    work = args.work
    lines, src, system = test_slice(args.test, args.sentences, work, args.phrase_table, args.lm, args.table_limit)
    flags = tuple(args.moses_flags.split())
    with LocalServer(args.models, log=work / "serve-ref.log") as server:
        ini = system.ini(work / "reference.ini", external_line(args.type, server.address, args.model), n_scores(args.type))
        reference = decode(moses, ini, src, 1, flags)
    if reference.returncode != 0 or len(reference.lines) != len(lines):
        raise SystemExit(f"reference run failed:\n{reference.stderr[-3000:]}")
    reference.n_scores = n_scores(args.type)

    common = (moses, system, work, src, args.models, args.model, args.type, args.after, flags, reference)
    for i in range(args.repeat):
        scenarios = {"replicas": lambda: scenario_replicas(*common),
                     "restart-fail": lambda: scenario_restart(*common, "fail", args.down, args.timeout_ms),
                     "restart-default": lambda: scenario_restart(*common, "default", args.down, args.timeout_ms),
                     "hung": lambda: scenario_hung(*common, args.timeout_ms)}
        for name in args.scenarios:
            row = scenarios[name]()
            print(f"run {i + 1}: " + "; ".join(f"{k}={v}" for k, v in row.items()), flush=True)


if __name__ == "__main__":
    main()
