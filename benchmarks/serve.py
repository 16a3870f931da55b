"""Load generator for the scoring service: real ja-en test sentences with real phrase pairs.

What it replays: every ja-en test sentence with every phrase pair that a phrase table
built from our own extraction of ja-en train offers for it -- all source spans of up to
7 words found in the table, up to 20 target phrases per span, most frequent first (Moses's
table limit), the in-phrase alignment being that pair's most frequent one. One Score RPC
per sentence, from C concurrent clients (grpc.aio, one connection each so SO_REUSEPORT
spreads them over the worker processes).

What it prints: pairs/s, p50/p99 latency per sentence request, server CPU per 1k pairs,
with the result cache off and on (cache on = a tuning run replaying the same dev set),
the latency of a 2,000-pair sentence request, and request latencies around a model swap.

The model: --model FILE (e.g. a trained one), or one written with training.modelfile.model over
the feature keys that occur more than --threshold times in the train extraction
(seeded weights: scoring cost depends on the keys and the table size, not the values).

    PYTHONPATH=$PWD nice -n 10 python benchmarks/serve.py --features S7 --clients 8

With `--baseline DIR` (a checkout of another commit, e.g. `git worktree add --detach DIR
db52182`) it instead serves the same model from that tree and from this one in turn,
--rounds times each (cache off, the 2,000-pair sentence, cache on), and prints one table
with both trees, the medians and this tree's ratio to the baseline: the machine's other
jobs change from minute to minute, so only figures from one interleaved run compare.

It measures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from server.api import SERVICE_NAME, pb  # noqa: E402
from server.local import LocalServer  # noqa: E402
from training.modelfile.request import arrays_from_strings  # noqa: E402

METHOD = f"/{SERVICE_NAME}/Score"
MODEL_NAME = "bench"
CLK_TCK = os.sysconf("SC_CLK_TCK")


# -- the phrase table and the requests -----------------------------------------------------
def _extract_store(corpus: Path, work: Path) -> Path:
    store = work / "store-ja-en"
    if not (store / "store.json").exists():
        print(f"extracting {corpus}/train.* -> {store} ...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "training.cli", "extract", "--src", str(corpus / "train.ja"),
                        "--tgt", str(corpus / "train.en"), "--align", str(corpus / "train.align"),
                        "--out", str(store), "--quiet"], check=True, env=_env())
    return store


def _phrase_keys(ids: np.ndarray, offsets: np.ndarray, sent: np.ndarray, start: np.ndarray,
                 end: np.ndarray) -> np.ndarray:
    """A 64-bit key per phrase (token ids of sentence `sent`, [start, end)), vectorized."""
    base = offsets[sent] + start
    length = end - start
    key = np.zeros(len(sent), dtype=np.uint64)
    prime = np.uint64(0x100000001B3)
    for k in range(int(length.max()) if len(length) else 0):
        inside = k < length
        tok = np.where(inside, ids[np.minimum(base + k, len(ids) - 1)].astype(np.int64) + 1, 0)
        key = np.where(inside, (key ^ tok.astype(np.uint64)) * prime, key)
    return key ^ length.astype(np.uint64)


def build_requests(corpus: Path, work: Path, max_len: int = 7, limit: int = 20) -> list[bytes]:
    """Serialized ScoreRequests, one per test sentence (cached in WORK/requests.bin)."""
    cached = work / f"requests-l{max_len}-t{limit}.bin"
    if cached.exists():
        return _read_framed(cached)
    from training.store.examples import ExampleStore

    store = ExampleStore.open(_extract_store(corpus, work))
    s = store.sentences
    src_index = {t: i for i, t in enumerate(store.src_vocab)}
    test = [line.split() for line in (corpus / "test.ja").read_text(encoding="utf-8").splitlines()]
    # every test span (<= max_len words, all in the train vocabulary) and its key
    spans = []  # (sentence, start, end, key)
    for n, words in enumerate(test):
        ids = np.array([src_index.get(w, -1) for w in words], dtype=np.int64)
        for i in range(len(words)):
            for j in range(i + 1, min(i + max_len, len(words)) + 1):
                if ids[j - 1] < 0:
                    break
                spans.append((n, i, j, ids[i:j]))
    flat = np.concatenate([sp[3] for sp in spans]) if spans else np.zeros(0, np.int64)
    off = np.zeros(len(spans) + 1, dtype=np.int64)
    np.cumsum([len(sp[3]) for sp in spans], out=off[1:])
    idx = np.arange(len(spans))
    span_keys = _phrase_keys(flat, off, idx, np.zeros_like(idx), np.diff(off))
    wanted = set(span_keys.tolist())

    counts: dict[tuple[int, int], int] = Counter()
    aligns: dict[tuple[int, int], Counter] = defaultdict(Counter)
    tgt_text: dict[int, tuple[str, ...]] = {}
    for chunk in store.iter_chunks():
        sent = chunk.sentence.astype(np.int64)
        src_key = _phrase_keys(s["src_ids"], s["src_offsets"], sent, chunk.src_start.astype(np.int64),
                               chunk.src_end.astype(np.int64))
        keep = np.flatnonzero(np.isin(src_key, np.fromiter(wanted, dtype=np.uint64)))
        tgt_key = _phrase_keys(s["tgt_ids"], s["tgt_offsets"], sent[keep], chunk.tgt_start[keep].astype(np.int64),
                               chunk.tgt_end[keep].astype(np.int64))
        for r, sk, tk in zip(keep.tolist(), src_key[keep].tolist(), tgt_key.tolist()):
            sn = int(sent[r])
            ss, se, ts, te = (int(chunk.src_start[r]), int(chunk.src_end[r]),
                              int(chunk.tgt_start[r]), int(chunk.tgt_end[r]))
            counts[(sk, tk)] += 1
            if tk not in tgt_text:
                t0 = s["tgt_offsets"][sn]
                tgt_text[tk] = tuple(store.tgt_vocab[t] for t in s["tgt_ids"][t0 + ts:t0 + te])
            a = s["align"][s["align_offsets"][sn]:s["align_offsets"][sn + 1]]
            inside = (a[:, 0] >= ss) & (a[:, 0] < se) & (a[:, 1] >= ts) & (a[:, 1] < te)
            aligns[(sk, tk)][tuple(map(tuple, (a[inside] - (ss, ts)).tolist()))] += 1
    by_source: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for (sk, tk), c in counts.items():
        by_source[sk].append((c, tk))
    requests = []
    for n, words in enumerate(test):
        pairs = []
        for (sn, i, j, _), key in zip(spans, span_keys.tolist()):
            if sn != n or key not in by_source:
                continue
            # most frequent first; ties by target text so the order is reproducible
            options = sorted(by_source[key], key=lambda ct: (-ct[0], tgt_text[ct[1]]))[:limit]
            for _, tk in options:
                alignment = aligns[(key, tk)].most_common(1)[0][0]
                pairs.append((i, j, list(tgt_text[tk]), list(alignment)))
        requests.append(pb.ScoreRequest(model=MODEL_NAME, **arrays_from_strings(words, pairs)).SerializeToString())
    _write_framed(cached, requests)
    return requests


def _write_framed(path: Path, items: list[bytes]) -> None:
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        for item in items:
            f.write(len(item).to_bytes(4, "little"))
            f.write(item)
    os.replace(tmp, path)


def _read_framed(path: Path) -> list[bytes]:
    data, out, pos = path.read_bytes(), [], 0
    while pos < len(data):
        n = int.from_bytes(data[pos:pos + 4], "little")
        out.append(data[pos + 4:pos + 4 + n])
        pos += 4 + n
    return out


def n_pairs(request: bytes) -> int:
    return len(pb.ScoreRequest.FromString(request).span_start)


# -- the model -------------------------------------------------------------------------------
def build_model(corpus: Path, work: Path, features: str, threshold: int, moses_type: str) -> Path:
    path = work / f"model-{features}-t{threshold}-{moses_type}.mrw"
    if path.exists():
        return path
    from training.features.templates import extract_keys
    from training.features.spec import FeatureSpec
    from training.modelfile.model import write_model
    from training.moses.types import MosesType
    from training.store.examples import ExampleStore

    store = ExampleStore.open(_extract_store(corpus, work))
    spec = FeatureSpec.parse(features)
    uniques, counts = [], []
    for chunk in store.iter_chunks():
        _, keys = extract_keys(chunk.batch, spec)
        u, c = np.unique(keys, return_counts=True)
        uniques.append(u)
        counts.append(c)
    u = np.concatenate(uniques)
    order = np.argsort(u, kind="stable")
    u, c = u[order], np.concatenate(counts)[order]
    starts = np.flatnonzero(np.r_[True, u[1:] != u[:-1]])
    keys, totals = u[starts], np.add.reduceat(c, starts)
    keys = keys[totals > threshold]
    n_out = len(MosesType.parse(moses_type).outputs)
    rng = np.random.default_rng(0)
    write_model(path, family="maxent", moses_type=moses_type, keys=keys,
                weights=rng.normal(0, 0.5, size=(len(keys), n_out)).astype(np.float32),
                bias=np.zeros(n_out, dtype=np.float32), features=features, threshold=threshold,
                trainer="benchmarks/serve.py (seeded weights over the train extraction's keys)")
    return path


# -- the server --------------------------------------------------------------------------------
def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


class Server(LocalServer):
    """The server under load (server.local), started; plus the CPU time of its processes."""

    def __init__(self, root: Path, workers: int, cache_size: int, poll_seconds: float, threads: int,
                 balance: str, tree: Path = ROOT):
        super().__init__(root, workers=workers, cache_size=cache_size, poll_seconds=poll_seconds, threads=threads,
                         port_per_worker=balance == "round_robin" and workers > 1, tree=tree)
        self.start()

    def cpu_seconds(self) -> float:
        total = 0
        for pid in self.pids:
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += int(fields[11]) + int(fields[12])  # utime, stime
        return total / CLK_TCK


# -- the load -----------------------------------------------------------------------------------
async def _run_load(target: str, requests: list[bytes], sizes: list[int], clients: int, seconds: float,
                    parse_version: bool = False, on_tick=None) -> dict:
    import grpc

    options = [("grpc.use_local_subchannel_pool", 1), ("grpc.max_receive_message_length", 64 << 20),
               ("grpc.lb_policy_name", "round_robin")]
    channels = [grpc.aio.insecure_channel(target, options=options) for _ in range(clients)]
    calls = [ch.unary_unary(METHOD) for ch in channels]
    records: list[tuple[float, float, int, int]] = []  # (start, latency, pairs, version)
    errors: list[str] = []
    counter = iter(range(1 << 62))
    deadline = time.perf_counter() + seconds

    async def client(call) -> None:
        while time.perf_counter() < deadline:
            k = next(counter) % len(requests)
            t0 = time.perf_counter()
            try:
                body = await call(requests[k], timeout=30)
            except grpc.RpcError as exc:
                errors.append(f"{exc.code().name}: {exc.details()}")
                continue
            latency = time.perf_counter() - t0
            version = pb.ScoreResponse.FromString(body).version if parse_version else 0
            records.append((t0, latency, sizes[k], version))

    tasks = [asyncio.create_task(client(c)) for c in calls]
    if on_tick is not None:
        tasks.append(asyncio.create_task(on_tick()))
    await asyncio.gather(*tasks)
    for ch in channels:
        await ch.close()
    return {"records": records, "errors": errors}


def check_answers(server: Server, requests: list[bytes], loaded, n: int = 20) -> None:
    """Before any timing: the served answers are the model file's own (server/client.py)."""
    from server.client import ScoringClient
    from training.modelfile.request import batch_from_request_arrays

    fields = ("token_bytes", "token_offsets", "source", "span_start", "span_end", "target_offsets",
              "target_tokens", "align_offsets", "align_source", "align_target")
    with ScoringClient(server.target, model=MODEL_NAME, timeout=60) as client:
        version = client.pin()
        for body in requests[:n]:
            request = pb.ScoreRequest.FromString(body)
            served = client.score_request(request).probabilities
            local = loaded.predict_proba(batch_from_request_arrays(**{f: getattr(request, f) for f in fields}))
            if served.shape != local.shape or not np.allclose(served, local, atol=1e-6):
                raise RuntimeError(f"the server's answer differs from the model file's (version {version})")
    print(f"   checked: {n} served answers equal the model file's (version {version})")


