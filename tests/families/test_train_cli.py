"""`moses-reorder train` end to end: store -> weight file that the serving code scores identically."""

from __future__ import annotations

import json

import numpy as np
import pytest

from training.cli import main as cli_main
from training.modelfile.model import load_model
from training.moses.types import MosesType
from training.store.examples import ExampleStore
from training.api.train import SentenceSplit
from training.features.matrix import build_matrix
from training.modelfile.container import read_weight_file

TYPE = "hier-msd-bidirectional-fe"


def train(store, out, family="svm", *extra):
    return cli_main(["train", "--family", family, "--features", "S7", "--type", TYPE, "--store", str(store),
                     "--out", str(out), "--threshold", "1", "--quiet", *extra])


@pytest.mark.parametrize("family,extra", [("svm", ["--C", "0.5", "--eps", "0.05"]),
                                          ("dual-mlr", ["--eps", "0.1"]),
                                          ("maxent", ["--param", "solver=lbfgs", "--max-passes", "300"]),
                                          ("maxent", ["--param", "solver=owlqn", "--C", "0.2", "--max-passes", "100"])])
def test_weight_file_scores_like_the_trained_classifiers(small_store, tmp_path, family, extra):
    # Neither directory exists yet: train creates them (the plot used to fail there
    # after training, and took the unwritten model with it).
    out, plot = tmp_path / "models" / "model.mrw", tmp_path / "plots" / "passes.png"
    assert train(small_store, out, family, *extra, "--plot", str(plot)) == 0
    model = load_model(out)
    assert model.moses_type == TYPE and model.family == family
    assert model.outputs == MosesType.parse(TYPE).outputs
    meta = model.metadata
    store = ExampleStore.open(small_store)
    assert meta["corpus_fingerprint"] == store.meta["corpus"]["sha256"]
    assert meta["hyperparameters"]["n_classes"] == 3
    t = meta["training"]
    assert set(t["directions"]) == {"backward", "forward"}
    assert all(len(d["history"]) >= 1 for d in t["directions"].values())
    assert t["peak_memory_bytes"] > 0 and t["examples"]["fit"] > 0
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # Served probabilities (keys -> rows -> sums -> softmax) equal the training-side
    # softmax of X W + b, direction by direction, and each block sums to one.
    split = SentenceSplit.make(store.n_sentences, 0.1, 0.05)
    matrix = build_matrix(store, "S7", 1, split.fit)
    # The file keeps the vocabulary's keys minus those whose weights are all zero.
    columns = np.searchsorted(matrix.keys, model.keys)
    np.testing.assert_array_equal(matrix.keys[columns], model.keys)
    assert model.keys.size + t["zero_weight_keys_dropped"] == matrix.keys.size
    assert np.all(np.any(model.weights != 0, axis=1))
    if "solver=owlqn" in extra:  # L1 zeroes many weights: they are not in the file
        assert t["zero_weight_keys_dropped"] > 0.2 * matrix.keys.size
    W = np.zeros((matrix.keys.size, model.weights.shape[1]))
    W[columns] = model.weights
    chunk = next(store.iter_chunks())
    served = model.predict_proba(chunk.batch)
    scores = matrix.X[chunk.examples] @ W + model.bias
    for block in (slice(0, 3), slice(3, 6)):
        s = scores[:, block] - scores[:, block].max(axis=1, keepdims=True)
        expected = np.exp(s) / np.exp(s).sum(axis=1, keepdims=True)
        np.testing.assert_allclose(served[:, block], expected, atol=2e-5)
        np.testing.assert_allclose(served[:, block].sum(axis=1), 1.0, atol=1e-5)
    # Trained, not constant: the backward block predicts the labels better than chance.
    labels = store.load_labels("hier-msd/prev")[chunk.examples]
    fit_rows = split.fit[chunk.sentence]
    assert np.mean(np.argmax(served[fit_rows, :3], axis=1) == labels[fit_rows]) > 0.6


def test_same_seed_same_file_contents(small_store, tmp_path):
    a, b = tmp_path / "a.mrw", tmp_path / "b.mrw"
    assert train(small_store, a, "svm", "--seed", "4") == 0
    assert train(small_store, b, "svm", "--seed", "4") == 0
    wa, wb = read_weight_file(a), read_weight_file(b)
    for name in ("keys", "weights", "bias"):
        np.testing.assert_array_equal(wa.arrays[name], wb.arrays[name])
    ha = wa.metadata["training"]["directions"]["forward"]["history"]
    hb = wb.metadata["training"]["directions"]["forward"]["history"]
    assert [h["objective"] for h in ha] == [h["objective"] for h in hb]


