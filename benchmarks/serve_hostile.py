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

`--part streams` (issue 46; baseline e.g. db52182) runs each server at its DEFAULT settings
too and prints:

7. Score latency (p50, p99 of a realistic ja-en request, one client) alone, then while 64
   calls that send their headers and never their message are held open on each of Score,
   GetModel, ListModels, Health/Check, Health/Watch and ServerReflectionInfo (384 in all,
   one channel per method): how many Scores got their answer, their p99, what Health/Check
   said meanwhile, the server's RSS per held call, and how many of the held calls the
   server itself ended within --receive-timeout-seconds (+2 s);
8. 200 malformed requests to each method, the stock ones included: INTERNAL per method,
   and how many were counted in `moses_reorder_requests_total` and logged;
9. 40 GetModel and 40 Health/Check calls naming a 3.9-million-character model/service:
   the codes a stock client gets and the server's log bytes per request byte;
10. peak RSS (VmHWM) of a server started over the repository with and without a 1 GiB
   sparse junk `model.mrw` beside the real model.

    PYTHONPATH=$PWD nice -n 10 python benchmarks/serve_hostile.py --baseline /work/base46 --part streams

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

    def log_bytes(self) -> int:
        return self.log.stat().st_size

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


def _candidate(rng: np.random.Generator) -> bytes:
    """Bytes that are often not a valid message: truncated fields, bad wire types, strings
    that are not UTF-8, random bytes."""
    kind = rng.integers(5)
    tail = rng.integers(0, 256, size=int(rng.integers(0, 24)), dtype=np.uint8).tobytes()
    if kind == 0:  # random bytes
        return rng.integers(0, 256, size=int(rng.integers(1, 64)), dtype=np.uint8).tobytes()
    if kind == 1:  # a string field 1 that is not UTF-8
        name = b"\xff\xfe" + tail
        return b"\x0a" + bytes([len(name)]) + name
    if kind == 2:  # a length-delimited field longer than what follows
        return bytes([(int(rng.integers(1, 13)) << 3) | 2, len(tail) + int(rng.integers(1, 100))]) + tail
    if kind == 3:  # wire types 3, 4, 6, 7
        return bytes([(int(rng.integers(1, 15)) << 3) | int(rng.choice([3, 4, 6, 7]))]) + tail
    return bytes([int(rng.integers(1, 13)) << 3]) + b"\xff" * int(rng.integers(1, 12))  # truncated varint


def malformed(rng: np.random.Generator, per_method: int = 50, types: dict | None = None) -> list[tuple[str, bytes]]:
    """Byte strings that protobuf's own parser refuses as each method's request type."""
    from google.protobuf.message import DecodeError

    out = []
    for method, kind in (types or REQUEST_TYPES).items():
        found = 0
        while found < per_method:
            raw = _candidate(rng)
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


# -- issue 46: idle calls, the stock services, long names, a junk model file -------------------
HEALTH, REFLECTION = "/grpc.health.v1.Health", "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
IDLE_METHODS = {"Score": f"/{SERVICE_NAME}/Score", "GetModel": f"/{SERVICE_NAME}/GetModel",
                "ListModels": f"/{SERVICE_NAME}/ListModels", "Health/Check": f"{HEALTH}/Check",
                "Health/Watch": f"{HEALTH}/Watch", "ServerReflectionInfo": REFLECTION}


