"""benchmarks/disagreement.py on the embedded corpus: the first 2,700 pairs train a lexical
table (and its Moses text) and an svm S6, the last 300 are extracted as held-out pairs;
every count and recall of the report is recomputed here from the two weight files."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from corpus_slice import write_corpus_slice

from tests.conftest import ROOT
from training.cli import main as cli_main
from training.features.templates import pair_keys
from training.modelfile.model import load_model
from training.store.examples import ExampleStore

spec = importlib.util.spec_from_file_location("disagreement", ROOT / "benchmarks" / "disagreement.py")
disagreement = importlib.util.module_from_spec(spec)
spec.loader.exec_module(disagreement)

TYPE = "hier-msd-bidirectional-fe"
TRAIN, HELDOUT = 2700, 300
COLUMNS = {"backward": "hier-msd/prev", "forward": "hier-msd/next"}   # msd's coding = the type's


@pytest.fixture(scope="module")
def setup(embedded_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("disagree")
    corpus = write_corpus_slice(embedded_dir, TRAIN, tmp / "train")
    train_store = tmp / "train-store"
    assert cli_main(["extract", "--src", str(corpus["ja"]), "--tgt", str(corpus["en"]), "--align",
                     str(corpus["align"]), "--out", str(train_store), "--model", "hier-msd", "--jobs", "1",
                     "--quiet"]) == 0
    common = ["--type", TYPE, "--store", str(train_store), "--heldout-fraction", "0", "--jobs", "1", "--quiet"]
    assert cli_main(["train", "--family", "lexical", "--out", str(tmp / "lex.mrw"), *common]) == 0
    assert cli_main(["train", "--family", "svm", "--features", "S6", "--out", str(tmp / "svm.mrw"), *common]) == 0
    assert cli_main(["lexical", "--store", str(train_store), "--type", TYPE, "--out", str(tmp / "rt.gz"),
                     "--jobs", "1", "--quiet"]) == 0
    (tmp / "heldout").mkdir()
    store = disagreement.heldout_store(embedded_dir, HELDOUT, "hier-msd", tmp / "heldout")
    # The Moses table stands in for the phrase table too: both have every training pair.
    report = disagreement.disagreement(store, tmp / "svm.mrw", tmp / "lex.mrw", moses_table=tmp / "rt.gz",
                                       phrase_table=tmp / "rt.gz", train_store=train_store)
    return report, store, train_store, tmp


def test_heldout_store_is_the_corpus_tail(setup, embedded_dir):
    _, store, _, _ = setup
    s = ExampleStore.open(store)
    assert s.n_sentences == HELDOUT
    last = (embedded_dir / "train.ja").read_text(encoding="utf-8").splitlines()[-1].split()
    ids = s.sentences["src_ids"][s.sentences["src_offsets"][-2]:]
    assert [s.src_vocab[i] for i in ids] == last


def test_pairs_prefix_scores_every_line_of_its_files(setup, embedded_dir, tmp_path):
    """--pairs (a test set of its own, as ja-en-kyoto's articles): the same store as the tail."""
    _, store, _, _ = setup
    for suffix in disagreement.SUFFIXES:
        lines = (embedded_dir / f"train.{suffix}").read_bytes().splitlines(keepends=True)
        (tmp_path / f"test.{suffix}").write_bytes(b"".join(lines[-HELDOUT:]))
    (tmp_path / "work").mkdir()
    mine = ExampleStore.open(disagreement.heldout_store(embedded_dir, 10 ** 9, "hier-msd", tmp_path / "work",
                                                        pairs=tmp_path / "test"))
    tail = ExampleStore.open(store)
    assert mine.n_sentences == HELDOUT and mine.n_examples == tail.n_examples
    for a, b in zip(mine.iter_chunks(), tail.iter_chunks()):
        assert np.array_equal(a.labels, b.labels)


def test_counts_add_up_and_recalls_match_a_direct_computation(setup):
    report, store_path, train_store, tmp = setup
    store, train = ExampleStore.open(store_path), ExampleStore.open(train_store)
    svm, lex = load_model(tmp / "svm.mrw"), load_model(tmp / "lex.mrw")
    chunks = list(store.iter_chunks())
    p_svm = np.concatenate([svm.predict_proba(c.batch) for c in chunks])
    p_lex = np.concatenate([lex.predict_proba(c.batch) for c in chunks])
    train_keys = np.concatenate([pair_keys(c.batch) for c in train.iter_chunks()])
    keys = np.concatenate([pair_keys(c.batch) for c in chunks])
    seen = np.isin(keys, train_keys)
    assert report["examples"] == store.n_examples == keys.size
    assert 0 < seen.sum() < seen.size

    # The served table is Moses's table text, the phrase-table slice its seen slice.
    check = report["moses_table_check"]
    assert check["examples_found"] == check["examples_seen_by_served_table"] == seen.sum()
    assert check["found_differs_from_seen"] == 0 and check["max_relative_difference"] < 1e-5
    assert report["phrase_table_is_seen"] and report["counted_differs_from_seen"] == 0

    for d, (direction, column) in enumerate(COLUMNS.items()):
        y = store.load_labels(column).astype(np.int64)
        t, m = p_lex[:, 3 * d:3 * d + 3].argmax(axis=1), p_svm[:, 3 * d:3 * d + 3].argmax(axis=1)
        slices = report["directions"][direction]
        assert slices["seen"]["all"]["n"] + slices["unseen"]["all"]["n"] == slices["all"]["all"]["n"] == y.size
        bins = [s for name, s in slices.items() if name.startswith("seen ")]
        assert sum(s["all"]["n"] for s in bins) == seen.sum()
        for name, mask in (("all", np.ones(y.size, dtype=bool)), ("seen", seen), ("unseen", ~seen)):
            s = slices[name]
            assert sum(r["n"] for r in s["classes"].values()) == s["all"]["n"] == mask.sum()
            assert np.sum(s["confusion_table"]) == np.sum(s["confusion_model"]) == mask.sum()
            for k, r in enumerate([*s["classes"].values(), s["all"]]):
                sel = mask & (y == k) if k < 3 else mask
                assert r["n"] == sel.sum()
                assert r["table_recall"] == pytest.approx(np.mean(t[sel] == y[sel]))
                assert r["model_recall"] == pytest.approx(np.mean(m[sel] == y[sel]))
                dis = sel & (t != m)
                assert r["disagree"] == dis.sum() == r["table_right"] + r["model_right"] + r["both_wrong"]
                assert r["table_right"] == np.sum(dis & (t == y))
                p_gold = p_svm[np.flatnonzero(sel), 3 * d + y[sel]]
                assert r["model_log_loss"] == pytest.approx(-np.mean(np.log(p_gold)), rel=1e-5)
            if name == "unseen":   # the table's prior: one class for every unseen pair
                assert np.count_nonzero(np.array(s["confusion_table"]).sum(axis=0)) == 1
        assert slices["phrase-table"]["all"] == slices["seen"]["all"]


def test_prior_log_loss_is_that_of_predicting_the_class_shares(setup):
    """The reference point of issue 29's analysis: a constant prediction of the slice's class
    shares scores exactly prior_log_loss, and both real models score below it on seen pairs."""
    report, store_path, *_ = setup
    y = ExampleStore.open(store_path).load_labels(COLUMNS["backward"]).astype(np.int64)
    shares = np.bincount(y, minlength=3) / y.size
    constant = np.tile(shares, (y.size, 1))
    direct = disagreement.summary(y, constant, constant, ("mono", "swap", "disc"))
    all_pairs = report["directions"]["backward"]["all"]
    assert disagreement.prior_log_loss(all_pairs) == pytest.approx(direct["all"]["model_log_loss"], rel=1e-9)
    seen = report["directions"]["backward"]["seen"]
    assert seen["all"]["table_log_loss"] < disagreement.prior_log_loss(seen)
    assert seen["all"]["model_log_loss"] < disagreement.prior_log_loss(seen)


def test_markdown_has_a_row_per_direction_slice_and_class(setup):
    report, *_ = setup
    text = disagreement.markdown(report)
    rows = [line for line in text.splitlines() if line.startswith("| backward") or line.startswith("| forward")]
    # 2 directions x (all, seen, unseen) x (3 classes + all), then 2 x 4 frequency bins at most
    assert len([r for r in rows if r.count("|") == 16]) == 24
    assert 0 < len([r for r in rows if r.count("|") == 12]) <= 8
