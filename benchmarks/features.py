"""Feature extraction and weight-file figures on the 50k ja-en corpus.

Prints, for S2, S7, S6 and S15: examples/s of extract_keys over the whole example
store (training path), distinct and kept (> threshold) feature counts, and the time to
build the CSR matrix; then the S7 weight-file size (float32 and float16) next to the
Moses hier-msd-bidirectional-fe table for the same data (golden/README.md: 69.2 MB
text, 7.6 MB gzipped); then scoring throughput through the serving path (request
arrays -> PairBatch -> predict_proba), one sentence per request as the server sees it.

The weight file holds the real kept S7 keys; its weights are seeded random numbers
(the file size depends only on the number of features, outputs and dtype, not on the
values; the trainers' benchmarks report trained models).

    nice -n 10 python benchmarks/features.py [--store DIR] [--work DIR]

Without --store, the store is built once with `moses-reorder extract --model hier-msd`
from ../shared/data/ja-en/train.* into --work (default /tmp/moses-reorder-bench).
"""

from __future__ import annotations

import argparse
import gzip
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from training.cli import main as cli_main  # noqa: E402
from training.features.templates import extract_keys  # noqa: E402
from training.features.spec import FeatureSpec  # noqa: E402
from training.modelfile.model import load_model, write_model  # noqa: E402
from training.modelfile.request import arrays_from_strings, batch_from_request_arrays  # noqa: E402
from training.store.examples import ExampleStore  # noqa: E402
from training.features.matrix import build_matrix, iter_keys  # noqa: E402

MOSES_TABLE_TEXT_MB = 69.2
MOSES_TABLE_GZ_MB = 7.6
PAPER_RATIO = 5.9 / 0.1  # SVM paper Table 7: lexicalised 5.9 GB vs SVM (S7) 0.1 GB


def ensure_store(args) -> ExampleStore:
    if args.store:
        return ExampleStore.open(args.store)
    work = Path(args.work)
    store = work / "store-50k-hier-msd"
    if not (store / "store.json").exists():
        work.mkdir(parents=True, exist_ok=True)
        data = ROOT.parent / "shared" / "data" / "ja-en"
        t = time.perf_counter()
        code = cli_main(["extract", "--src", str(data / "train.ja"), "--tgt", str(data / "train.en"),
                         "--align", str(data / "train.align"), "--out", str(store), "--model", "hier-msd",
                         "--quiet"])
        if code:
            raise SystemExit(code)
        print(f"built store {store} in {time.perf_counter() - t:.1f} s")
    return ExampleStore.open(store)


class Clock:
    """Wall and CPU time of this process (all threads): on a shared machine the CPU figure
    is the one that does not depend on what the neighbours run."""

    def __enter__(self):
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self.wall
        self.cpu = time.process_time() - self.cpu


def extraction_speed(store: ExampleStore, spec: FeatureSpec, repeats: int) -> tuple[float, float, int]:
    """Best-of-N examples/s (wall, CPU) of extract_keys over every chunk (PairBatches already built)."""
    batches = [c.batch for c in store.iter_chunks()]
    for k in iter_keys(batches[0], spec, 1000):  # compile outside the timing
        break
    wall, cpu, nnz = float("inf"), float("inf"), 0
    for _ in range(repeats):
        with Clock() as c:
            nnz = sum(k.shape[0] for b in batches for _, k in iter_keys(b, spec))
        wall, cpu = min(wall, c.wall), min(cpu, c.cpu)
    return store.n_examples / wall, store.n_examples / cpu, nnz


def sentence_requests(store: ExampleStore, n_sentences: int) -> list[dict]:
    """ScoreRequest arrays of the first sentences, built from the store's token strings."""
    src_vocab, tgt_vocab, s = store.src_vocab, store.tgt_vocab, store.sentences
    chunk = next(store.iter_chunks())
    requests = []
    bounds = np.searchsorted(chunk.sentence, np.arange(n_sentences + 1))
    for sent in range(n_sentences):
        lo, hi = bounds[sent], bounds[sent + 1]
        src = [src_vocab[i] for i in s["src_ids"][s["src_offsets"][sent]:s["src_offsets"][sent + 1]]]
        tgt = [tgt_vocab[i] for i in s["tgt_ids"][s["tgt_offsets"][sent]:s["tgt_offsets"][sent + 1]]]
        points = s["align"][s["align_offsets"][sent]:s["align_offsets"][sent + 1]]
        pairs = []
        for i in range(lo, hi):
            f0, f1, e0, e1 = (int(chunk.src_start[i]), int(chunk.src_end[i]), int(chunk.tgt_start[i]),
                              int(chunk.tgt_end[i]))
            inside = [(int(a) - f0, int(b) - e0) for a, b in points if f0 <= a < f1 and e0 <= b < e1]
            pairs.append((f0, f1, tgt[e0:e1], inside))
        requests.append(arrays_from_strings(src, pairs))
    return requests


