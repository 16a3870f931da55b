"""Scoring a PairBatch through a model file equals the textbook computation, in both precisions."""

from __future__ import annotations

import numpy as np
import pytest

from training.errors import ModelFileError
from training.features.templates import extract_keys
from training.features.spec import FeatureSpec
from training.modelfile.links import LINKS
from training.modelfile.model import load_model, write_model
from training.modelfile.request import batch_from_strings
from training.modelfile.container import read_weight_file, write_weight_file

SOURCE = "彼 は 昨日 東京 へ 行っ た".split()
PAIRS = [
    (0, 1, ["he"], [(0, 0)]),
    (2, 3, ["yesterday"], [(0, 0)]),
    (3, 5, ["to", "tokyo"], [(0, 1), (1, 0)]),
    (5, 7, ["went"], [(0, 0), (1, 0)]),
    (0, 2, ["he"], [(0, 0)]),
    (4, 5, ["unknown", "words"], []),
]


def reference(keys_vocab, weights, bias, indptr, keys, n_classes):
    """Dense textbook version: x . W + b, softmax per direction block."""
    n = indptr.shape[0] - 1
    scores = np.tile(bias.astype(np.float64), (n, 1))
    for p in range(n):
        for k in keys[indptr[p]:indptr[p + 1]]:
            pos = np.searchsorted(keys_vocab, k)
            if pos < keys_vocab.shape[0] and keys_vocab[pos] == k:
                scores[p] += weights[pos]
    blocks = scores.reshape(n, -1, n_classes)
    e = np.exp(blocks - blocks.max(axis=2, keepdims=True))
    return (e / e.sum(axis=2, keepdims=True)).reshape(n, -1)


@pytest.fixture()
def model_parts():
    batch = batch_from_strings(SOURCE, PAIRS)
    spec = FeatureSpec.parse("S6")
    indptr, keys = extract_keys(batch, spec)
    vocab = np.unique(keys)[::2]  # half the features known, so lookups also miss
    rng = np.random.default_rng(5)
    weights = rng.normal(size=(vocab.shape[0], 6)).astype(np.float32)
    bias = rng.normal(size=6).astype(np.float32)
    return batch, spec, indptr, keys, vocab, weights, bias


@pytest.mark.parametrize("float16", [False, True])
def test_predict_proba_matches_reference(tmp_path, model_parts, float16):
    batch, spec, indptr, keys, vocab, weights, bias = model_parts
    path = tmp_path / "model.mrw"
    write_model(path, family="maxent", moses_type="hier-msd-bidirectional-fe", keys=vocab, weights=weights,
                bias=bias, features=spec, threshold=10, hyperparameters={"C": 1.0}, float16=float16)
    model = load_model(path)
    assert model.outputs == ("backward.mono", "backward.swap", "backward.disc",
                             "forward.mono", "forward.swap", "forward.disc")
    assert model.classes == ("mono", "swap", "disc") and model.directions == ("backward", "forward")
    assert model.family == "maxent" and model.spec == spec and model.n_features == vocab.shape[0]
    assert model.metadata["hyperparameters"] == {"C": 1.0} and model.metadata["threshold"] == 10
    probs = model.predict_proba(batch)
    assert probs.dtype == np.float32 and probs.shape == (len(PAIRS), 6)
    used = weights.astype(np.float16).astype(np.float32) if float16 else weights
    expected = reference(vocab, used, bias, indptr, keys, 3)
    np.testing.assert_allclose(probs, expected, atol=2e-6)
    np.testing.assert_allclose(probs.reshape(-1, 2, 3).sum(axis=2), 1.0, atol=1e-6)
    _, n_found = model.scores(indptr, keys)
    assert n_found.sum() == np.isin(keys, vocab).sum()


