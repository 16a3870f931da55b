"""moses-reorder-megam: the optimizer mert-moses.pl's PRO runs, checked against scikit-learn.

The samples are real: a slice of the `runN.pro.data` that Moses's `pro` wrote from a
ja-en dev decode (tests/moses/data/README.md). The optimizer runs as mert-moses.pl runs
it, as a program with MegaM's arguments, and its printed weights must be the optimum of
MegaM's objective, which scikit-learn's LogisticRegression(C=1/lambda,
fit_intercept=False) finds independently.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import sparse
from sklearn.linear_model import LogisticRegression

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = Path(__file__).resolve().parent / "data" / "pro.data"
MERT_ARGS = ["-fvals", "-maxi", "30", "-nobias", "binary"]  # mert-moses.pl's $megam_default_options
# mert-moses.pl get_weights_from_mert: dense, then sparse weights; a value is [\-\.\de]+
DENSE = re.compile(r"^F(\d+) ([\-\.\de]+)")
SPARSE = re.compile(r"^(.+_.+) ([\-\.\de]+)")


def megam(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "training.moses.megam", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def read_independently(path: Path, bias: bool = False):
    """The sample file, parsed here without the module under test: label, then name value pairs."""
    names: dict[str, int] = {}
    rows, cols, vals, y = [], [], [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        tokens = line.split()
        if not tokens:
            continue
        n = len(y)
        y.append(1 if float(tokens[0]) >= 0.5 else 0)
        if bias:
            rows.append(n), cols.append(names.setdefault("**BIAS**", len(names))), vals.append(1.0)
        for name, value in zip(tokens[1::2], tokens[2::2]):
            rows.append(n), cols.append(names.setdefault(name, len(names))), vals.append(float(value))
    X = sparse.csr_matrix((vals, (rows, cols)), shape=(len(y), len(names)))
    return list(names), X, np.array(y)


def sklearn_weights(X, y, lam: float) -> np.ndarray:
    model = LogisticRegression(C=1.0 / lam, fit_intercept=False, tol=1e-12, max_iter=100_000)
    return model.fit(X, y).coef_[0]


def printed_weights(stdout: str) -> dict[str, float]:
    weights = {}
    for line in stdout.splitlines():
        name, value = line.split(" ")
        assert re.fullmatch(r"-?\d+\.\d{20}", value), line  # MegaM's %10.20f: never an exponent
        weights[name] = float(value)
    return weights


@pytest.fixture(scope="module")
def samples():
    assert SAMPLES.is_file(), f"test data missing: {SAMPLES}"
    return read_independently(SAMPLES)


def test_the_sample_file_is_what_pro_writes(samples):
    names, X, y = samples
    assert X.shape[0] > 1000 and X.shape[0] % 2 == 0
    assert np.array_equal(y[0::2], np.ones(X.shape[0] // 2)) and not y[1::2].any()  # pro: "1" then "0"
    np.testing.assert_allclose((X[0::2] + X[1::2]).toarray(), 0, atol=1e-9)       # x and -x
    assert all(re.fullmatch(r"F\d+", n) for n in names) and len(names) >= 14


def test_weights_are_scikit_learns_optimum_as_mert_moses_runs_it(samples):
    names, X, y = samples
    done = megam(*MERT_ARGS, str(SAMPLES))
    assert done.returncode == 0, done.stderr
    assert "warning" not in done.stderr  # converged within -maxi 30
    printed = printed_weights(done.stdout)
    assert list(printed) == [n for n in names if n in printed]  # order of first appearance
    expected = sklearn_weights(X, y, lam=1.0)
    ours = np.array([printed.get(n, 0.0) for n in names])
    np.testing.assert_allclose(ours, expected, rtol=0, atol=1e-5 * np.abs(expected).max())
    # what mert-moses.pl reads from those lines: every feature as a dense F<i> weight
    parsed = {int(m.group(1)): float(m.group(2)) for m in map(DENSE.match, done.stdout.splitlines())}
    assert parsed == {int(n[1:]): w for n, w in printed.items()}


def test_lambda_is_the_precision_of_the_prior(samples):
    names, X, y = samples
    done = megam("-fvals", "-nobias", "-lambda", "20", "-quiet", "binary", str(SAMPLES))
    assert done.returncode == 0 and done.stderr == ""
    ours = np.array([printed_weights(done.stdout).get(n, 0.0) for n in names])
    expected = sklearn_weights(X, y, lam=20.0)
    np.testing.assert_allclose(ours, expected, rtol=0, atol=1e-5 * np.abs(expected).max())
    assert np.linalg.norm(ours) < np.linalg.norm(sklearn_weights(X, y, lam=1.0))


def test_bias_is_a_regularized_feature_printed_first():
    names, X, y = read_independently(SAMPLES, bias=True)
    done = megam("-fvals", "-maxi", "100", "binary", str(SAMPLES))
    assert done.returncode == 0, done.stderr
    printed = printed_weights(done.stdout)
    expected = sklearn_weights(X, y, lam=1.0)
    ours = np.array([printed.get(n, 0.0) for n in names])
    np.testing.assert_allclose(ours, expected, rtol=0, atol=1e-5 * np.abs(expected).max())
    if "**BIAS**" in printed:
        assert done.stdout.startswith("**BIAS** ")


def test_sparse_features_come_out_as_mert_moses_reads_them(tmp_path):
    path = tmp_path / "sparse.pro.data"
    lines = []
    for i in range(200):  # pairs whose BLEU order follows F0 and a sparse reordering feature
        a, b = (i % 7) - 3.0, (i % 5) - 2.0
        sign = 1 if a + 2 * b > 0 else -1
        lines += [f"1 F0 {sign * a:g} LexicalReordering0_swap_x {sign * b:g}",
                  f"0 F0 {-sign * a:g} LexicalReordering0_swap_x {-sign * b:g}"]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    done = megam(*MERT_ARGS, str(path))
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert DENSE.match(out[0]) and float(DENSE.match(out[0]).group(2)) > 0
    sparse_line = SPARSE.match(out[1])
    assert sparse_line and sparse_line.group(1) == "LexicalReordering0_swap_x" and float(sparse_line.group(2)) > 0


def test_a_line_without_features_is_an_example_with_nothing_to_learn(tmp_path):
    path = tmp_path / "empty.pro.data"
    path.write_text("1\n0\n1 F0 1\n0 F0 -1\n", encoding="utf-8")
    done = megam(*MERT_ARGS, str(path))
    assert done.returncode == 0, done.stderr
    w = printed_weights(done.stdout)["F0"]
    # maximise 2 log sigma(w) - w^2/2: its gradient 2 (1 - sigma(w)) - w vanishes at w
    assert abs(2 * (1 - 1 / (1 + np.exp(-w))) - w) < 1e-6


@pytest.mark.parametrize("args, message", [
    (["-fvals", "multiclass", "x"], "only `binary`"),
    (["-fvals", "-explicit", "binary", "x"], "-explicit"),
    (["-fvals", "-maxi", "many", "binary", "x"], "-maxi expects an integer"),
    (["binary"], "not enough arguments"),
])
def test_what_megam_options_it_does_not_have_is_a_usage_error(args, message):
    done = megam(*args)
    assert done.returncode == 2 and message in done.stderr and done.stdout == ""


def test_bad_input_names_file_and_line(tmp_path):
    path = tmp_path / "bad.pro.data"
    path.write_text("1 F0 0.5\n0 F0 x\n", encoding="utf-8")
    done = megam(*MERT_ARGS, str(path))
    assert done.returncode == 3 and f"{path}:2" in done.stderr and done.stdout == ""
    done = megam(*MERT_ARGS, str(tmp_path / "missing"))
    assert done.returncode == 3 and "missing" in done.stderr
