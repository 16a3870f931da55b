"""Vocabulary by training counts and the cached CSR matrix over a real example store."""

from __future__ import annotations

import json
import mmap

import numpy as np
import pytest

from training.cli import main as cli_main
from training.features.templates import extract_keys
from training.features.spec import FeatureSpec
from training.features.matrix import FeatureVocab, build_matrix
from training.npyfile import NpyAppender


def all_keys(store, spec, sentence_mask=None):
    """Every extracted key of the (masked) store with its row, the plain way."""
    rows, keys = [], []
    for chunk in store.iter_chunks(sentence_mask):
        indptr, k = extract_keys(chunk.batch, spec)
        rows.append(np.repeat(chunk.examples, np.diff(indptr)))
        keys.append(k)
    return np.concatenate(rows), np.concatenate(keys)


def test_threshold_keeps_keys_seen_more_than_t(store_2k):
    spec = FeatureSpec.parse("S7")
    _, keys = all_keys(store_2k, spec)
    uniq, counts = np.unique(keys, return_counts=True)
    for t in (0, 1, 10):
        vocab = FeatureVocab(spec, t).fit(c.batch for c in store_2k.iter_chunks())
        assert np.array_equal(vocab.keys_, uniq[counts > t])
        assert np.array_equal(vocab.counts_, counts[counts > t])
        assert vocab.n_distinct_ == uniq.shape[0]


def test_matrix_rows_are_store_examples(store_2k):
    spec = FeatureSpec.parse("S6")
    fm = build_matrix(store_2k, spec, 10, cache=False)
    X = fm.X
    assert X.shape == (store_2k.n_examples, fm.keys.shape[0])
    assert X.indices.dtype == np.int32 and X.data.dtype == np.float32 and np.all(X.data == 1)
    rows, keys = all_keys(store_2k, spec)
    known = np.isin(keys, fm.keys)
    dense_rows, dense_cols = rows[known], np.searchsorted(fm.keys, keys[known])
    row = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))  # COO by hand: the row
    col = X.indices                                             # pointers are mapped int64
    assert np.array_equal(np.lexsort((col, row)), np.arange(X.nnz))  # canonical order
    assert np.array_equal(row, dense_rows) and np.array_equal(col, dense_cols)
    assert X.has_canonical_format


def test_sentence_mask_counts_only_training_sentences(store_2k):
    spec = FeatureSpec.parse("S3")
    mask = np.zeros(store_2k.n_sentences, dtype=bool)
    mask[:1000] = True
    fm = build_matrix(store_2k, spec, 2, mask, cache=False)
    _, keys = all_keys(store_2k, spec, mask)
    uniq, counts = np.unique(keys, return_counts=True)
    assert np.array_equal(fm.keys, uniq[counts > 2])
    assert fm.X.shape[0] == store_2k.n_examples  # rows still cover every example


def test_cache_round_trip_and_cli(store_2k, capsys):
    assert cli_main(["features", "--store", str(store_2k.path), "--features", "S7", "--threshold", "3",
                     "--quiet"]) == 0
    cache = store_2k.path / "features" / "S7-t3"
    meta = json.loads((cache / "meta.json").read_text())
    assert meta["spec"] == "S7" and meta["threshold"] == 3 and meta["store"]["n_examples"] == store_2k.n_examples
    cached = build_matrix(store_2k, "alignments,context=1", 3)  # same spec, spelled out: hits the cache
    assert cached.path == cache
    fresh = build_matrix(store_2k, "S7", 3, cache=False)
    assert np.array_equal(cached.keys, fresh.keys)
    assert (cached.X != fresh.X).nnz == 0
    assert not [p for p in (store_2k.path / "features").iterdir() if p.name.startswith(".")]


def test_cached_matrix_is_mapped_not_loaded(store_2k):
    """Trainers read the cache through the page cache: the column indices (the nnz-sized
    array) are a view of the memory-mapped file, and the all-ones data is one broadcast
    float. (scipy narrows the row pointers to int32 when they fit: an n-sized copy.)"""
    fm = build_matrix(store_2k, "S7", 4)
    assert fm.path is not None
    assert is_mapped(fm.X.indices)
    assert fm.X.data.strides == (0,) and fm.X.data.shape == (fm.X.nnz,) and fm.X.data[0] == 1.0
    assert fm.X.indices.dtype == np.int32
    assert int(fm.X.indptr[-1]) == fm.X.nnz == fm.meta["nnz"]