def load(server: Server, requests, sizes, clients: int, seconds: float, **kw) -> dict:
    cpu0, self0, wall0 = server.cpu_seconds(), time.process_time(), time.perf_counter()
    out = asyncio.run(_run_load(server.target, requests, sizes, clients, seconds, **kw))
    wall = time.perf_counter() - wall0
    out["server_cpu"] = server.cpu_seconds() - cpu0
    out["client_cpu"] = time.process_time() - self0
    out["wall"] = wall
    return out


def summarize(name: str, result: dict) -> dict:
    rec = result["records"]
    lat = np.array([r[1] for r in rec]) * 1e3
    pairs = sum(r[2] for r in rec)
    row = {
        "phase": name, "requests": len(rec), "errors": len(result["errors"]),
        "pairs_per_s": pairs / result["wall"], "req_per_s": len(rec) / result["wall"],
        "p50_ms": float(np.percentile(lat, 50)) if len(lat) else float("nan"),
        "p99_ms": float(np.percentile(lat, 99)) if len(lat) else float("nan"),
        "max_ms": float(lat.max()) if len(lat) else float("nan"),
        "server_cpu_ms_per_1k_pairs": 1e6 * result["server_cpu"] / max(pairs, 1),
        "client_cpu_ms_per_1k_pairs": 1e6 * result["client_cpu"] / max(pairs, 1),
    }
    print(f"{name:<28} {row['pairs_per_s']:>11,.0f} pairs/s {row['req_per_s']:>8,.0f} req/s  "
          f"p50 {row['p50_ms']:6.2f} ms  p99 {row['p99_ms']:6.2f} ms  max {row['max_ms']:7.2f} ms  "
          f"server CPU {row['server_cpu_ms_per_1k_pairs']:.3f} ms/1k pairs  "
          f"client CPU {row['client_cpu_ms_per_1k_pairs']:.3f} ms/1k pairs  errors {row['errors']}")
    if result["errors"]:
        print("   first errors:", result["errors"][:3])
    return row


