"""The example store: chunks of whole sentences, memory-mapped arrays, PairBatches that match the corpus."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from tests.conftest import GOLDEN
from training.cli import main
from training.features.hashing import hash_tokens
from training.store.examples import ExampleStore


@pytest.fixture(scope="module")
def small_chunks(slice_2k, tmp_path_factory) -> ExampleStore:
    out = tmp_path_factory.mktemp("chunks") / "store"
    rc = main(["extract", "--src", str(slice_2k["src"]), "--tgt", str(slice_2k["tgt"]), "--align",
               str(slice_2k["align"]), "--out", str(out), "--model", "hier-msd", "--model", "wbe-mslr",
               "--chunk-examples", "5000", "--quiet"])
    assert rc == 0
    return ExampleStore.open(out)


def test_metadata(small_chunks, slice_2k):
    meta = small_chunks.meta
    assert meta["format"] == "moses-reorder-store" and meta["version"] == 1
    assert small_chunks.n_examples == 65260 and small_chunks.n_sentences == 2000
    assert small_chunks.label_columns == {
        "hier-msd/prev": ("mono", "swap", "other"), "hier-msd/next": ("mono", "swap", "other"),
        "wbe-mslr/prev": ("mono", "swap", "dleft", "dright"), "wbe-mslr/next": ("mono", "swap", "dleft", "dright")}
    assert len(meta["corpus"]["sha256"]) == 64 and meta["settings"]["max_phrase_length"] == 7


def test_chunks_hold_whole_sentences_and_every_array_memory_maps(small_chunks):
    chunks = small_chunks.meta["chunks"]
    assert len(chunks) > 5
    seen_last = -1
    for chunk in chunks:
        sentence = np.load(small_chunks.path / chunk["name"] / "sentence.npy", mmap_mode="r")
        assert isinstance(sentence, np.memmap) and sentence.dtype == np.int32
        assert sentence[0] > seen_last, "a sentence is split over two chunks"
        assert np.all(np.diff(sentence) >= 0)
        seen_last = int(sentence[-1])
    for path in small_chunks.path.rglob("*.npy"):
        assert isinstance(np.load(path, mmap_mode="r"), np.memmap), path


def test_labels_and_sentences_line_up_with_chunks(small_chunks):
    labels = small_chunks.load_labels("wbe-mslr/next")
    sentence = small_chunks.sentence_of_examples()
    column = list(small_chunks.label_columns).index("wbe-mslr/next")
    for chunk in small_chunks.iter_chunks():
        assert np.array_equal(labels[chunk.examples], chunk.labels[:, column])
        assert np.array_equal(sentence[chunk.examples], chunk.sentence)
    assert np.bincount(labels, minlength=4).sum() == small_chunks.n_examples


def test_sentence_mask_selects_whole_sentences(small_chunks):
    mask = np.zeros(small_chunks.n_sentences, dtype=bool)
    mask[1800:] = True
    chunks = list(small_chunks.iter_chunks(mask))
    got = np.concatenate([c.sentence for c in chunks])
    expected = small_chunks.sentence_of_examples()
    assert np.array_equal(got, expected[expected >= 1800])
    assert all(c.batch.n_pairs == len(c.sentence) for c in chunks)


def test_pair_batch_is_the_phrase_pair_in_its_sentence(small_chunks, slice_2k):
    src_lines = slice_2k["src"].read_text(encoding="utf-8").split("\n")
    tgt_lines = slice_2k["tgt"].read_text(encoding="utf-8").split("\n")
    align_lines = slice_2k["align"].read_text().split("\n")
    chunk = next(small_chunks.iter_chunks())
    b = chunk.batch
    for i in range(0, b.n_pairs, 97):
        s = int(chunk.sentence[i])
        src, tgt = src_lines[s].split(), tgt_lines[s].split()
        local = b.pair_sentence[i]
        assert np.array_equal(b.src_tokens[b.src_offsets[local]:b.src_offsets[local + 1]], hash_tokens(src))
        t0, t1 = int(chunk.tgt_start[i]), int(chunk.tgt_end[i])
        assert np.array_equal(b.tgt_tokens[b.tgt_offsets[i]:b.tgt_offsets[i + 1]], hash_tokens(tgt[t0:t1]))
        s0, s1 = int(b.src_start[i]), int(b.src_end[i])
        expected = sorted((f - s0, e - t0) for f, e in (map(int, p.split("-")) for p in align_lines[s].split())
                          if s0 <= f < s1 and t0 <= e < t1)
        got = list(zip(b.align_src[b.align_offsets[i]:b.align_offsets[i + 1]].tolist(),
                       b.align_tgt[b.align_offsets[i]:b.align_offsets[i + 1]].tolist()))
        assert got == expected and got


def test_lexical_command_writes_moses_table(small_chunks, tmp_path):
    out = tmp_path / "rt.hier-msd-bidirectional-fe.gz"
    assert main(["lexical", "--store", str(small_chunks.path), "--model", "hier-msd-bidirectional-fe",
                 "--out", str(out), "--quiet"]) == 0
    assert gzip.decompress(out.read_bytes()) == gzip.decompress(
        (GOLDEN / "rt.hier-msd-bidirectional-fe.gz").read_bytes())
    assert main(["lexical", "--store", str(small_chunks.path), "--model", "phrase-msd-backward-fe",
                 "--out", str(tmp_path / "x"), "--quiet"]) == 3
    assert not (tmp_path / "x").exists()
    # --out in directories that do not exist yet: made, and removed again by a refused run
    deep = tmp_path / "new" / "dir" / "rt.gz"
    assert main(["lexical", "--store", str(small_chunks.path), "--model", "hier-msd-bidirectional-fe",
                 "--out", str(deep), "--quiet"]) == 0
    assert gzip.decompress(deep.read_bytes()) == gzip.decompress(out.read_bytes())
    assert main(["lexical", "--store", str(small_chunks.path), "--model", "phrase-msd-backward-fe",
                 "--out", str(tmp_path / "other" / "rt.gz"), "--quiet"]) == 3
    assert not (tmp_path / "other").exists()


def test_store_json_is_plain_json(small_chunks):
    meta = json.loads((small_chunks.path / "store.json").read_text())
    assert [c["examples"] for c in meta["chunks"]] and sum(c["examples"] for c in meta["chunks"]) == 65260
