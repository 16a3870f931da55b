"""What hostile requests and a SIGTERM cost the scoring server, before and after issues 15 and 31.

Runs the same scenarios against two checkouts in one run: the baseline (e.g. 8b70bde,
exported with `git archive 8b70bde | tar -x -C DIR`) and this tree, each as a real
`moses-reorder serve` process on a loopback port over an S8 model (ANOVA d=2 over the
alignment points + context 1, seeded weights). `--part slices` (issue 15) runs:

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

    PYTHONPATH=$PWD nice -n 10 python benchmarks/serve_hostile.py --baseline /tmp/old-8b70bde --part slices

This tree runs twice there: with its default limits (the quadratic requests are refused;
the long request of scenario 3 too), and with the limits raised (--max-align-points 5000
--max-keys 10^9) so that the same requests are legal and what is measured is the sliced
scoring: stopping for a client that gave up, and the grace bound on exit.

`--part hostile` (issue 31; baseline e.g. cbd7ba5) runs each server at its DEFAULT
settings (no flag but the repository, port and polling) and prints:

4. 200 malformed requests (50 per RPC: truncated fields, bad wire types, model names
   that are not UTF-8, random bytes; each one refused by protobuf's own parser for that
   RPC's request type), admin off: the status codes, the INTERNAL count, and how many
   of them the server logged and counted in `moses_reorder_requests_total`;
5. the peak RSS above idle (VmHWM) and what stays after (VmRSS) for 8 concurrent copies
   of each maximal request shape at that tree's default limits: a source sentence that
   fills the message limit (the issue's 16M-token source), a token table of empty
   tokens that fills it, long target phrases that fill it, and --max-pairs real ja-en
   phrase pairs (the largest ja-en test sentence's options, repeated; needs the store
   that benchmarks/serve.py extracts into --work);
6. a flood of 100 concurrent heavy requests (S8, 1,500 pairs of 7 x 7 phrases with all
   49 points: ~1.9M keys each), once with a 5 s deadline and once without: the status
   codes, the slowest refusal, the time until every client has its answer, and how long
   a 1-pair request then waits (the work the server still does for nobody).

    PYTHONPATH=$PWD nice -n 10 python benchmarks/serve_hostile.py --baseline /tmp/old-cbd7ba5 --part hostile

It measures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import collections
import os
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

from server.api import SERVICE_NAME, pb, pb_grpc  # noqa: E402
from server.local import LocalServer, free_port  # noqa: E402
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


SLICES = {"cache_size": 0, "max_message_mb": 64}  # what --part slices runs every server with


class Server(LocalServer):
    """`serve` from TREE's code (the baseline checkout or this one; server.local), started, with
    a channel for large messages, warmed by one request."""

    def __init__(self, tree: Path, models: Path, **settings):
        super().__init__(models, tree=tree, poll_seconds=0, **settings)
        self.start()
        self.channel = grpc.insecure_channel(self.address, options=[("grpc.max_receive_message_length", 64 << 20),
                                                                    ("grpc.max_send_message_length", 64 << 20)])
        self.stub = pb_grpc.ReorderingScorerStub(self.channel)
        self.stub.Score(request(1, 1), timeout=120)  # warm

    def event_counts(self) -> collections.Counter:
        """Its JSON log lines by event name."""
        return collections.Counter(e.get("event") for e in self.events)

    def stop(self, *args, **kwargs) -> float:
        """Seconds from SIGTERM to exit."""
        started = time.monotonic()
        super().stop(timeout=300)
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


def scenarios(name: str, tree: Path, models: Path, settings: dict, long_pairs: int) -> None:
    quad = request(1, 64)
    server = Server(tree, models, **SLICES, **settings)
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

    server = Server(tree, models, **SLICES, grace_seconds=2, **settings)
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


# -- issue 31: every server at its default settings -------------------------------------------
def tree_default(tree: Path, name: str):
    """A default of that tree's `moses-reorder serve` (server.options.default)."""
    out = subprocess.run([sys.executable, "-c", f"from server.options import default; print(default({name!r}))"],
                         cwd=tree, env=dict(os.environ, PYTHONPATH=str(tree)), capture_output=True, text=True,
                         check=True)
    return int(out.stdout)


def distinct(raw: bytes, i: int) -> bytes:
    """`raw` plus an unknown varint field 100 = i: the same request to the server's parser,
    a different result-cache key (so eight copies are eight computations)."""
    return raw + b"\xa0\x06" + _varint(i)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        out.append((value & 0x7F) | (0x80 if value > 0x7F else 0))
        value >>= 7
        if not value:
            return bytes(out)


REQUEST_TYPES = {"Score": pb.ScoreRequest, "GetModel": pb.GetModelRequest, "ListModels": pb.ListModelsRequest,
                 "Reload": pb.ReloadRequest}


