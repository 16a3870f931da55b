"""Serving-path features equal training-path features, pair by pair, over a whole slice.

Training path: the example store (made by `moses-reorder extract` from the first 2000
lines of ja-en train; dev has no alignments) yields PairBatches chunk by chunk.
Serving path: for every sentence, the ScoreRequest arrays are built from the raw text
lines (strings, as the Moses client sends them) and validated into a PairBatch by
training.modelfile.request. Both go through extract_keys; every pair's keys must be identical.
"""

from __future__ import annotations

import numpy as np
import pytest

from training.features.templates import extract_keys
from training.features.spec import FeatureSpec
from training.modelfile.request import arrays_from_strings, batch_from_request_arrays


def serving_keys(files, store, spec):
    """Keys of every store example, recomputed sentence by sentence from the raw text."""
    src_lines = files["src"].read_text(encoding="utf-8").split("\n")
    tgt_lines = files["tgt"].read_text(encoding="utf-8").split("\n")
    align_lines = files["align"].read_text(encoding="utf-8").split("\n")
    sentence = store.sentence_of_examples()
    spans = {name: np.concatenate([getattr(c, name) for c in store.iter_chunks()])
             for name in ("src_start", "src_end", "tgt_start", "tgt_end")}
    bounds = np.searchsorted(sentence, np.arange(store.n_sentences + 1))
    rows = []
    for s in range(store.n_sentences):
        lo, hi = bounds[s], bounds[s + 1]
        if lo == hi:
            continue
        source, target = src_lines[s].split(), tgt_lines[s].split()
        points = [tuple(map(int, p.split("-"))) for p in align_lines[s].split()]
        pairs = []
        for i in range(lo, hi):
            f0, f1 = int(spans["src_start"][i]), int(spans["src_end"][i])
            e0, e1 = int(spans["tgt_start"][i]), int(spans["tgt_end"][i])
            inside = [(a - f0, b - e0) for a, b in points if f0 <= a < f1 and e0 <= b < e1]
            pairs.append((f0, f1, target[e0:e1], inside))
        batch = batch_from_request_arrays(**arrays_from_strings(source, pairs))
        indptr, keys = extract_keys(batch, spec)
        rows.extend(keys[indptr[p]:indptr[p + 1]] for p in range(len(pairs)))
    return rows


@pytest.mark.parametrize("name", ["S7", "S6", "S15", "words,pair", "source"])
def test_serving_equals_training(slice_2k, store_2k, name):
    spec = FeatureSpec.parse(name)
    served = serving_keys(slice_2k, store_2k, spec)
    assert len(served) == store_2k.n_examples > 60_000
    row = 0
    for chunk in store_2k.iter_chunks():
        indptr, keys = extract_keys(chunk.batch, spec)
        for p in range(chunk.batch.n_pairs):
            trained = keys[indptr[p]:indptr[p + 1]]
            assert np.array_equal(trained, served[row]), f"example {row} differs"
            row += 1
    assert row == len(served)