def test_bad_requests_are_refused_with_a_clear_message(small_store, tmp_path, capsys):
    assert train(small_store, tmp_path / "m", "maxent", "--eps", "0.1") == 2  # usage
    assert "family maxent has no hyper-parameter eps" in capsys.readouterr().err
    code = cli_main(["train", "--family", "svm", "--features", "S7", "--type", "wbe-mslr-backward-fe",
                     "--store", str(small_store), "--out", str(tmp_path / "m"), "--quiet"])
    assert code == 3
    assert "wbe-mslr/prev" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()


def test_inspect_summarizes_the_training_history(small_store, tmp_path, capsys):
    """Passes, convergence, final objective, temperature and calibration per direction, one
    short line each; every pass only in --json."""
    out = tmp_path / "m.mrw"
    assert train(small_store, out, "svm", "--C", "0.5", "--eps", "0.05") == 0
    capsys.readouterr()
    assert cli_main(["inspect", str(out)]) == 0
    text = capsys.readouterr().out
    meta = load_model(out).metadata["training"]
    assert max(len(line) for line in text.splitlines()) < 200
    assert '"history"' not in text and "inspect --json" in text
    for direction, info in meta["directions"].items():
        line = next(x for x in text.splitlines() if x.strip().startswith(direction + " "))
        assert f"{len(info['history'])} passes" in line and "converged yes" in line
        assert f"temperature {info['summary']['temperature']:.4g}" in line
        assert f"calibration log-loss {info['calibration']['log_loss_before']:.4f} -> " \
               f"{info['calibration']['log_loss']:.4f}" in line
        assert f"final objective {info['history'][-1]['objective']:.6g}" in line
    assert cli_main(["inspect", "--json", str(out)]) == 0
    full = json.loads(capsys.readouterr().out)
    assert full["metadata"]["training"]["directions"]["backward"]["history"] == meta["directions"]["backward"]["history"]


@pytest.mark.parametrize("option, value, named", [("--type", "hier-xyz-backward-fe", "unknown part 'xyz'"),
                                                  ("--features", "S16", "S16"),
                                                  ("--param", "solver=newton", "solver='newton' is not allowed")])
def test_a_misused_option_is_a_usage_error_exit_2(small_store, tmp_path, capsys, option, value, named):
    """Exit 2 = the command line is wrong (as argparse's own errors), 3 = the data is (README)."""
    args = {"--type": "wbe-msd-backward-fe", "--features": "S7"}
    args[option] = value
    code = cli_main(["train", "--family", "maxent", "--store", str(small_store), "--out", str(tmp_path / "m"),
                     "--quiet", *[x for kv in args.items() for x in kv]])
    assert code == 2 and named in capsys.readouterr().err
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("features", ["S7", "S6,neighbour"])  # one matrix, or one a direction
def test_a_run_stopped_after_its_fits_does_not_fit_them_again(small_store, tmp_path, capsys, features):
    """The weight file cannot be written (here: a folder stands at OUT), as when a machine
    goes after the fits; the next run takes every finished direction from OUT.parts, and
    writes what a run that was never stopped writes."""
    out, fresh = tmp_path / "m.mrw", tmp_path / "fresh.mrw"
    out.mkdir()
    with pytest.raises(IsADirectoryError):
        train(small_store, out, "svm", "--C", "0.5", "--features", features)
    parts = tmp_path / "m.mrw.parts"
    assert sorted(p.name for p in parts.iterdir()) == ["backward.npz", "forward.npz"]
    out.rmdir()
    capsys.readouterr()
    assert cli_main(["train", "--family", "svm", "--features", features, "--type", TYPE, "--store", str(small_store),
                     "--out", str(out), "--threshold", "1", "--C", "0.5"]) == 0
    assert capsys.readouterr().err.count("the fit of an earlier run") == 2
    assert not parts.exists()
    assert train(small_store, fresh, "svm", "--C", "0.5", "--features", features) == 0
    got, want = read_weight_file(out), read_weight_file(fresh)
    for name in ("keys", "weights", "bias"):
        np.testing.assert_array_equal(got.arrays[name], want.arrays[name])
    objectives = [[h["objective"] for h in w.metadata["training"]["directions"]["forward"]["history"]]
                  for w in (got, want)]
    assert objectives[0] == objectives[1]


def test_parts_of_other_settings_are_fitted_again(small_store, tmp_path, capsys):
    out, fresh = tmp_path / "m.mrw", tmp_path / "fresh.mrw"
    out.mkdir()
    with pytest.raises(IsADirectoryError):
        train(small_store, out, "svm", "--C", "0.5")
    out.rmdir()
    capsys.readouterr()
    assert cli_main(["train", "--family", "svm", "--features", "S7", "--type", TYPE, "--store", str(small_store),
                     "--out", str(out), "--threshold", "1", "--C", "2"]) == 0
    assert "the fit of an earlier run" not in capsys.readouterr().err
    assert train(small_store, fresh, "svm", "--C", "2") == 0
    got, want = read_weight_file(out), read_weight_file(fresh)
    np.testing.assert_array_equal(got.arrays["weights"], want.arrays["weights"])
