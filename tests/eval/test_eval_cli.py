"""`moses-reorder eval` and `moses-reorder experiment` end to end on a real ja-en slice."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from corpus_slice import write_corpus_slice

from training.cli import main as cli_main
from training.features.templates import pair_keys
from training.modelfile.model import load_model
from training.eval.split import heldout_sentences
from training.store.examples import ExampleStore

SENTENCES = 300
TYPE = "wbe-msd-bidirectional-fe"


@pytest.fixture(scope="module")
def corpus_dir(ja_en_dir: Path, tmp_path_factory) -> Path:
    """train.{ja,en,align}: the first SENTENCES lines of ja-en."""
    out = tmp_path_factory.mktemp("eval-corpus")
    write_corpus_slice(ja_en_dir, SENTENCES, out)
    return out


@pytest.fixture(scope="module")
def store(corpus_dir: Path) -> Path:
    out = corpus_dir / "store"
    assert cli_main(["extract", "--src", str(corpus_dir / "train.ja"), "--tgt", str(corpus_dir / "train.en"),
                     "--align", str(corpus_dir / "train.align"), "--out", str(out), "--quiet"]) == 0
    return out


@pytest.fixture(scope="module")
def model(store: Path, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("eval-model") / "nb.mrw"
    assert cli_main(["train", "--family", "nb-map", "--features", "S7", "--type", TYPE, "--store", str(store),
                     "--out", str(out), "--threshold", "1", "--quiet"]) == 0
    return out


def test_eval_json_numbers_recomputed_independently(store, model, capsys):
    assert cli_main(["eval", str(model), "--store", str(store), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    sig = report["signature"]
    meta = load_model(model).metadata
    assert sig["family"] == "nb-map" and sig["features"] == "S7" and sig["type"] == TYPE
    assert sig["corpus"] == meta["corpus_fingerprint"][:12] and report["same_corpus"] is True
    assert "alpha=1.5" in sig["hp"]

    # Recompute from the served model, the store labels and the pair keys, by hand.
    s = ExampleStore.open(store)
    heldout = heldout_sentences(s.n_sentences, 0.1)
    train_keys = np.concatenate([pair_keys(c.batch) for c in s.iter_chunks(~heldout)])
    m = load_model(model)
    chunks = list(s.iter_chunks(heldout))
    probs = np.concatenate([m.predict_proba(c.batch) for c in chunks])
    examples = np.concatenate([c.examples for c in chunks])
    seen = np.isin(np.concatenate([pair_keys(c.batch) for c in chunks]), train_keys)
    assert report["split"]["heldout_examples"] == examples.size
    assert report["split"]["seen_examples"] == seen.sum()
    for d, (direction, column) in enumerate((("backward", "wbe-msd/prev"), ("forward", "wbe-msd/next"))):
        y = s.load_labels(column)[examples]
        pred = probs[:, 3 * d:3 * d + 3].argmax(axis=1)
        r = report["directions"][direction]
        assert r["all"]["accuracy"] == pytest.approx(np.mean(pred == y))
        assert r["seen"]["accuracy"] == pytest.approx(np.mean(pred[seen] == y[seen]))
        assert r["unseen"]["examples"] == (~seen).sum()
        p_true = probs[np.arange(y.size), 3 * d + y.astype(int)]
        assert r["all"]["log_loss"] == pytest.approx(-np.mean(np.log(p_true)), rel=1e-5)
        conf = np.array(r["all"]["confusion"])
        assert conf.sum() == y.size and conf[1, 1] == np.sum((y == 1) & (pred == 1))


def test_eval_text_report_and_plots(store, model, tmp_path, capsys):
    plots = tmp_path / "png"
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps([{"family": "nb-map", "examples": n, "seconds": n / 1e5, "peak_mb": 100 + n / 1e3}
                                 for n in (1000, 2000, 4000)]))
    assert cli_main(["eval", str(model), "--store", str(store), "--plot", str(plots), "--bench", str(bench),
                     "--out", str(tmp_path / "r.json")]) == 0
    text = capsys.readouterr().out
    assert "| Predicted \\ true | mono | swap | disc | Accuracy | Precision | Recall | F1 |" in text
    assert "## backward" in text and "## forward" in text and "| unseen |" in text
    for name in ("nmi-ranking.png", "selection-error.png", "scaling.png"):
        assert (plots / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    saved = json.loads((tmp_path / "r.json").read_text())
    assert [p["fraction"] for p in saved["selection_curve"]["points"]][0] == 1.0


def test_eval_refuses_bad_model_file(store, tmp_path, capsys):
    bad = tmp_path / "bad.mrw"
    bad.write_bytes(b"not a model")
    assert cli_main(["eval", str(bad), "--store", str(store)]) == 4
    assert "bad.mrw" in capsys.readouterr().err


def test_experiment_prints_the_study_table(corpus_dir, tmp_path, capsys):
    work = tmp_path / "exp"
    assert cli_main(["experiment", "--corpus", str(corpus_dir), "--work", str(work), "--families",
                     "lexical,nb-bayes", "--features", "S2,S7", "--threshold", "1", "--json",
                     str(tmp_path / "rows.json")]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("| ")]
    assert lines[0].startswith("| Family | Features | Time (s) | Acc. | P M | P S | P D | R M")
    assert [line.split(" | ")[0:2] for line in lines[1:]] == [
        ["| lexical", "pair"], ["| nb-bayes", "S2"], ["| nb-bayes", "S7"]]
    rows = json.loads((tmp_path / "rows.json").read_text())["rows"]
    assert all(r["all"]["examples"] == r["seen"]["examples"] + r["unseen"]["examples"] for r in rows)
    assert (work / "models" / "nb-bayes-S7.mrw").exists()


def test_experiment_names_a_missing_corpus_file(tmp_path, capsys):
    assert cli_main(["experiment", "--corpus", str(tmp_path), "--work", str(tmp_path / "w")]) == 3
    assert "train.ja" in capsys.readouterr().err


def extract(corpus: Path, out: Path) -> Path:
    assert cli_main(["extract", "--src", str(corpus / "train.ja"), "--tgt", str(corpus / "train.en"),
                     "--align", str(corpus / "train.align"), "--out", str(out), "--quiet"]) == 0
    return out


def reversed_corpus(corpus_dir: Path, out: Path) -> Path:
    """The same sentence pairs in reverse order: its held-out tail is the model's first (training) sentences."""
    out.mkdir()
    for suffix in ("ja", "en", "align"):
        lines = (corpus_dir / f"train.{suffix}").read_text(encoding="utf-8").splitlines(keepends=True)
        (out / f"train.{suffix}").write_text("".join(reversed(lines)), encoding="utf-8")
    return out


