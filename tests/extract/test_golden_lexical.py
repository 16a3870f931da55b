"""Our reordering tables equal Moses's lexical-reordering-score output on the golden 2k slice.

Every rt.<type>.gz in golden/ja-en-2k is rebuilt from one store holding every extraction
model and compared byte for byte; our rows come out in Moses's own order (bytewise
sorted), so no sorting is needed on our side.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import GOLDEN
from training.store.build import build_store
from training.moses.extract import parse_models
from training.moses.table import build_table, count_pairs, pair_keys, probabilities
from training.moses.types import MosesType
from training.store.examples import ExampleStore

GOLDEN_RT = sorted(GOLDEN.glob("rt.*.gz"))
ALL_MODELS = ["wbe-msd", "wbe-mslr", "wbe-mono", "phrase-msd", "phrase-mslr", "hier-msd", "hier-mslr"]


@pytest.fixture(scope="module")
def store_all(corpus_2k, tmp_path_factory) -> ExampleStore:
    out = tmp_path_factory.mktemp("store") / "all"
    build_store(corpus_2k, parse_models(ALL_MODELS), out, progress=False)
    return ExampleStore.open(out)


def test_every_golden_table_is_found():
    assert len(GOLDEN_RT) == 10, GOLDEN_RT


@pytest.mark.parametrize("golden", GOLDEN_RT, ids=lambda p: p.name)
def test_table_matches_moses(golden: Path, store_all, tmp_path):
    moses_type = MosesType.parse(golden.name[len("rt."):-len(".gz")])
    out = tmp_path / golden.name
    summary = build_table(store_all, moses_type, out)
    ours = gzip.decompress(out.read_bytes())
    theirs = gzip.decompress(golden.read_bytes())
    assert summary.rows == 51625 and summary.examples == store_all.n_examples
    assert ours == theirs


def test_one_mono_mono_occurrence_gives_moses_regression_row():
    """MOSES-NOTES section 2: one mono/mono example -> 0.6 0.2 0.2 0.6 0.2 0.2."""
    counts = np.array([[[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]]])
    assert np.allclose(probabilities(counts, 0.5), [[0.6, 0.2, 0.2, 0.6, 0.2, 0.2]])


def test_counts_cover_every_example_once(store_all):
    counts = count_pairs(store_all, MosesType.parse("hier-mslr-bidirectional-fe"))
    assert counts.counts.shape == (51625, 2, 4)
    assert counts.counts[:, 0].sum() == counts.counts[:, 1].sum() == store_all.n_examples


def test_f_table_is_keyed_by_source_phrase(store_all, tmp_path):
    """Moses writes f tables without keys (its bug); ours carry `f |||` and sum to the fe counts."""
    out = tmp_path / "rt.f"
    f_summary = build_table(store_all, MosesType.parse("wbe-msd-bidirectional-f"), out)
    f_counts = count_pairs(store_all, MosesType.parse("wbe-msd-bidirectional-f"))
    fe_counts = count_pairs(store_all, MosesType.parse("wbe-msd-bidirectional-fe"))
    lines = out.read_bytes().decode().splitlines()
    assert len(lines) == f_summary.rows == f_counts.keys.size < fe_counts.keys.size
    assert all(line.count(" ||| ") == 1 and len(line.split(" ||| ")[1].split()) == 6 for line in lines)
    assert f_counts.counts.sum() == fe_counts.counts.sum() == 2 * store_all.n_examples


def test_a_request_finds_its_training_pair(store_all, slice_2k):
    """A scoring request built from plain strings (the server's path) keys its phrase pairs
    exactly as the table's counts are keyed, for fe and for f types."""
    from training.modelfile.request import batch_from_strings

    src_lines = slice_2k["src"].read_text(encoding="utf-8").split("\n")
    tgt_lines = slice_2k["tgt"].read_text(encoding="utf-8").split("\n")
    rows = store_all.example_rows()
    for language in ("fe", "f"):
        counts = count_pairs(store_all, MosesType.parse(f"wbe-msd-backward-{language}"))
        for example in range(0, store_all.n_examples, 4099):
            s, s0, s1, t0, t1 = rows[example].tolist()
            batch = batch_from_strings(src_lines[s].split(), [(s0, s1, tgt_lines[s].split()[t0:t1], [])])
            key = pair_keys(batch, with_target=language == "fe")[0]
            assert key == counts.keys[counts.pair_of_example[example]]