def stage_profile(requests: list[bytes], model_path: Path, repeats: int = 3) -> dict:
    """CPU time per phrase pair of each step of one Score, in this process (no gRPC):
    where a request's time goes, measured with process_time so other jobs on the machine
    inflate it less than wall time."""
    from server.service import arrays_from_message, score_response_bytes
    from server.repository import load_served_model
    from training.features.templates import extract_keys
    from training.modelfile.request import batch_from_request_arrays

    served = load_served_model(MODEL_NAME, 1, model_path)
    model = served.model
    steps = dict.fromkeys(["parse", "to numpy", "validate+hash (request.py)", "extract_keys (features.py)",
                           "scores (model.py)", "link (links.py)", "response bytes"], 0.0)
    pairs = 0
    for _ in range(repeats):
        for raw in requests:
            t0 = time.process_time()
            request = pb.ScoreRequest.FromString(raw)
            t1 = time.process_time()
            arrays = arrays_from_message(request)
            t2 = time.process_time()
            batch = batch_from_request_arrays(**arrays)
            t3 = time.process_time()
            indptr, keys = extract_keys(batch, model.spec)
            t4 = time.process_time()
            scores, n_found = model.scores(indptr, keys)
            t5 = time.process_time()
            from training.modelfile.links import LINKS
            probs = LINKS[model.link_name](model, scores, n_found)
            t6 = time.process_time()
            score_response_bytes(served, probs)
            t7 = time.process_time()
            for name, dt in zip(steps, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5, t7 - t6)):
                steps[name] += dt
            pairs += len(request.span_start)
    total = sum(steps.values())
    print("CPU per phrase pair of each step (in-process, no gRPC; all test sentences x "
          f"{repeats}): " + ", ".join(f"{k} {v / pairs * 1e6:.3f} us" for k, v in steps.items())
          + f"; total {total / pairs * 1e6:.3f} us/pair")
    return {k: v / pairs * 1e6 for k, v in steps.items()}


