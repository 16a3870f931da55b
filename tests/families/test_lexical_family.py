"""The lexical family served through a weight file equals `moses-reorder lexical`'s table."""

from __future__ import annotations

import numpy as np
import pytest

from training.cli import main as cli_main
from training.features.templates import pair_keys
from training.modelfile.model import load_model
from training.eval.split import heldout_sentences
from training.store.examples import ExampleStore

TYPE = "wbe-msd-bidirectional-fe"


def table_rows(path) -> dict[str, list[float]]:
    """Moses table line -> probabilities, keyed by "src ||| tgt" (fe) or "src" (f)."""
    rows = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        key, _, probs = line.rpartition(" ||| ")
        rows[key] = [float(v) for v in probs.split()]
    return rows


def example_strings(store: ExampleStore, chunk) -> list[str]:
    s = store.sentences
    out = []
    for sent, a, b, c, d in zip(chunk.sentence, chunk.src_start, chunk.src_end, chunk.tgt_start, chunk.tgt_end):
        src = s["src_ids"][s["src_offsets"][sent] + a:s["src_offsets"][sent] + b]
        tgt = s["tgt_ids"][s["tgt_offsets"][sent] + c:s["tgt_offsets"][sent] + d]
        out.append(" ".join(store.src_vocab[i] for i in src) + " ||| " + " ".join(store.tgt_vocab[i] for i in tgt))
    return out


@pytest.mark.parametrize("mtype,templates", [(TYPE, ("pair",)), ("wbe-msd-bidirectional-f", ("source",))])
def test_seen_pairs_score_the_moses_table_rows(small_store, tmp_path, mtype, templates):
    """-fe: one key per phrase pair; -f: per source phrase, Moses's p(o | f) table."""
    model_path, table = tmp_path / "lex.mrw", tmp_path / "rt.txt"
    assert cli_main(["train", "--family", "lexical", "--type", mtype, "--store", str(small_store),
                     "--out", str(model_path), "--heldout-fraction", "0", "--quiet"]) == 0
    assert cli_main(["lexical", "--store", str(small_store), "--type", mtype, "--out", str(table), "--quiet"]) == 0
    rows = table_rows(table)
    model = load_model(model_path)
    assert model.family == "lexical" and model.link_name == "softmax" and model.metadata["threshold"] == 0
    assert model.moses_type == mtype and model.spec.templates == templates
    assert model.n_features == len(rows)  # one key per table row
    store = ExampleStore.open(small_store)
    checked = 0
    for chunk in store.iter_chunks():
        served = model.predict_proba(chunk.batch)
        for text, probs in zip(example_strings(store, chunk), served):
            key = text if templates == ("pair",) else text.split(" ||| ")[0]
            # The table prints 6 significant digits (C++ iostream defaults).
            np.testing.assert_allclose(probs, rows[key], rtol=1e-5, atol=1e-6)
            checked += 1
    assert checked == store.n_examples


def test_unseen_pairs_fall_back_to_the_class_prior(small_store, tmp_path):
    model_path = tmp_path / "lex.mrw"
    assert cli_main(["train", "--family", "lexical", "--type", TYPE, "--store", str(small_store),
                     "--out", str(model_path), "--quiet"]) == 0
    model = load_model(model_path)
    store = ExampleStore.open(small_store)
    heldout = heldout_sentences(store.n_sentences, 0.1)
    train_keys = np.unique(np.concatenate([pair_keys(c.batch) for c in store.iter_chunks(~heldout)]))
    fit_rows = np.flatnonzero(~heldout[store.sentence_of_examples()])
    prior = np.concatenate([np.bincount(store.load_labels(c)[fit_rows], minlength=3) / fit_rows.size
                            for c in ("wbe-msd/prev", "wbe-msd/next")])
    n_unseen = n_seen = 0
    for chunk in store.iter_chunks(heldout):
        served = model.predict_proba(chunk.batch)
        unseen = ~np.isin(pair_keys(chunk.batch), train_keys)
        np.testing.assert_allclose(served[unseen], np.broadcast_to(prior, (unseen.sum(), 6)), rtol=1e-5)
        assert not np.allclose(served[~unseen], prior, rtol=1e-3)  # seen pairs are not the prior
        n_unseen, n_seen = n_unseen + unseen.sum(), n_seen + (~unseen).sum()
    assert n_unseen > 100 and n_seen > 50


def test_lexical_refuses_a_matrix_that_is_not_pair_identity(small_store, tmp_path):
    code = cli_main(["train", "--family", "lexical", "--features", "S7", "--type", TYPE, "--store",
                     str(small_store), "--out", str(tmp_path / "x.mrw"), "--quiet"])
    assert code != 0 and not (tmp_path / "x.mrw").exists()


def test_the_wrong_identity_for_the_type_is_refused(small_store, tmp_path, capsys):
    out = tmp_path / "f.mrw"
    code = cli_main(["train", "--family", "lexical", "--type", "wbe-msd-backward-f", "--features", "pair",
                     "--store", str(small_store), "--out", str(out), "--quiet"])
    assert code == 2 and not out.exists()  # a usage error
    assert "trains on --features source" in capsys.readouterr().err