def test_float16_file_is_smaller(tmp_path, model_parts):
    *_, vocab, weights, bias = model_parts
    sizes = {}
    for f16 in (False, True):
        write_model(tmp_path / f"m{f16}", family="svm", moses_type="wbe-msd-backward-fe", keys=vocab,
                    weights=weights[:, :3], bias=bias[:3], features="S6", threshold=10, float16=f16)
        sizes[f16] = load_model(tmp_path / f"m{f16}").weights.nbytes
    assert sizes[True] * 2 == sizes[False]


def test_write_model_refuses_inconsistent_arrays(tmp_path, model_parts):
    """The project's model-file error (exit 4, naming the file), never a bare ValueError,
    and nothing is left behind."""
    *_, vocab, weights, bias = model_parts
    common = dict(family="svm", features="S7", threshold=10)
    with pytest.raises(ModelFileError, match="do not match"):
        write_model(tmp_path / "m", moses_type="hier-msd-backward-fe", keys=vocab, weights=weights, bias=bias,
                    **common)
    with pytest.raises(ModelFileError, match="strictly increasing"):
        write_model(tmp_path / "m", moses_type="hier-msd-bidirectional-fe", keys=vocab[::-1], weights=weights,
                    bias=bias, **common)
    with pytest.raises(ModelFileError, match="NaN"):
        write_model(tmp_path / "m", moses_type="hier-msd-bidirectional-fe", keys=vocab,
                    weights=np.full_like(weights, np.inf), bias=bias, **common)
    with pytest.raises(ModelFileError, match="unknown link"):
        write_model(tmp_path / "m", moses_type="hier-msd-bidirectional-fe", keys=vocab, weights=weights,
                    bias=bias, link="no-such-link", **common)
    with pytest.raises(ModelFileError, match="clashes"):
        write_model(tmp_path / "m", moses_type="hier-msd-bidirectional-fe", keys=vocab, weights=weights,
                    bias=bias, extras={"bias": bias}, **common)
    with pytest.raises(ModelFileError, match="cannot be written") as refused:
        write_model(tmp_path / "m", moses_type="hier-msd-bidirectional-fe", keys=vocab, weights=weights,
                    bias=bias, metadata={"summary": float("nan")}, **common)
    assert refused.value.exit_code == 4 and str(tmp_path / "m") in str(refused.value)
    assert list(tmp_path.iterdir()) == []


def rewrite(tmp_path, change_meta=None, change_arrays=None):
    """A valid model file with one thing changed, re-checksummed: only the model checks can catch it."""
    src = tmp_path / "good"
    rng = np.random.default_rng(0)
    keys = np.unique(rng.integers(0, 2**63, size=20, dtype=np.uint64))
    write_model(src, family="svm", moses_type="phrase-mslr-forward-fe", keys=keys,
                weights=np.zeros((keys.shape[0], 4), np.float32), bias=np.zeros(4, np.float32),
                features="S7", threshold=10)
    wf = read_weight_file(src)
    meta, arrays = dict(wf.metadata), {k: np.array(v) for k, v in wf.arrays.items()}
    if change_meta:
        change_meta(meta)
    if change_arrays:
        change_arrays(arrays)
    bad = tmp_path / "bad"
    write_weight_file(bad, meta, arrays)
    with pytest.raises(ModelFileError) as info:
        load_model(bad)
    return str(info.value)


def test_load_refuses_other_hash_scheme(tmp_path):
    assert "hash scheme" in rewrite(tmp_path, lambda m: m.update(hash_scheme="md5/v0"))


def test_load_refuses_unknown_link_and_spec(tmp_path):
    assert "link" in rewrite(tmp_path, lambda m: m.update(link="mystery"))
    assert "feature spec" in rewrite(tmp_path, lambda m: m.update(features="S99"))


def test_load_refuses_schema_mismatch(tmp_path):
    assert "disagree" in rewrite(tmp_path, lambda m: m.update(outputs=["a", "b", "c", "d"]))
    assert "weights" in rewrite(tmp_path, change_arrays=lambda a: a.update(weights=a["weights"][:, :3]))
    assert "increasing" in rewrite(tmp_path, change_arrays=lambda a: a.update(keys=a["keys"][::-1].copy()))
    assert "lacks" in rewrite(tmp_path, lambda m: m.pop("family"))
    nan_weights = lambda a: a.update(weights=np.full_like(a["weights"], np.nan))  # noqa: E731
    assert "NaN" in rewrite(tmp_path, change_arrays=nan_weights)