def compare(args, root: Path, requests: list[bytes], sizes: list[int]) -> list[dict]:
    """The load phases for the baseline tree and this one, interleaved round by round."""
    big = _grow_to(requests[int(np.argmax(sizes))], 2000)
    trees = {"baseline": args.baseline.resolve(), "this tree": ROOT}
    from training.modelfile.model import load_model

    rows = []
    for rnd in range(args.rounds):
        for name, tree in trees.items():
            for cache_size in (0, 4096):
                server = Server(root, args.workers, cache_size=cache_size, poll_seconds=0, threads=args.threads,
                                balance=args.balance, tree=tree)
                try:
                    if rnd == 0 and not cache_size:
                        check_answers(server, requests, load_model(args.model_path))
                    load(server, requests, sizes, args.clients, 2.0)  # warm-up (fills the caches when on)
                    phases = [("cache off", requests, sizes, args.clients), ("2,000-pair sentence, 1 client", [big],
                                                                             [2000], 1)] if not cache_size else \
                        [("cache on (warm)", requests, sizes, args.clients)]
                    for phase, reqs, szs, clients in phases:
                        row = summarize(f"{name} r{rnd + 1}: {phase}", load(server, reqs, szs, clients, args.seconds))
                        row.update(tree=name, round=rnd + 1, load_average=os.getloadavg()[0], phase=phase)
                        rows.append(row)
                finally:
                    server.stop()
    print("\nmedians over the rounds (pairs/s; p50/p99 ms; server CPU ms per 1k pairs) and this tree / baseline:")
    for phase in dict.fromkeys(r["phase"] for r in rows):
        med = {name: {k: float(np.median([r[k] for r in rows if r["tree"] == name and r["phase"] == phase]))
                      for k in ("pairs_per_s", "p50_ms", "p99_ms", "server_cpu_ms_per_1k_pairs")} for name in trees}
        b, t = med["baseline"], med["this tree"]
        print(f"| {phase} | {b['pairs_per_s']:,.0f}; {b['p50_ms']:.2f}/{b['p99_ms']:.2f}; "
              f"{b['server_cpu_ms_per_1k_pairs']:.3f} | {t['pairs_per_s']:,.0f}; {t['p50_ms']:.2f}/{t['p99_ms']:.2f}; "
              f"{t['server_cpu_ms_per_1k_pairs']:.3f} | {t['pairs_per_s'] / b['pairs_per_s']:.2f}x pairs/s, "
              f"{t['server_cpu_ms_per_1k_pairs'] / b['server_cpu_ms_per_1k_pairs']:.2f}x CPU/pair |")
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "data" / "ja-en")
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "moses-reorder-bench-serve")
    ap.add_argument("--model", type=Path, help="serve this model file instead of building one")
    ap.add_argument("--features", default="S7")
    ap.add_argument("--threshold", type=int, default=10)
    ap.add_argument("--moses-type", default="hier-msd-bidirectional-fe")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--balance", choices=["round_robin", "reuseport"], default="round_robin",
                    help="round_robin: serve --port-per-worker and every client channel balances RPCs over "
                         "the workers; reuseport: one shared port, the kernel spreads the connections")
    ap.add_argument("--seconds", type=float, default=10.0, help="per measured phase")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--baseline", type=Path, help="a checkout of another commit: compare it with this tree")
    ap.add_argument("--rounds", type=int, default=3, help="with --baseline: rounds of both trees, interleaved")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)

    t = time.perf_counter()
    requests = build_requests(args.corpus, args.work)
    sizes = [n_pairs(r) for r in requests]
    print(f"{len(requests)} test sentences, {sum(sizes):,} phrase pairs (per sentence: median "
          f"{int(np.median(sizes))}, p90 {int(np.percentile(sizes, 90))}, max {max(sizes)}) "
          f"[{time.perf_counter() - t:.1f} s]")
    model = args.model or build_model(args.corpus, args.work, args.features, args.threshold, args.moses_type)
    from training.modelfile.model import load_model
    loaded = load_model(model)
    print(f"model {model}: {loaded.moses_type}, features {loaded.metadata['features']}, "
          f"{loaded.n_features:,} keys, {model.stat().st_size / 1e6:.1f} MB")

    stage_profile(requests[:50], model, repeats=1)  # compiles and warms up
    steps = stage_profile(requests, model)
    root = args.work / "repo"
    shutil.rmtree(root, ignore_errors=True)
    (root / MODEL_NAME / "1").mkdir(parents=True)
    shutil.copy(model, root / MODEL_NAME / "1" / model.name.replace(model.stem, "model"))
    rows = []
    print(f"server: {args.workers} worker processes x {args.threads} threads ({args.balance}); {args.clients} concurrent "
          f"clients; {args.seconds:.0f} s per phase; nproc={os.cpu_count()}; load average before: "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} (other jobs share these cores)")
    if args.baseline is not None:
        args.model_path = model
        rows = compare(args, root, requests, sizes)
        print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
        if args.json:
            args.json.write_text(json.dumps({"steps_us_per_pair": steps, "phases": rows}, indent=1))
        return 0

    # 1. cache off: every request is scored
    server = Server(root, args.workers, cache_size=0, poll_seconds=0.5, threads=args.threads, balance=args.balance)
    try:
        check_answers(server, requests, loaded)
        load(server, requests, sizes, args.clients, 2.0)  # warm-up
        rows.append(summarize("cache off", load(server, requests, sizes, args.clients, args.seconds)))
        # 2. a 2,000-pair sentence, one client at a time (latency, not throughput)
        big_k = int(np.argmax(sizes))
        big = _grow_to(requests[big_k], 2000)
        rows.append(summarize("2,000-pair sentence, 1 client", load(server, [big], [2000], 1, args.seconds / 2)))
        # 3. a model swap under load: version 2 dropped in mid-phase, picked up by polling
        swap_at = {}

        async def swap():
            await asyncio.sleep(args.seconds / 2)
            tmp = root / MODEL_NAME / ".tmp-2"
            tmp.mkdir()
            shutil.copy(model, tmp / (root / MODEL_NAME / "1").iterdir().__next__().name)
            os.rename(tmp, root / MODEL_NAME / "2")
            swap_at["t"] = time.perf_counter()

        result = load(server, requests, sizes, args.clients, args.seconds, parse_version=True, on_tick=swap)
        row = summarize("swap under load (cache off)", result)  # appended below with the swap figures
        rec = result["records"]
        before = np.array([r[1] for r in rec if r[0] < swap_at["t"]]) * 1e3
        p99_before = float(np.percentile(before, 99))
        first_v2 = min(r[0] for r in rec if r[3] == 2) if any(r[3] == 2 for r in rec) else float("nan")
        window = np.array([r[1] for r in rec if swap_at["t"] <= r[0] <= swap_at["t"] + 3.0]) * 1e3
        # control: the same length of time just before the drop (other jobs' noise, no swap)
        control = np.array([r[1] for r in rec if swap_at["t"] - 3.0 <= r[0] < swap_at["t"]]) * 1e3
        row.update(p99_before_swap_ms=p99_before, max_in_swap_window_ms=float(window.max()),
                   over_2x_p99=int((window > 2 * p99_before).sum()), window_requests=len(window),
                   control_over_2x_p99=int((control > 2 * p99_before).sum()), control_requests=len(control),
                   control_max_ms=float(control.max()), first_v2_after_s=first_v2 - swap_at["t"],
                   versions=sorted(Counter(r[3] for r in rec).items()))
        print(f"   swap: p99 before {p99_before:.2f} ms; 3 s after the drop: {len(window)} requests, "
              f"max {window.max():.2f} ms, {row['over_2x_p99']} over 2x p99 (3 s before it: {len(control)} "
              f"requests, max {control.max():.2f} ms, {row['control_over_2x_p99']} over); first v2 answer "
              f"{row['first_v2_after_s']:.2f} s after the drop; answers by version {row['versions']}")
        rows.append(row)
    finally:
        server.stop()
    shutil.rmtree(root / MODEL_NAME / "2", ignore_errors=True)

    # 4. cache on: the tuning-run case, the same sentences again and again
    server = Server(root, args.workers, cache_size=4096, poll_seconds=0, threads=args.threads, balance=args.balance)
    try:
        load(server, requests, sizes, args.clients, 2.0)  # fills the caches
        rows.append(summarize("cache on (warm)", load(server, requests, sizes, args.clients, args.seconds)))
    finally:
        server.stop()
    if args.json:
        args.json.write_text(json.dumps({"steps_us_per_pair": steps, "phases": rows}, indent=1))
    return 0