def malformed(rng: np.random.Generator, per_method: int = 50) -> list[tuple[str, bytes]]:
    """Byte strings that protobuf's own parser refuses as each RPC's request type."""
    from google.protobuf.message import DecodeError

    def candidate() -> bytes:
        kind = rng.integers(5)
        tail = rng.integers(0, 256, size=int(rng.integers(0, 24)), dtype=np.uint8).tobytes()
        if kind == 0:  # random bytes
            return rng.integers(0, 256, size=int(rng.integers(1, 64)), dtype=np.uint8).tobytes()
        if kind == 1:  # a model name that is not UTF-8
            name = b"\xff\xfe" + tail
            return b"\x0a" + bytes([len(name)]) + name
        if kind == 2:  # a length-delimited field longer than what follows
            return bytes([(int(rng.integers(1, 13)) << 3) | 2, len(tail) + int(rng.integers(1, 100))]) + tail
        if kind == 3:  # wire types 3, 4, 6, 7
            return bytes([(int(rng.integers(1, 15)) << 3) | int(rng.choice([3, 4, 6, 7]))]) + tail
        return bytes([int(rng.integers(1, 13)) << 3]) + b"\xff" * int(rng.integers(1, 12))  # truncated varint

    out = []
    for method, kind in REQUEST_TYPES.items():
        found = 0
        while found < per_method:
            raw = candidate()
            try:
                kind.FromString(raw)
            except DecodeError:
                out.append((method, raw))
                found += 1
    return out


def metric_sum(port: int, name: str) -> float:
    import urllib.request

    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + "{"))


def malformed_scenario(name: str, tree: Path, models: Path) -> None:
    requests = malformed(np.random.default_rng(31))
    metrics_port = free_port()
    server = Server(tree, models, metrics_port=metrics_port)
    counted_before = metric_sum(metrics_port, "moses_reorder_requests_total")
    codes: collections.Counter = collections.Counter()
    for method, raw in requests:
        try:
            server.channel.unary_unary(f"/{SERVICE_NAME}/{method}")(raw, timeout=30)
            codes[(method, "OK")] += 1
        except grpc.RpcError as exc:
            codes[(method, exc.code().name)] += 1
    counted = metric_sum(metrics_port, "moses_reorder_requests_total") - counted_before
    time.sleep(0.5)
    logged = sum(n for event, n in server.event_counts().items() if event in ("request_refused", "request_failed"))
    alive = call(server.stub, request(1, 1), 60)[0]
    server.stop()
    internal = sum(n for (_, code), n in codes.items() if code == "INTERNAL")
    by_method = {m: dict(sorted((c, n) for (mm, c), n in codes.items() if mm == m)) for m in REQUEST_TYPES}
    print(f"{name}: {len(requests)} malformed requests (admin off): INTERNAL {internal}; counted in "
          f"requests_total {counted:.0f}; log lines {logged} (refusals are logged at most 10 a second per "
          f"method and code); a good Score afterwards: {alive}; by method {by_method}")


def maximal_requests(tree: Path, work: Path, corpus: Path) -> dict[str, bytes]:
    """One request of each shape, as large as the tree's default limits let it be."""
    limit = tree_default(tree, "max_message_mb") << 20
    room = limit - 4096  # the fields around the big one
    one_pair = dict(span_start=[0], span_end=[1], target_offsets=[0, 1], target_tokens=[0], align_offsets=[0, 1],
                    align_source=[0], align_target=[0])
    shapes = {
        "source fills the message": pb.ScoreRequest(model="s7", token_bytes=b"a", token_offsets=[0, 1],
                                                    source=np.zeros(room, np.uint32), **one_pair),
        "empty tokens fill the table": pb.ScoreRequest(model="s7", token_offsets=np.zeros(room, np.uint32),
                                                       target_offsets=[0], align_offsets=[0]),
    }
    n_pairs, width = room // 4110, 4096  # target phrases of 4,096 words
    shapes["long target phrases fill it"] = pb.ScoreRequest(
        model="s7", token_bytes=b"ab", token_offsets=[0, 1, 2], source=[0, 1], span_start=np.zeros(n_pairs, np.uint32),
        span_end=np.ones(n_pairs, np.uint32), target_offsets=np.arange(n_pairs + 1, dtype=np.uint32) * width,
        target_tokens=np.ones(n_pairs * width, np.uint32), align_offsets=np.arange(n_pairs + 1, dtype=np.uint32),
        align_source=np.zeros(n_pairs, np.uint32), align_target=np.zeros(n_pairs, np.uint32))
    out = {shape: r.SerializeToString() for shape, r in shapes.items()}
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from serve import _grow_to, build_requests

    real = max(build_requests(corpus, work), key=len)
    grown = _grow_to(real, tree_default(tree, "max_pairs"))
    parsed = pb.ScoreRequest.FromString(grown)
    parsed.model = "s7"
    out["--max-pairs real ja-en pairs"] = parsed.SerializeToString()
    return out


