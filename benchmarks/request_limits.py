"""Where the scoring server's per-request limits come from: real phrase pairs of ja-en.

What it measures, on our own extraction of ja-en train (50k sentences, phrases of at
most 7 words, as `moses-reorder extract` writes them) and on the realistic Score
requests of benchmarks/serve.py (every ja-en test sentence with every phrase pair a
phrase table of train offers it, up to 20 target phrases per source span):

- in-phrase alignment points per extracted phrase pair (max, 99.99th percentile): what
  `--max-align-points` (server.options.ServeOptions.max_align_points) must allow;
- tokens per source sentence (train and test): what `--max-source-tokens` must allow;
- bytes per request and per phrase pair: what `--max-message-mb` must allow (issue 31);
- per request: pairs and the upper bound of feature keys (training.features.templates.
  key_bounds) under S7, S9 (ANOVA d=2 over alignments + context 1) and S15 (context 3):
  what `--max-keys` must allow;
- the time to extract keys, in keys/s, for the largest request under S15 (this machine).

    PYTHONPATH=$PWD nice -n 10 python benchmarks/request_limits.py [--work DIR]

It measures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from serve import _extract_store, build_requests  # noqa: E402
from server.api import pb  # noqa: E402
from server.service import arrays_from_message  # noqa: E402
from server.options import default  # noqa: E402
from training.features.spec import FeatureSpec  # noqa: E402
from training.features.templates import extract_keys, key_bounds  # noqa: E402
from training.modelfile.request import batch_from_request_arrays  # noqa: E402
from training.store.examples import ExampleStore  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "data" / "ja-en")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "moses-reorder-bench-serve")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)

    store = ExampleStore.open(_extract_store(args.corpus, args.work))
    points = np.concatenate([np.diff(chunk.batch.align_offsets) for chunk in store.iter_chunks()])
    print(f"extracted pairs: {points.shape[0]}; in-phrase alignment points per pair: max {points.max()}, "
          f"99.99% {np.percentile(points, 99.99):.0f}, 99% {np.percentile(points, 99):.0f}, "
          f"mean {points.mean():.2f}  (server default --max-align-points {default('max_align_points')})")

    raws = build_requests(args.corpus, args.work)
    requests = [batch_from_request_arrays(**arrays_from_message(pb.ScoreRequest.FromString(raw))) for raw in raws]
    sizes = np.array([len(raw) for raw in raws])
    n_pairs = np.array([b.n_pairs for b in requests])
    lengths = np.array([len(line.split()) for split in ("train", "test")
                        for line in (args.corpus / f"{split}.ja").read_text(encoding="utf-8").splitlines()])
    print(f"source sentence tokens (ja-en train + test, {lengths.shape[0]} sentences): max {lengths.max()}, "
          f"99.99% {np.percentile(lengths, 99.99):.0f}  (server default --max-source-tokens "
          f"{default('max_source_tokens')})")
    print(f"request bytes: max {sizes.max()}, mean {sizes.mean():.0f}; bytes per pair {sizes.sum() / n_pairs.sum():.1f}"
          f" (so --max-pairs {default('max_pairs')} such pairs take "
          f"{default('max_pairs') * sizes.sum() / n_pairs.sum() / 2**20:.1f} MiB; server default --max-message-mb "
          f"{default('max_message_mb')})")
    pairs = np.array([b.n_pairs for b in requests])
    req_points = max(int(np.diff(b.align_offsets).max()) for b in requests if b.n_pairs)
    print(f"requests (ja-en test sentences): {len(requests)}; pairs per request: max {pairs.max()}, "
          f"mean {pairs.mean():.0f}; alignment points per pair: max {req_points}")
    for name in ("S7", "S9", "S15"):
        spec = FeatureSpec.parse(name)
        bounds = np.array([int(key_bounds(b, spec)[-1]) for b in requests])
        print(f"  {name}: feature keys per request (upper bound): max {bounds.max()}, "
              f"99% {np.percentile(bounds, 99):.0f}, mean {bounds.mean():.0f}  "
              f"(server default --max-keys {default('max_keys')})")
    largest = requests[int(np.argmax(pairs))]
    spec = FeatureSpec.parse("S15")
    extract_keys(largest, spec)  # compile / load the numba cache
    started = time.perf_counter()
    _, keys = extract_keys(largest, spec)
    seconds = time.perf_counter() - started
    print(f"S15 key extraction of the largest request: {keys.shape[0]} keys in {seconds:.3f} s "
          f"= {keys.shape[0] / seconds / 1e6:.2f} M keys/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