def scoring_speed(model, requests: list[dict], threads: int, rounds: int) -> tuple[float, float]:
    """Pairs/s: each request validated, hashed, featurized and scored, as the server does."""
    n_pairs = sum(len(r["span_start"]) for r in requests)

    def work():
        for _ in range(rounds):
            for r in requests:
                model.predict_proba(batch_from_request_arrays(**r))

    work_once = requests[:5]
    for r in work_once:
        model.predict_proba(batch_from_request_arrays(**r))
    pool = [threading.Thread(target=work) for _ in range(threads)]
    with Clock() as c:
        for th in pool:
            th.start()
        for th in pool:
            th.join()
    total = n_pairs * rounds * threads
    return total / c.wall, total / c.cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", help="existing example store with hier-msd labels")
    parser.add_argument("--work", default="/tmp/moses-reorder-bench")
    parser.add_argument("--threshold", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sets", default="S2,S7,S6,S15")
    args = parser.parse_args()
    store = ensure_store(args)
    print(f"store: {store.n_sentences} sentences, {store.n_examples} examples, {len(store.meta['chunks'])} chunk(s)")
    print(f"cpu: {os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f} at start")
    print()
    print(f"{'set':<5} {'examples/s':>12} {'per CPU-s':>12} {'keys/example':>13} {'distinct':>11} {'kept >' + str(args.threshold):>10} "
          f"{'matrix s':>9}")
    matrices = {}
    for name in args.sets.split(","):
        spec = FeatureSpec.parse(name)
        speed, cpu_speed, nnz = extraction_speed(store, spec, args.repeats)
        t = time.perf_counter()
        fm = build_matrix(store, spec, args.threshold, cache=False)
        seconds = time.perf_counter() - t
        matrices[name] = fm
        print(f"{name:<5} {speed:>12,.0f} {cpu_speed:>12,.0f} {nnz / store.n_examples:>13.1f} {fm.meta['n_distinct']:>11,} "
              f"{fm.X.shape[1]:>10,} {seconds:>9.1f}")
    print()

    fm = matrices.get("S7") or build_matrix(store, "S7", args.threshold, cache=False)
    rng = np.random.default_rng(0)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    n_out = 6  # hier-msd-bidirectional-fe
    sizes = {}
    for dtype in ("float32", "float16"):
        path = work / f"s7-{dtype}.mrw"
        write_model(path, family="benchmark", moses_type="hier-msd-bidirectional-fe", keys=fm.keys,
                    weights=rng.normal(0, 1, size=(fm.keys.shape[0], n_out)).astype(np.float32),
                    bias=np.zeros(n_out, np.float32), features="S7", threshold=args.threshold,
                    trainer="benchmarks/features.py (seeded weights)", float16=dtype == "float16")
        raw = path.read_bytes()
        sizes[dtype] = (len(raw), len(gzip.compress(raw, 6)))
    print(f"S7 weight file, {fm.keys.shape[0]:,} features x {n_out} outputs "
          f"(Moses table: {MOSES_TABLE_TEXT_MB} MB text, {MOSES_TABLE_GZ_MB} MB gz; paper ratio {PAPER_RATIO:.0f}x)")
    for dtype, (size, gz) in sizes.items():
        mb = size / 1e6
        print(f"  {dtype}: {mb:.3f} MB ({gz / 1e6:.3f} MB gz): table text / file = "
              f"{MOSES_TABLE_TEXT_MB / mb:.0f}x, table gz / file = {MOSES_TABLE_GZ_MB / mb:.1f}x")
    print()

    model = load_model(work / "s7-float32.mrw")
    requests = sentence_requests(store, 2000)
    n_pairs = sum(len(r["span_start"]) for r in requests)
    print(f"serving path, S7 model, {len(requests)} one-sentence requests ({n_pairs / len(requests):.1f} pairs each):")
    for threads in (1, 2):
        wall, cpu = scoring_speed(model, requests, threads, 3)
        print(f"  {threads} thread(s): {wall:,.0f} pairs/s wall, {cpu:,.0f} pairs per CPU-second")
    batch = next(store.iter_chunks()).batch
    with Clock() as c:
        model.predict_proba(batch)
    print(f"  one large batch ({batch.n_pairs:,} pairs, features + scoring, no request parsing): "
          f"{batch.n_pairs / c.wall:,.0f} pairs/s wall, {batch.n_pairs / c.cpu:,.0f} per CPU-second")
    print(f"load average at end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
