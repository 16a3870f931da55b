"""Each family's hyper-parameters are checked where the model is built, before any work.

Specification: SPEC below (written from the papers and the solvers, apart from the
families' declarations) gives every hyper-parameter's range; `from_params` accepts every
value inside it and refuses every value outside it (hypothesis draws both sides of each
bound, and NaN, infinities, booleans, strings, fractions for whole numbers) with a
UsageError (exit 2) that names the parameter, the value and the range. The hybrid's base
must be a softmax classifier family and its base_params are checked by that family. On
the command line, the issue's two commands end with exit 2 before the store is opened; a
family built in code is refused at fit's door.
"""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from training.cli import main as cli_main
from training.errors import UsageError
from training.families import FAMILIES
from training.families.svm import MulticlassSVM


def R(low, high=None, *, open_low=False, open_high=False):
    """A real number from low to high (None: unbounded)."""
    return ("real", low, high, open_low, open_high)


def W(low, high=None):
    """A whole number from low to high."""
    return ("whole", low, high, False, False)


IMPLIED = {"n_classes": W(2), "seed": W(0)}
DUAL = {"C": R(0, open_low=True), "eps": R(0, open_low=True), "bias": R(0), "max_passes": W(1)}
SPEC = {
    "svm": {**DUAL, **IMPLIED, "shrinking": ("bound", "paper")},
    "dual-mlr": {**DUAL, **IMPLIED, "init_eps": R(0, 1, open_low=True, open_high=True), "max_trials": W(1),
                 "inner_steps": W(1), "step": ("exact", "eg"), "exact_gap": R(0),
                 "shrink_below": R(0, 1, open_low=True), "compact_below": R(0, 1)},
    "maxent": {**DUAL, **IMPLIED, "tol": R(0, open_low=True), "batch_size": W(1),
               "learning_rate": R(0, open_low=True), "solver": ("lbfgs", "owlqn", "sgd")},
    "nb-map": {"alpha": R(1, open_low=True), "n_classes": W(2)},
    "nb-bayes": {"alpha": R(0, open_low=True), "n_classes": W(2)},
    "lexical": {"smoothing": R(0), "n_classes": W(2)},
    "hybrid": {"rare_max": W(1), "base_threshold": W(0), "beta": R(0, open_low=True), "n_classes": W(2)},
}
del SPEC["maxent"]["eps"]  # maxent stops on tol
NOT_RANGES = {"verbose", "memory", "temperature_scaling", "base", "base_params"}
NONE_ALLOWED = {"n_classes", "beta"}
RANGES = [(f, p) for f, params in sorted(SPEC.items()) for p, spec in sorted(params.items()) if spec[0] in ("real", "whole")]
OPTIONS = [(f, p) for f, params in sorted(SPEC.items()) for p, spec in sorted(params.items())
           if spec[0] not in ("real", "whole")]


def test_every_hyper_parameter_is_specified_here():
    assert set(FAMILIES) == set(SPEC)
    for family, cls in FAMILIES.items():
        assert cls.accepted_params() - NOT_RANGES == set(SPEC[family]), family
        cls.from_params({})  # the defaults are in range


def _inside(kind, low, high, open_low, open_high):
    if kind == "whole":
        return st.integers(low, high if high is not None else 10 ** 9)
    return st.floats(low, high, exclude_min=open_low, exclude_max=open_high, allow_nan=False, allow_infinity=False)


def _outside(kind, low, high, open_low, open_high, none_ok):
    if kind == "whole":
        sides = st.integers(max_value=low - 1) | (st.integers(min_value=high + 1) if high is not None else st.nothing())
        odd = [2.5, float(low)]
    else:
        sides = st.floats(max_value=low, exclude_max=not open_low, allow_nan=False) | (
            st.floats(min_value=high, exclude_min=not open_high, allow_nan=False) if high is not None else st.nothing())
        odd = []
    return sides | st.sampled_from(odd + [math.nan, math.inf, -math.inf, True, "1"] + ([] if none_ok else [None]))


@pytest.mark.parametrize("family, name", RANGES, ids=[f"{f}-{p}" for f, p in RANGES])
@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_each_bound_is_enforced_on_both_sides(family, name, data):
    cls, spec = FAMILIES[family], SPEC[family][name]
    value = data.draw(_inside(*spec), label="inside")
    assert getattr(cls.from_params({name: value}), name) == value
    bad = data.draw(_outside(*spec, none_ok=name in NONE_ALLOWED), label="outside")
    with pytest.raises(UsageError) as refused:
        cls.from_params({name: bad})
    message = str(refused.value)
    assert refused.value.exit_code == 2
    assert f"family {family}: {name}={bad!r} is not allowed: {name} must be" in message, message


@pytest.mark.parametrize("family, name", OPTIONS, ids=[f"{f}-{p}" for f, p in OPTIONS])
@settings(max_examples=30, deadline=None)
@given(word=st.text(max_size=8))
def test_options_are_the_listed_ones(family, name, word):
    cls, allowed = FAMILIES[family], SPEC[family][name]
    for value in allowed:
        assert getattr(cls.from_params({name: value}), name) == value
    if word not in allowed:
        with pytest.raises(UsageError, match=re.escape(f"{name}={word!r} is not allowed")):
            cls.from_params({name: word})


def test_the_hybrids_base_is_a_softmax_classifier_and_its_params_are_checked_by_it():
    hybrid = FAMILIES["hybrid"]
    for base in ("maxent", "dual-mlr", "svm", "nb-map"):
        hybrid.from_params({"base": base})
    for base in ("lexical", "nb-bayes", "hybrid", "nope"):
        with pytest.raises(UsageError, match=f"base='{base}' is not allowed: base must be one of 'dual-mlr', "
                                             "'maxent', 'nb-map', 'svm'"):
            hybrid.from_params({"base": base})
    with pytest.raises(UsageError, match="base_params of its base, family svm: C=-1 is not allowed"):
        hybrid.from_params({"base": "svm", "base_params": {"C": -1}})
    with pytest.raises(UsageError, match="family svm has no hyper-parameter alpha"):
        hybrid.from_params({"base": "svm", "base_params": {"alpha": 2}})


@pytest.mark.parametrize("family, param, named", [("svm", "C=-1", "C=-1 is not allowed: C must be a number > 0"),
                                                  ("dual-mlr", "init_eps=2.0",
                                                   "init_eps=2.0 is not allowed: init_eps must be a number in (0, 1)")])
def test_the_issues_commands_stop_before_any_work(tmp_path, capsys, family, param, named):
    """The store does not exist: a check that ran after any work would exit 3 for it."""
    out = tmp_path / "M"
    code = cli_main(["train", "--family", family, "--features", "S7", "--type", "hier-msd-bidirectional-fe",
                     "--store", str(tmp_path / "STORE"), "--out", str(out), "--param", param, "--quiet"])
    assert code == 2 and named in capsys.readouterr().err
    assert not out.exists()


def test_experiment_checks_every_familys_params_before_the_first_trains(tmp_path, capsys):
    code = cli_main(["experiment", "--corpus", str(tmp_path / "CORPUS"), "--work", str(tmp_path / "work"),
                     "--families", "maxent,svm", "--features", "S7", "--param", "svm:eps=0"])
    assert code == 2 and "family svm: eps=0 is not allowed" in capsys.readouterr().err
    assert not (tmp_path / "work").exists()


def test_a_family_built_in_code_is_refused_at_fits_door(real_Xy):
    X, y = real_Xy
    with pytest.raises(UsageError, match="family svm: C=0 is not allowed"):
        MulticlassSVM(C=0, n_classes=3).fit(X, y)