def test_eval_on_the_training_split_says_nothing(store, model, capsys):
    assert cli_main(["eval", str(model), "--store", str(store), "--json"]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert report["held_out"] is True and report["overlap_sentences"] == 0 and report["warning"] is None
    assert "warning" not in captured.err


def test_eval_warns_when_a_larger_fraction_reaches_into_training(store, model, capsys):
    assert cli_main(["eval", str(model), "--store", str(store), "--heldout-fraction", "0.3"]) == 0
    captured = capsys.readouterr()
    # 90 evaluated sentences, of which the first 60 were trained on (the model held out 30)
    assert "warning: 60 of the 90 evaluated sentences were training sentences" in captured.err
    assert "not held out" in captured.err and "larger than the 0.1" in captured.err
    assert "WARNING: 60 of the 90" in captured.out


def test_eval_on_another_store_of_overlapping_sentences_warns(corpus_dir, model, tmp_path, capsys):
    other = extract(reversed_corpus(corpus_dir, tmp_path / "rev"), tmp_path / "rev-store")
    assert cli_main(["eval", str(model), "--store", str(other), "--json"]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert report["same_corpus"] is False and report["held_out"] is False
    assert report["overlap_sentences"] == 30
    assert "30 of the 30 evaluated sentences were training sentences of the model" in captured.err


def test_eval_without_the_training_store_says_it_cannot_tell(corpus_dir, store, tmp_path, capsys):
    import shutil

    copy = tmp_path / "copy-store"
    shutil.copytree(store, copy)
    model = tmp_path / "m.mrw"
    assert cli_main(["train", "--family", "nb-map", "--features", "S7", "--type", TYPE, "--store", str(copy),
                     "--out", str(model), "--threshold", "1", "--quiet"]) == 0
    shutil.rmtree(copy)
    other = extract(reversed_corpus(corpus_dir, tmp_path / "rev"), tmp_path / "rev-store")
    assert cli_main(["eval", str(model), "--store", str(other), "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["held_out"] is None
    assert "cannot tell whether the evaluated sentences were among the model's training sentences" in captured.err


def test_the_nmi_ranking_puts_the_best_feature_at_rank_0(tmp_path):
    """Issue 47: the curve was sorted ascending, so rank 0 was the least informative feature.
    Read back from the PNG: the line starts high on the left and ends low on the right."""
    import matplotlib.image as mpimg

    from training.eval.plots import plot_nmi_ranking

    nmi = np.random.default_rng(0).random(500) ** 4 + 1e-4
    path = plot_nmi_ranking(nmi, tmp_path / "nmi-ranking.png")
    pixels = mpimg.imread(path)[..., :3]
    line = np.all(np.abs(pixels - np.array([0x1f, 0x77, 0xb4]) / 255) < 0.08, axis=2)  # matplotlib's C0
    rows, cols = np.nonzero(line)
    assert cols.size > 100
    left, right = rows[cols <= cols.min() + 3].mean(), rows[cols >= cols.max() - 3].mean()
    assert left < right  # image rows grow downwards: the left end is the higher one