def test_softmax_is_registered():
    assert "softmax" in LINKS


@pytest.mark.parametrize("link, message", [
    (lambda model, scores, n_found: scores, "do not sum to 1 per direction"),
    (lambda model, scores, n_found: scores[:, :-1], "warm-up score has shape"),
    (lambda model, scores, n_found: np.full_like(scores, np.nan), "not finite"),
])
def test_load_warm_up_refuses_a_link_that_answers_nonsense(tmp_path, monkeypatch, link, message):
    """The one warm-up (load_model) both compiles the serving path and checks its answer."""
    monkeypatch.setitem(LINKS, "test-nonsense", link)
    keys = np.arange(1, 5, dtype=np.uint64)
    path = tmp_path / "nonsense.mrw"
    write_model(path, family="maxent", moses_type="hier-msd-bidirectional-fe", keys=keys,
                weights=np.zeros((4, 6), np.float32), bias=np.zeros(6, np.float32), features="S7",
                threshold=0, link="test-nonsense")
    with pytest.raises(ModelFileError, match=message) as info:
        load_model(path)
    assert info.value.path == str(path)
    assert load_model(path, warm_up=False).link_name == "test-nonsense"


# -- metadata of the wrong JSON type (issue 15): only ModelFileError comes out -------------------
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from training.modelfile.model import METADATA_TYPES, REQUIRED_METADATA  # noqa: E402

_JSON_SCALARS = st.none() | st.booleans() | st.integers(-2**40, 2**40) | \
    st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8)
_JSON = st.recursive(_JSON_SCALARS, lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=6)


@pytest.fixture(scope="module")
def good_model_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("meta") / "good.mrw"
    keys = np.unique(np.random.default_rng(0).integers(0, 2**63, size=20, dtype=np.uint64))
    write_model(path, family="svm", moses_type="phrase-mslr-forward-fe", keys=keys,
                weights=np.zeros((keys.shape[0], 4), np.float32), bias=np.zeros(4, np.float32),
                features="S7", threshold=10)
    wf = read_weight_file(path)
    return dict(wf.metadata), {k: np.array(v) for k, v in wf.arrays.items()}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes=st.dictionaries(st.sampled_from(sorted(set(REQUIRED_METADATA) | {"training"})), _JSON,
                               min_size=1, max_size=3))
def test_metadata_of_any_type_loads_or_is_a_model_file_error(tmp_path, good_model_file, changes):
    meta, arrays = good_model_file
    path = tmp_path / "mutated.mrw"
    write_weight_file(path, {**meta, **changes}, arrays)  # a valid checksum over foreign metadata
    try:
        load_model(path, warm_up=True)
    except ModelFileError as exc:
        wrong = [name for name, value in changes.items() if not METADATA_TYPES[name][0](value)]
        if wrong:  # a type error names a field whose type is wrong
            assert any(repr(name) in str(exc) for name in wrong), (changes, str(exc))


@pytest.mark.parametrize("field, value, what", [
    ("link", ["softmax"], "a string"), ("moses_type", 7, "a string"), ("classes", "mono", "a list of strings"),
    ("outputs", [1, 2, 3, 4], "a list of strings"), ("n_features", "20", "an integer"),
    ("threshold", True, "an integer"), ("hyperparameters", [], "an object"), ("features", None, "a string"),
    ("training", "fast", "an object"), ("weights_dtype", "float64", '"float32" or "float16"'),
])
def test_metadata_type_errors_name_the_field(tmp_path, field, value, what):
    message = rewrite(tmp_path, lambda m: m.update({field: value}))
    assert f"metadata field {field!r} must be {what}" in message and str(tmp_path / "bad") in message