def realistic_request(work: Path, corpus: Path) -> bytes:
    """The median-sized ja-en test sentence of benchmarks/serve.py, for the model s7."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from serve import build_requests

    requests = sorted(build_requests(corpus, work), key=len)
    parsed = pb.ScoreRequest.FromString(requests[len(requests) // 2])
    parsed.model = "s7"
    return parsed.SerializeToString()


def _latencies(score, raw: bytes, n: int, timeout: float, budget: float) -> tuple[list[float], collections.Counter]:
    """Up to n sequential Score calls within `budget` seconds: the OK latencies (ms) and every code."""
    ok, codes, until = [], collections.Counter(), time.monotonic() + budget
    for _ in range(n):
        if time.monotonic() > until:
            break
        started = time.monotonic()
        try:
            score(raw, timeout=timeout)
            ok.append((time.monotonic() - started) * 1e3)
            codes["OK"] += 1
        except grpc.RpcError as exc:
            codes[exc.code().name] += 1
    return ok, codes


def _p(values: list[float], q: float) -> str:
    return f"{np.percentile(values, q):.2f} ms" if values else "-"


def idle_scenario(name: str, tree: Path, models: Path, raw: bytes, per_method: int = 64) -> None:
    server = Server(tree, models)
    score = server.channel.unary_unary(f"/{SERVICE_NAME}/Score")
    _latencies(score, raw, 50, 5.0, 30)  # warm
    alone, _ = _latencies(score, raw, 300, 5.0, 60)
    rss_before = rss_mib(server.proc.pid)
    release = threading.Event()

    def nothing():
        release.wait()
        return
        yield

    channels = {m: grpc.insecure_channel(server.address) for m in IDLE_METHODS}
    opened = time.monotonic()
    held = {m: [channels[m].stream_stream(path)(nothing(), timeout=120) for _ in range(per_method)]
            for m, path in IDLE_METHODS.items()}
    time.sleep(1.0)
    with_held, codes = _latencies(score, raw, 300, 3.0, 20)
    check = server.channel.unary_unary(f"{HEALTH}/Check")
    try:
        from grpc_health.v1 import health_pb2
        said = health_pb2.HealthCheckResponse.ServingStatus.Name(
            health_pb2.HealthCheckResponse.FromString(check(b"", timeout=3)).status)
    except grpc.RpcError as exc:
        said = exc.code().name
    rss_held = rss_mib(server.proc.pid)
    time.sleep(max(0.0, opened + tree_receive_timeout(tree) + 2 - time.monotonic()))
    ended = sum(call.done() for calls in held.values() for call in calls)
    for calls in held.values():
        for call in calls:
            call.cancel()
    release.set()
    for channel in channels.values():
        channel.close()
    server.stop()
    n_held = per_method * len(IDLE_METHODS)
    print(f"{name}: Score alone: p50 {_p(alone, 50)}, p99 {_p(alone, 99)} ({len(alone)} calls); with {n_held} idle "
          f"calls held ({per_method} on each of {', '.join(IDLE_METHODS)}): {dict(codes)}, p50 {_p(with_held, 50)}, "
          f"p99 {_p(with_held, 99)}; Health/Check meanwhile: {said}; RSS +{(rss_held - rss_before) * 1024 / n_held:.1f} "
          f"KiB per held call; the server ended {ended} of the {n_held} held calls within "
          f"{tree_receive_timeout(tree) + 2:g} s")


def tree_receive_timeout(tree: Path) -> float:
    try:
        return float(tree_default_text(tree, "receive_timeout_seconds"))
    except subprocess.CalledProcessError:
        return 10.0  # a tree without the setting: wait as long as this one would


def tree_default_text(tree: Path, name: str) -> str:
    return subprocess.run([sys.executable, "-c", f"from server.options import default; print(default({name!r}))"],
                          cwd=tree, env=dict(os.environ, PYTHONPATH=str(tree)), capture_output=True, text=True,
                          check=True).stdout.strip()


STOCK_TYPES = {"Health/Check": (f"{HEALTH}/Check", "unary"), "Health/List": (f"{HEALTH}/List", "unary"),
               "Health/Watch": (f"{HEALTH}/Watch", "server-stream"),
               "ServerReflectionInfo": (REFLECTION, "bidi")}


def stock_types() -> dict:
    from grpc_health.v1 import health_pb2
    from grpc_reflection.v1alpha import reflection_pb2

    return {"Health/Check": health_pb2.HealthCheckRequest, "Health/List": health_pb2.HealthListRequest,
            "Health/Watch": health_pb2.HealthCheckRequest, "ServerReflectionInfo": reflection_pb2.ServerReflectionRequest}


def stock_malformed_scenario(name: str, tree: Path, models: Path, per_method: int = 200) -> None:
    rng = np.random.default_rng(46)
    ours = malformed(rng, per_method)
    stock = malformed(rng, per_method, stock_types())
    metrics_port = free_port()
    server = Server(tree, models, metrics_port=metrics_port)
    counted_before = metric_sum(metrics_port, "moses_reorder_requests_total")
    codes: collections.Counter = collections.Counter()
    for method, raw in ours + stock:
        path, shape = STOCK_TYPES.get(method, (f"/{SERVICE_NAME}/{method}", "unary"))
        try:
            if shape == "unary":
                server.channel.unary_unary(path)(raw, timeout=30)
            elif shape == "server-stream":
                for _ in server.channel.unary_stream(path)(raw, timeout=30):
                    break  # a Watch that parsed would stream for ever
            else:
                list(server.channel.stream_stream(path)(iter([raw]), timeout=30))
            codes[(method, "OK")] += 1
        except grpc.RpcError as exc:
            codes[(method, exc.code().name)] += 1
    counted = metric_sum(metrics_port, "moses_reorder_requests_total") - counted_before
    time.sleep(2.5)  # a flush of the refusals the rate limit left out
    events = server.event_counts()
    logged = sum(n for event, n in events.items() if event in ("request_refused", "request_failed"))
    flushed = events.get("request_refusals_suppressed", 0)
    server.stop()
    methods = list(dict.fromkeys(m for m, _ in ours + stock))
    internal = {m: codes.get((m, "INTERNAL"), 0) for m in methods}
    by_method = {m: dict(sorted((c, n) for (mm, c), n in codes.items() if mm == m)) for m in methods}
    print(f"{name}: {per_method} malformed requests to each of {len(methods)} methods: INTERNAL by method {internal}; "
          f"counted in requests_total {counted:.0f} of {len(ours) + len(stock)}; log lines {logged} "
          f"(+{flushed} lines reporting the suppressed); answers by method {by_method}")


def long_name_scenario(name: str, tree: Path, models: Path, n: int = 40, length: int = 3_900_000) -> None:
    from grpc_health.v1 import health_pb2

    server = Server(tree, models)
    time.sleep(0.5)
    rows = []
    for what, path, raw in (("GetModel(model=q*3.9M)", f"/{SERVICE_NAME}/GetModel",
                             pb.GetModelRequest(model="q" * length).SerializeToString()),
                            ("Health/Check(service=q*3.9M)", f"{HEALTH}/Check",
                             health_pb2.HealthCheckRequest(service="q" * length).SerializeToString())):
        before, codes, longest = server.log_bytes(), collections.Counter(), 0
        started = time.monotonic()
        for _ in range(n):
            try:
                server.channel.unary_unary(path)(raw, timeout=60)
                codes["OK"] += 1
            except grpc.RpcError as exc:
                codes[exc.code().name] += 1
                longest = max(longest, len(exc.details() or ""))
        seconds = time.monotonic() - started
        time.sleep(2.5)  # the log lines of the last second, and their flush
        grew = server.log_bytes() - before
        rows.append(f"{n} x {what}: {dict(codes)} in {seconds:.1f} s, longest status message {longest:,} "
                    f"characters, log +{grew:,} bytes = {grew / (n * len(raw)):.2g} log bytes per request byte")
    server.stop()
    print(f"{name}: " + "; ".join(rows))


def junk_scenario(name: str, tree: Path, models: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="junk-") as tmp:
        root = Path(tmp) / "models"
        (root / "s7" / "1").mkdir(parents=True)
        (root / "s7" / "1" / "model.mrw").write_bytes((models / "s7" / "1" / "model.mrw").read_bytes())
        (root / "s8" / "1").mkdir(parents=True)  # the Server class warms up on s8
        (root / "s8" / "1" / "model.mrw").write_bytes((models / "s8" / "1" / "model.mrw").read_bytes())
        peaks = {}
        for junk in (False, True):
            if junk:
                (root / "junk" / "1").mkdir(parents=True)
                with open(root / "junk" / "1" / "model.mrw", "wb") as f:
                    f.truncate(1 << 30)  # sparse: no disk used
            started = time.monotonic()
            server = Server(tree, root)
            peaks[junk] = (peak_rss_mib(server.proc.pid), time.monotonic() - started)
            server.stop()
    print(f"{name}: start-up peak RSS (VmHWM) without a junk file {peaks[False][0]:.0f} MiB (listening after "
          f"{peaks[False][1]:.1f} s); with a 1 GiB sparse junk model.mrw beside it {peaks[True][0]:.0f} MiB "
          f"(after {peaks[True][1]:.1f} s)")


def hostile(name: str, tree: Path, models: Path, work: Path, corpus: Path) -> None:
    malformed_scenario(name, tree, models)
    memory_scenario(name, tree, models, work, corpus)
    flood_scenario(name, tree, models, deadline=5.0)
    flood_scenario(name, tree, models, deadline=None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, required=True, help="a checkout of the baseline commit")
    parser.add_argument("--long-pairs", type=int, default=60_000, help="pairs of the long request (scenario 3)")
    parser.add_argument("--part", choices=["slices", "hostile", "both", "streams"], default="both",
                        help="slices: issue 15's scenarios 1-3; hostile: issue 31's 4-6; streams: issue 46's 7-10")
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
        if args.part == "streams":
            args.work.mkdir(parents=True, exist_ok=True)
            print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())} (2 cores, shared)")
            for scenario in (lambda n, t: idle_scenario(n, t, models, realistic_request(args.work, args.corpus)),
                             lambda n, t: stock_malformed_scenario(n, t, models),
                             lambda n, t: long_name_scenario(n, t, models),
                             lambda n, t: junk_scenario(n, t, models)):
                for label, tree in (("baseline", args.baseline), ("this tree", ROOT)):
                    scenario(label, tree)
            print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