def memory_scenario(name: str, tree: Path, models: Path, work: Path, corpus: Path) -> None:
    for shape, raw in maximal_requests(tree, work, corpus).items():
        server = Server(tree, models)
        time.sleep(1.0)
        idle = rss_mib(server.proc.pid)
        score = server.channel.unary_unary(f"/{SERVICE_NAME}/Score")
        outcomes: list = []

        def one(i: int) -> None:
            started = time.monotonic()
            try:
                score(distinct(raw, i), timeout=600)
                outcomes.append(("OK", time.monotonic() - started))
            except grpc.RpcError as exc:
                outcomes.append((exc.code().name, time.monotonic() - started))

        threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        time.sleep(1.0)
        peak, after = peak_rss_mib(server.proc.pid), rss_mib(server.proc.pid)
        server.stop()
        codes = collections.Counter(code for code, _ in outcomes)
        print(f"{name}: 8 x {shape} ({len(raw) / 2**20:.2f} MiB each): {dict(codes)} in at most "
              f"{max(s for _, s in outcomes):.2f} s; peak RSS +{peak - idle:.0f} MiB over idle {idle:.0f} MiB, "
              f"+{after - idle:.0f} MiB after")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def flood_scenario(name: str, tree: Path, models: Path, n: int = 100, deadline: float | None = 5.0) -> None:
    heavy = request(1500, 7).SerializeToString()  # S8: 1,500 x 1,275 keys = 1.9M keys
    server = Server(tree, models)
    score = server.channel.unary_unary(f"/{SERVICE_NAME}/Score")
    outcomes: list = []
    barrier = threading.Barrier(n)

    def one(i: int) -> None:
        payload = distinct(heavy, i)
        barrier.wait()
        started = time.monotonic()
        try:
            score(payload, timeout=deadline)
            outcomes.append(("OK", time.monotonic() - started))
        except grpc.RpcError as exc:
            outcomes.append((exc.code().name, time.monotonic() - started))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    everyone = time.monotonic() - started
    probe_code, probe = call(server.stub, request(1, 1), 600)
    server.stop()
    codes = collections.Counter(code for code, _ in outcomes)
    refused = max((s for code, s in outcomes if code == "RESOURCE_EXHAUSTED"), default=float("nan"))
    answered = max((s for code, s in outcomes if code == "OK"), default=float("nan"))
    print(f"{name}: flood of {n} heavy requests (1.9M keys each), deadline "
          f"{'none' if deadline is None else f'{deadline:g} s'}: {dict(codes)}; slowest refusal "
          f"{refused:.2f} s, slowest OK {answered:.2f} s; "
          f"every client answered after {everyone:.2f} s; then a 1-pair request: {probe_code} in {probe:.2f} s")


def hostile(name: str, tree: Path, models: Path, work: Path, corpus: Path) -> None:
    malformed_scenario(name, tree, models)
    memory_scenario(name, tree, models, work, corpus)
    flood_scenario(name, tree, models, deadline=5.0)
    flood_scenario(name, tree, models, deadline=None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, required=True, help="a checkout of the baseline commit")
    parser.add_argument("--long-pairs", type=int, default=60_000, help="pairs of the long request (scenario 3)")
    parser.add_argument("--part", choices=["slices", "hostile", "both"], default="both",
                        help="slices: issue 15's scenarios 1-3; hostile: issue 31's 4-6")
    parser.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "data" / "ja-en")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "moses-reorder-bench-serve",
                        help="benchmarks/serve.py's work directory (the ja-en extraction and requests)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="serve-hostile-") as work:
        models = Path(work) / "models"
        keys = np.unique(np.random.default_rng(0).integers(1, 2**63, size=5000, dtype=np.uint64))
        rng = np.random.default_rng(1)
        for features in ("S8", "S7"):
            write_model(models / features.lower() / "1" / "model.mrw", family="maxent",
                        moses_type="hier-msd-bidirectional-fe", keys=keys,
                        weights=rng.normal(size=(keys.shape[0], 6)).astype(np.float32),
                        bias=np.zeros(6, np.float32), features=features, threshold=0)
        if args.part in ("slices", "both"):
            scenarios("baseline", args.baseline, models, {}, args.long_pairs)
            scenarios("this tree", ROOT, models, {}, args.long_pairs)
            scenarios("this tree, limits raised", ROOT, models,
                      {"max_align_points": 5000, "max_keys": 10 ** 9}, args.long_pairs)
        if args.part in ("hostile", "both"):
            args.work.mkdir(parents=True, exist_ok=True)
            hostile("baseline", args.baseline, models, args.work, args.corpus)
            hostile("this tree", ROOT, models, args.work, args.corpus)
    return 0


if __name__ == "__main__":
    sys.exit(main())