def _grow_to(request: bytes, n: int) -> bytes:
    """The sentence's pairs repeated until exactly n (a sentence with n options)."""
    r = pb.ScoreRequest.FromString(request)
    m = len(r.span_start)
    reps = -(-n // m)
    idx = np.tile(np.arange(m), reps)[:n]
    t_off, a_off = np.array(r.target_offsets), np.array(r.align_offsets)
    t_len, a_len = np.diff(t_off)[idx], np.diff(a_off)[idx]
    t_tok = np.concatenate([np.array(r.target_tokens)[t_off[i]:t_off[i + 1]] for i in idx])
    a_src = np.concatenate([np.array(r.align_source)[a_off[i]:a_off[i + 1]] for i in idx])
    a_tgt = np.concatenate([np.array(r.align_target)[a_off[i]:a_off[i + 1]] for i in idx])
    out = pb.ScoreRequest(model=r.model, token_bytes=r.token_bytes, token_offsets=r.token_offsets,
                          source=r.source, span_start=np.array(r.span_start)[idx].tolist(),
                          span_end=np.array(r.span_end)[idx].tolist(),
                          target_offsets=np.r_[0, np.cumsum(t_len)].tolist(), target_tokens=t_tok.tolist(),
                          align_offsets=np.r_[0, np.cumsum(a_len)].tolist(), align_source=a_src.tolist(),
                          align_target=a_tgt.tolist())
    return out.SerializeToString()


if __name__ == "__main__":
    sys.exit(main())
