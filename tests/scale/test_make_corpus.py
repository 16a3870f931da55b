"""benchmarks/make_corpus.py: deterministic copies of a corpus whose rare vocabulary grows
with every copy while sentences, lengths and alignments (so the examples) stay the same."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from tests.conftest import ROOT
from training.corpus.reading import read_corpus

spec = importlib.util.spec_from_file_location("make_corpus", ROOT / "benchmarks" / "make_corpus.py")
make_corpus = importlib.util.module_from_spec(spec)
spec.loader.exec_module(make_corpus)


def test_copies_grow_the_vocabulary_deterministically(slice_2k, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    for side, name in (("src", "train.ja"), ("tgt", "train.en"), ("align", "train.align")):
        (data / name).write_bytes(slice_2k[side].read_bytes())
    infos = [make_corpus.make_corpus(data, tmp_path / f"c{k}", copies) for k, copies in enumerate((1, 3, 3))]
    one, three, again = infos
    assert three["sentence_pairs"] == 6000
    assert one["vocab"] == one["vocab_ja_en"]
    assert all(three["vocab"][s] > one["vocab"][s] * 1.3 for s in ("ja", "en"))
    for name in ("train.ja", "train.en", "train.align"):
        assert (tmp_path / "c1" / name).read_bytes() == (tmp_path / "c2" / name).read_bytes()
    assert (tmp_path / "c0" / "train.ja").read_bytes() == (data / "train.ja").read_bytes()
    original = read_corpus(data / "train.ja", data / "train.en", data / "train.align")
    copied = read_corpus(*(tmp_path / "c1" / n for n in ("train.ja", "train.en", "train.align")))
    assert len(copied.src_vocab) == three["vocab"]["ja"]
    n = original.n_sentences
    for k in range(3):
        assert (copied.src_offsets[k * n:(k + 1) * n + 1] - copied.src_offsets[k * n] == original.src_offsets).all()
        assert (copied.align[copied.align_offsets[k * n]:copied.align_offsets[(k + 1) * n]] == original.align).all()
    renamed = [t for t in copied.src_vocab if t.endswith("~2")]
    assert renamed and all(t[:-2] in original.src_vocab for t in renamed)