def is_mapped(array) -> bool:
    """Whether some array this one is a view of is backed by an mmap of a file."""
    while array is not None:
        if isinstance(array, (np.memmap, mmap.mmap)):
            return True
        array = getattr(array, "base", None)
    return False


@pytest.mark.parametrize("blocks", [[], [0], [5, 0, 7, 1]])
def test_npy_appender_writes_what_np_save_writes(tmp_path, blocks):
    rng = np.random.default_rng(len(blocks))
    arrays = [rng.integers(-2**40, 2**40, size=n) for n in blocks]
    out = NpyAppender(tmp_path / "a.npy", np.int64)
    for a in arrays:
        out.append(a)
    out.finish()
    expected = np.concatenate(arrays) if arrays else np.zeros(0, dtype=np.int64)
    loaded = np.load(tmp_path / "a.npy", allow_pickle=False)
    assert loaded.dtype == np.int64 and np.array_equal(loaded, expected)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.npy"]  # the raw side file is gone


def test_npy_appender_appends_npy_files_and_writes_np_save_bytes(tmp_path):
    """Blocks and other processes' .npy files (copied by the kernel) in one file, the very
    bytes np.save writes, with a trailing dimension too."""
    rng = np.random.default_rng(7)
    blocks = [rng.integers(0, 1000, size=(n, 2)).astype(np.int16) for n in (3, 0, 500, 7)]
    np.save(tmp_path / "part.npy", blocks[2])
    out = NpyAppender(tmp_path / "a.npy", np.int16, (2,))
    out.append(blocks[0])
    out.append_npy(tmp_path / "part.npy")
    out.append(blocks[1])
    out.append(blocks[3])
    out.finish()
    np.save(tmp_path / "expected.npy", np.concatenate([blocks[0], blocks[2], blocks[3]]))
    assert (tmp_path / "a.npy").read_bytes() == (tmp_path / "expected.npy").read_bytes()
    with pytest.raises(ValueError):
        NpyAppender(tmp_path / "b.npy", np.int32).append_npy(tmp_path / "part.npy")


def test_npy_appender_copies_behind_a_header_that_outgrew_its_room(tmp_path, monkeypatch):
    """The fallback when the final header is longer than the room left for it (numpy pads
    headers for 21-digit lengths, so only another numpy's header could): header, then a copy."""
    from training import npyfile

    out = NpyAppender(tmp_path / "a.npy", np.int64)
    out.append(np.arange(10))
    real = npyfile._header

    def longer(dtype, shape):  # the same header, 64 bytes longer (a multiple of 64 still)
        h = real(dtype, shape)
        body = h[10:-1] + b" " * 64 + b"\n"
        return h[:8] + len(body).to_bytes(2, "little") + body

    monkeypatch.setattr(npyfile, "_header", longer)
    out.finish()
    assert np.array_equal(np.load(tmp_path / "a.npy"), np.arange(10))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.npy"]


def test_cli_refuses_bad_spec(store_2k, capsys):
    assert cli_main(["features", "--store", str(store_2k.path), "--features", "S16"]) == 2  # usage
    assert "S16" in capsys.readouterr().err


def test_transform_matches_matrix(store_2k):
    spec = FeatureSpec.parse("S7")
    fm = build_matrix(store_2k, spec, 10, cache=False)
    vocab = FeatureVocab(spec, 10).set_keys(fm.keys)
    chunk = next(store_2k.iter_chunks())
    X = vocab.transform(chunk.batch)
    assert (X != fm.X[chunk.examples]).nnz == 0


@pytest.mark.parametrize("name", ["S2", "S13"])
def test_small_sets_build(store_2k, name):
    fm = build_matrix(store_2k, name, 10, cache=False)
    assert 0 < fm.X.shape[1] < fm.meta["n_distinct"]


def test_cli_heldout_counts_without_the_heldout_tail(store_2k):
    from training.eval.split import heldout_sentences

    assert cli_main(["features", "--store", str(store_2k.path), "--features", "S3", "--threshold", "4",
                     "--heldout", "0.25", "--quiet"]) == 0
    train = ~heldout_sentences(store_2k.n_sentences, 0.25)
    cached = build_matrix(store_2k, "S3", 4, train)
    assert cached.path.name.startswith("S3-t4-m") and cached.meta["mask_sentences"] == 1500
    _, keys = all_keys(store_2k, FeatureSpec.parse("S3"), train)
    uniq, counts = np.unique(keys, return_counts=True)
    assert np.array_equal(cached.keys, uniq[counts > 4])
