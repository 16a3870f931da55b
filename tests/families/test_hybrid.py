"""The hybrid family: lexical counts where a pair was seen, its base classifier elsewhere."""

from __future__ import annotations

import numpy as np

from training.cli import main as cli_main
from training.features.templates import pair_keys
from training.modelfile.model import load_model
from training.store.examples import ExampleStore
from training.api.train import SentenceSplit
from training.features.matrix import build_matrix

TYPE = "wbe-msd-backward-fe"


def test_hybrid_serves_counts_for_seen_pairs_and_the_base_for_unseen(small_store, tmp_path):
    out = tmp_path / "hybrid.mrw"
    assert cli_main(["train", "--family", "hybrid", "--type", TYPE, "--store", str(small_store), "--out", str(out),
                     "--param", "base='nb-map'", "--param", "base_threshold=1", "--threshold", "1",
                     "--quiet"]) == 0
    model = load_model(out)
    assert model.family == "hybrid" and model.link_name == "softmax" and model.spec.name.startswith("alignments,pair")
    info = model.metadata["training"]["directions"]["backward"]["summary"]
    assert info["beta"] in (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)  # fitted on the calibration rows

    store = ExampleStore.open(small_store)
    split = SentenceSplit.make(store.n_sentences, 0.1, 0.05)
    fit_keys = np.unique(np.concatenate([pair_keys(c.batch) for c in store.iter_chunks(split.fit)]))
    # Unseen held-out pairs: exactly the base classifier (nb-map on S7, base threshold 1),
    # retrained here independently on the rare-pair rows it was trained on.
    from training.families.naive_bayes import MultinomialNBMap

    base_matrix = build_matrix(store, "S7", 1, split.fit)
    sentence = store.sentence_of_examples()
    fit_rows, cal_rows = np.flatnonzero(split.fit[sentence]), np.flatnonzero(split.calibrate[sentence])
    y = store.load_labels("wbe-msd/prev").astype(np.int64)
    all_keys = np.concatenate([pair_keys(c.batch) for c in store.iter_chunks()])
    uniq, inverse, counts = np.unique(all_keys[fit_rows], return_inverse=True, return_counts=True)
    rare = fit_rows[counts[inverse] <= 1]
    base = MultinomialNBMap(n_classes=3).fit(base_matrix.X[rare], y[rare])
    base.calibrate(base_matrix.X[cal_rows], y[cal_rows])

    checked_unseen = checked_seen = 0
    for chunk in store.iter_chunks(split.heldout):
        served = model.predict_proba(chunk.batch)
        unseen = ~np.isin(pair_keys(chunk.batch), fit_keys)
        want = base.predict_proba(base_matrix.X[chunk.examples[unseen]])
        np.testing.assert_allclose(served[unseen], want, atol=3e-5)
        checked_unseen += unseen.sum()
        checked_seen += (~unseen).sum()
    assert checked_unseen > 100 and checked_seen > 50

    # A frequent training pair: the hybrid follows its counts (backoff weight beta is small
    # next to dozens of observations), whatever the context.
    freq = np.argmax(counts)
    rows = fit_rows[inverse == freq]
    share = np.bincount(y[rows], minlength=3) / rows.size
    chunk = next(store.iter_chunks())
    served = model.predict_proba(chunk.batch)
    picked = np.isin(chunk.examples, rows)
    assert counts[freq] >= 20
    np.testing.assert_allclose(served[picked].mean(axis=0), share, atol=0.1)


def test_the_hybrid_keys_only_features_it_weights_and_gets_the_weights_of_threshold_0(small_store, tmp_path):
    """Issue 29: at threshold 0 for every feature the matrix held every base feature seen
    once, which the hybrid never weights (base_threshold), and at Kyoto's 44.7M examples its
    per-column arrays ran out of memory. Its default matrix keys every seen pair and the
    base features above 10: fewer columns, and the same model file weights."""
    models = {}
    for name, extra in (("default", []), ("all", ["--threshold", "0"])):
        out = tmp_path / f"{name}.mrw"
        assert cli_main(["train", "--family", "hybrid", "--type", TYPE, "--store", str(small_store),
                         "--out", str(out), "--param", "base='nb-map'", "--quiet", *extra]) == 0
        models[name] = load_model(out)
    train = {n: m.metadata["training"] for n, m in models.items()}
    assert train["default"]["features_distinct"] <= train["all"]["features_distinct"]
    store = ExampleStore.open(small_store)
    split = SentenceSplit.make(store.n_sentences, 0.1, 0.05)
    assert build_matrix(store, "S7,pair", 10, split.fit, keep_pairs=True).X.shape[1] < \
        build_matrix(store, "S7,pair", 0, split.fit).X.shape[1]
    default, full = models["default"], models["all"]
    assert np.array_equal(default.keys, full.keys)
    np.testing.assert_array_equal(default.weights, full.weights)
    np.testing.assert_array_equal(default.bias, full.bias)
