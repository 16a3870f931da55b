"""Where a dual-MLR fit spends its CPU: cProfile on process time, one direction of a store.

    PYTHONPATH=CODE python3 benchmarks/dual_profile.py --store STORE [--features S7]
        [--direction backward] [--param step=eg ...] [--top 12]

Builds (or reuses) the store's feature matrix the way `train --heldout-fraction 0` does
(hier-msd labels of --direction, the 5% calibration tail left out), fits once on 3,000
rows to load the compiled kernels, then fits DualMLR (eps 0.1 unless --param says
otherwise) under cProfile timed in process CPU seconds and prints CPU seconds, passes,
dual objective and the --top functions by own time. The numba kernels show as single
entries (the pass kernel, shuffles), the Python of a streamed pass (chunk loop, order
keys) as rows.py's run_pass, the state file's reads and writes as posix.preadv/pwritev.

CODE may be this checkout or 78832e3's (issue 30 profiled both): the script imports
whichever module layout CODE has. It measures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time

import numpy as np


def problem(store_dir: str, features: str, direction: str):
    """(X, y) of the fit sentences, as `train --heldout-fraction 0` builds them."""
    try:  # this checkout's layout
        from training.api.train import SentenceSplit, example_range, select_rows, take_rows
        from training.features.matrix import build_matrix
        from training.features.spec import FeatureSpec
        from training.moses.types import MosesType, class_labels
        from training.store.examples import ExampleStore

        store = ExampleStore.open(store_dir)
        split = SentenceSplit.make(store.n_sentences, 0.0, 0.05)
        rows = example_range(store, split.fit)
        matrix = build_matrix(store, FeatureSpec.parse(features), 10, split.fit)
        labels = class_labels(store, MosesType.parse("hier-msd-bidirectional-fe"), direction)
        return select_rows(matrix.X, rows), take_rows(labels, rows)
    except ImportError:  # 78832e3's
        from training.featurespec import FeatureSpec
        from training.mosestype import MosesType, type_labels
        from training.store import ExampleStore
        from training.train import SentenceSplit, select_rows, take_rows
        from training.vocab import build_matrix

        store = ExampleStore.open(store_dir)
        mtype = MosesType.parse("hier-msd-bidirectional-fe")
        split = SentenceSplit.make(store.n_sentences, 0.0, 0.05)
        rows = np.flatnonzero(split.fit[store.sentence_of_examples()])
        matrix = build_matrix(store, FeatureSpec.parse(features), 10, split.fit)
        column = mtype.store_columns()[list(mtype.directions).index(direction)]
        labels = type_labels(store.load_labels(column), mtype.orientation).astype(np.int64)
        return select_rows(matrix.X, rows), take_rows(labels, rows)


def value(text: str):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--store", required=True)
    p.add_argument("--features", default="S7")
    p.add_argument("--direction", default="backward", choices=("backward", "forward"))
    p.add_argument("--param", action="append", default=[], help="NAME=VALUE for DualMLR")
    p.add_argument("--top", type=int, default=12)
    args = p.parse_args()
    from training.families.dual_mlr import DualMLR

    params = {"eps": 0.1, **{k: value(v) for k, v in (a.split("=", 1) for a in args.param)}}
    X, y = problem(args.store, args.features, args.direction)
    few = np.arange(3000)
    DualMLR(n_classes=3, max_passes=2).fit(X[few], y[few])  # compiled kernels loaded
    profile = cProfile.Profile(time.process_time)
    cpu = time.process_time()
    profile.enable()
    model = DualMLR(n_classes=3, **params).fit(X, y)
    profile.disable()
    cpu = time.process_time() - cpu
    print(f"{args.features} {args.direction} {params}: {cpu:.1f} CPU s, {model.n_passes_} passes, "
          f"D = {model.dual_objective_:.10g}, converged {model.converged_}")
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(args.top)
    print(out.getvalue())


if __name__ == "__main__":
    main()
