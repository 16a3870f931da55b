"""What small hostile requests and a SIGTERM cost the scoring server, before and after issue 15.

Runs the same scenarios against two checkouts in one run: the baseline (e.g. 8b70bde,
exported with `git archive 8b70bde | tar -x -C DIR`) and this tree, each as a real
`moses-reorder serve` process on a loopback port over an S8 model (ANOVA d=2 over the
alignment points + context 1, seeded weights):

1. one "quadratic" request: a single pair of 64 x 64 words with all 4,096 alignment
   points (a ~17 KB request); prints status, seconds and the server's peak-RSS growth;
2. four such requests whose clients give up after 0.5 s, then a one-pair request:
   prints how long the server took to answer that small request (how long it stayed
   busy with work nobody waited for); then four requests of 12,000 pairs of 7 x 7
   phrases (all 49 points: the largest real pair shape; ~15M keys each) whose clients
   give up after 2 s (past parsing, which 8b70bde already checked the deadline after),
   which are cut into slices where one 4,096-point pair cannot be;
3. SIGTERM with --grace-seconds 2 while a long legal request (--long-pairs pairs of 7 x 7
   phrases, all 49 points; 60,000 = about 75M keys) is being scored: prints seconds from
   SIGTERM to exit.

    PYTHONPATH=$PWD nice -n 10 python benchmarks/serve_hostile.py --baseline /tmp/old-8b70bde

It measures; it asserts nothing. This tree runs twice: with its default limits (the
quadratic requests are refused; the long request of scenario 3 too), and with the limits
raised (--max-align-points 5000 --max-keys 10^9) so that the same requests are legal and
what is measured is the sliced scoring: stopping for a client that gave up, and the grace
bound on exit.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import grpc
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from server.api import pb, pb_grpc  # noqa: E402
from training.modelfile.model import write_model  # noqa: E402
from training.modelfile.request import arrays_from_strings  # noqa: E402


def request(n_pairs: int, width: int) -> pb.ScoreRequest:
    source = [f"w{i}" for i in range(width + 23)]
    target = [f"t{i}" for i in range(width)]
    points = [(i, j) for i in range(width) for j in range(width)]
    pairs = [(i % 23, i % 23 + width, target, points) for i in range(n_pairs)]
    return pb.ScoreRequest(model="s8", **arrays_from_strings(source, pairs))


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Server:
    def __init__(self, tree: Path, models: Path, *extra: str):
        env = dict(os.environ, PYTHONPATH=str(tree))
        self.proc = subprocess.Popen([sys.executable, "-m", "training.cli", "serve", "--models", str(models),
                                      "--host", "127.0.0.1", "--port", "0", "--poll-seconds", "0",
                                      "--cache-size", "0", "--max-message-mb", "64", *extra],
                                     cwd=tree, env=env, stderr=subprocess.PIPE, text=True)
        for line in self.proc.stderr:
            event = json.loads(line) if line.startswith("{") else {}
            if event.get("event") == "listening":
                self.port = event["port"]
                break
        threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.port}",
                                             options=[("grpc.max_receive_message_length", 64 << 20)])
        self.stub = pb_grpc.ReorderingScorerStub(self.channel)
        self.stub.Score(request(1, 1), timeout=120)  # warm

    def stop(self) -> float:
        started = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(300)
        self.channel.close()
        return time.monotonic() - started


def call(stub, req, timeout):
    started = time.monotonic()
    try:
        stub.Score(req, timeout=timeout)
        code = "OK"
    except grpc.RpcError as exc:
        code = exc.code().name
    return code, time.monotonic() - started


def busy_after_abandoned(stub, req, give_up: float) -> tuple[str, float]:
    """Four clients send `req` and give up after `give_up` s; then how long a 1-pair request takes."""
    threads = [threading.Thread(target=call, args=(stub, req, give_up)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return call(stub, request(1, 1), 600)


def scenarios(name: str, tree: Path, models: Path, flags: list[str], long_pairs: int) -> None:
    quad = request(1, 64)
    server = Server(tree, models, *flags)
    before = peak_rss_mib(server.proc.pid)
    code, seconds = call(server.stub, quad, 600)
    print(f"{name}: 1 quadratic request ({len(quad.SerializeToString()) / 1024:.0f} KB): {code} in {seconds:.2f} s, "
          f"server peak RSS +{peak_rss_mib(server.proc.pid) - before:.0f} MiB")
    for what, req, give_up in (("quadratic requests", quad, 0.5), ("requests of 12,000 7x7 pairs",
                                                                    request(12_000, 7), 2.0)):
        code, seconds = busy_after_abandoned(server.stub, req, give_up)
        print(f"{name}: after 4 {what} abandoned at {give_up:g} s, a 1-pair request answered {code} "
              f"in {seconds:.2f} s")
    server.stop()

    server = Server(tree, models, "--grace-seconds", "2", *flags)
    big = request(long_pairs, 7)
    outcome = []
    t = threading.Thread(target=lambda: outcome.append(call(server.stub, big, 600)))
    t.start()
    time.sleep(3.0)
    busy = not outcome
    took = server.stop()
    t.join()
    print(f"{name}: SIGTERM with --grace-seconds 2 and a {long_pairs}-pair S8 request in flight "
          f"({'in flight' if busy else 'already done: not measured'}): exit after {took:.2f} s "
          f"(client got {outcome[0][0] if outcome else '?'})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, required=True, help="a checkout of the baseline commit")
    parser.add_argument("--long-pairs", type=int, default=60_000, help="pairs of the long request (scenario 3)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="serve-hostile-") as work:
        models = Path(work) / "models"
        keys = np.unique(np.random.default_rng(0).integers(1, 2**63, size=5000, dtype=np.uint64))
        rng = np.random.default_rng(1)
        write_model(models / "s8" / "1" / "model.mrw", family="maxent", moses_type="hier-msd-bidirectional-fe",
                    keys=keys, weights=rng.normal(size=(keys.shape[0], 6)).astype(np.float32),
                    bias=np.zeros(6, np.float32), features="S8", threshold=0)
        scenarios("baseline", args.baseline, models, [], args.long_pairs)
        scenarios("this tree", ROOT, models, [], args.long_pairs)
        scenarios("this tree, limits raised", ROOT, models,
                  ["--max-align-points", "5000", "--max-keys", str(10 ** 9)], args.long_pairs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
