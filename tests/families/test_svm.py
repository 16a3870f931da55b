"""The Crammer-Singer SVM solves the same problem as LIBLINEAR `-s 4`, to its accuracy."""

from __future__ import annotations

import re

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import minimize

from liblinear.liblinearutil import parameter, predict, problem, train
from training.families.dual_mlr import DualMLR
from training.families.solvers import rows, state
from training.families.solvers.shrinking import ConvergenceWarning
from training.families.svm import MulticlassSVM, _sub_problem
from mapped_matrix import mapped_csr


def liblinear_cs(X, y, C, eps, capfd):
    """Train liblinear -s 4 -B 1 and return (model, its printed dual objective)."""
    capfd.readouterr()
    model = train(problem(y.astype(float), X.astype(np.float64)), parameter(f"-s 4 -c {C} -e {eps} -B 1"))
    out = capfd.readouterr().out
    objective = float(re.findall(r"Objective value = (\S+)", out)[-1])
    return model, objective


def liblinear_accuracy(model, X, y) -> float:
    labels, _, _ = predict(y.astype(float), X.astype(np.float64), model, "-q")
    return float(np.mean(np.asarray(labels) == y))


@pytest.mark.parametrize("C", [0.1, 1.0])
def test_dual_objective_and_accuracy_match_liblinear(real_Xy, capfd, C):
    X, y = real_Xy
    ours = MulticlassSVM(C=C, eps=0.01, seed=1).fit(X, y)
    theirs, their_objective = liblinear_cs(X, y, C, 0.01, capfd)
    assert ours.converged_
    assert abs(ours.dual_objective_ - their_objective) <= 1e-3 * abs(their_objective)
    our_accuracy = float(np.mean(ours.predict(X) == y))
    assert abs(our_accuracy - liblinear_accuracy(theirs, X, y)) <= 0.002
    # Weak duality: the primal at our w is above the (negated, minimised) dual.
    assert ours.primal_objective(X, y) >= -ours.dual_objective_ - 1e-6


def test_sub_problem_is_the_exact_minimiser():
    """Algorithm 1 against a generic QP solver on random per-example problems (eq. 9)."""
    rng = np.random.default_rng(3)
    for _ in range(30):
        K = int(rng.integers(2, 5))
        A, C, yi = float(rng.uniform(0.5, 20)), float(rng.uniform(0.05, 2)), int(rng.integers(K))
        B = rng.normal(size=K) * 2
        alpha = np.empty(K)
        _sub_problem(A, B, yi, C, alpha)
        bound = np.where(np.arange(K) == yi, C, 0.0)
        assert np.all(alpha <= bound + 1e-12) and abs(alpha.sum()) < 1e-9

        def f(a):
            return 0.5 * A * a @ a + B @ a
        ref = minimize(f, np.zeros(K), jac=lambda a: A * a + B, method="SLSQP",
                       bounds=[(None, b) for b in bound],
                       constraints=[{"type": "eq", "fun": lambda a: a.sum(), "jac": lambda a: np.ones(K)}],
                       options={"ftol": 1e-12})
        assert f(alpha) <= ref.fun + 1e-7


def test_shrinking_history_and_determinism(real_Xy):
    X, y = real_Xy
    a = MulticlassSVM(C=0.5, eps=0.05, seed=7).fit(X, y)
    b = MulticlassSVM(C=0.5, eps=0.05, seed=7).fit(X, y)
    c = MulticlassSVM(C=0.5, eps=0.05, seed=8).fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert [h["active"] for h in a.history_] == [h["active"] for h in b.history_]
    assert not np.array_equal(a.coef_, c.coef_)  # the order matters ...
    assert abs(a.dual_objective_ - c.dual_objective_) <= 1e-2 * abs(a.dual_objective_)  # ... the optimum not
    actives = [h["active"] for h in a.history_]
    assert actives[0] == 1.0 and min(actives) < 0.5  # shrinking really drops examples
    assert {"pass", "active", "objective", "seconds", "max_violation"} <= set(a.history_[0])
    objectives = [h["objective"] for h in a.history_]
    assert all(x >= y - 1e-6 for x, y in zip(objectives, objectives[1:]))  # dual descent
    assert a.history_[-1]["max_violation"] < 0.05


def test_stopping_at_max_passes_warns_and_says_so_in_the_fit_summary(real_Xy):
    X, y = real_Xy
    with pytest.warns(ConvergenceWarning, match=r"svm: stopped after max_passes=2 passes"):
        capped = MulticlassSVM(C=0.5, eps=0.01, max_passes=2, seed=1).fit(X, y)
    summary = capped.fit_summary()
    assert summary["converged"] is False and summary["passes"] == 2
    assert summary["max_violation"] == capped.history_[-1]["max_violation"] >= 0.01


def test_a_converged_fit_does_not_warn(real_Xy, recwarn):
    X, y = real_Xy
    summary = MulticlassSVM(C=0.5, eps=0.05, seed=1).fit(X, y).fit_summary()
    assert not [w for w in recwarn if issubclass(w.category, ConvergenceWarning)]
    assert summary["converged"] is True and summary["max_violation"] < 0.05


def test_temperature_calibration_is_folded_into_exported_weights(real_Xy):
    X, y = real_Xy
    n = X.shape[0]
    fit, held = np.arange(n) < 0.8 * n, np.arange(n) >= 0.8 * n
    model = MulticlassSVM(C=1.0, eps=0.1).fit(X[fit], y[fit])
    raw = model.predict_proba(X[held])
    model.calibrate(X[held], y[held])
    calibrated = model.predict_proba(X[held])
    nll = lambda p: -np.mean(np.log(p[np.arange(held.sum()), y[held]]))  # noqa: E731
    assert model.temperature_ != 1.0
    assert nll(calibrated) < nll(raw)
    arrays = model.export_arrays()
    scores = X[held] @ arrays["weights"].astype(np.float64) + arrays["bias"]
    served = np.exp(scores - scores.max(axis=1, keepdims=True))
    served /= served.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(served, calibrated, atol=1e-5)


def test_streamed_passes_over_a_mapped_matrix_still_match_liblinear(real_Xy, capfd, tmp_path, monkeypatch):
    """The matrix as `train` gets it (mapped from the feature cache, broadcast ones), read
    in many small chunks and then from compact copies of the active set: same problem,
    same optimum as LIBLINEAR, and every example's alpha written back."""
    X, y = real_Xy
    mapped = mapped_csr(X, tmp_path)
    indptr = mapped.indptr
    monkeypatch.setattr(rows, "CHUNK_NNZ", 300)  # several chunks on this slice
    monkeypatch.setattr(rows, "COMPACT_BELOW", 0.5)  # compact early and often
    assert rows.row_chunks(indptr, X.shape[0], rows.CHUNK_NNZ) > 1
    ours = MulticlassSVM(C=1.0, eps=0.01, seed=1).fit(mapped, y)
    theirs, their_objective = liblinear_cs(X, y, 1.0, 0.01, capfd)
    assert ours.converged_
    assert min(h["active"] for h in ours.history_) < rows.COMPACT_BELOW  # compact copies ran
    assert abs(ours.dual_objective_ - their_objective) <= 1e-3 * abs(their_objective)
    assert abs(float(np.mean(ours.predict(X) == y)) - liblinear_accuracy(theirs, X, y)) <= 0.002
    assert ours.primal_objective(X, y) >= -ours.dual_objective_ - 1e-6


@pytest.mark.parametrize("family", [MulticlassSVM, DualMLR])
def test_state_in_a_file_beside_a_mapped_matrix_trains_the_same_model(real_Xy, tmp_path, monkeypatch,
                                                                       state_files, family):
    """A mapped matrix gets its per-example state (labels, dual variables, visiting
    order) in a file beside it, read and written a chunk at a time: the same passes and
    the same weights, to the bit, as with the state in memory; int8 labels as int64."""
    X, y = real_Xy
    monkeypatch.setattr(rows, "CHUNK_NNZ", 300)
    monkeypatch.setattr(rows, "COMPACT_BELOW", 0.5)
    monkeypatch.setattr(state, "PIECE_ROWS", 100)  # fill, sum and compact in many pieces
    files = state_files
    if family is DualMLR:  # it keeps a problem that fits its share of --memory resident
        monkeypatch.setattr(rows, "RESIDENT_SHARE", 0.0)  # (issue 30): stream, as at scale
    in_memory = family(C=1.0, eps=0.05, seed=3).fit(X, y)
    assert not files
    in_file = family(C=1.0, eps=0.05, seed=3).fit(mapped_csr(X, tmp_path), y.astype(np.int8))
    assert files and all(f._file.closed for f in files)  # the family's state and the order
    assert [h["active"] for h in in_file.history_] == [h["active"] for h in in_memory.history_]
    assert in_file.coef_.tobytes() == in_memory.coef_.tobytes()
    assert in_file.dual_objective_ == in_memory.dual_objective_


def record_compactions(monkeypatch) -> list[tuple[int, int, int]]:
    """(active examples, bytes, bytes of its column indices) of every compact copy made from now on."""
    made = []
    real = rows.Compacted.__init__

    def recording(self, *args):
        real(self, *args)
        made.append((self.active, self.nbytes(), self.rows[1].nbytes))

    monkeypatch.setattr(rows.Compacted, "__init__", recording)
    return made


def test_a_compact_copy_is_made_only_when_it_fits_the_memory_budget(real_Xy, monkeypatch):
    X, y = real_Xy
    monkeypatch.setattr(rows, "CHUNK_NNZ", 300)
    monkeypatch.setattr(rows, "COMPACT_BELOW", 0.5)
    made = record_compactions(monkeypatch)
    MulticlassSVM(C=1.0, eps=0.05, seed=3).fit(X, y)
    assert made  # the default budget holds this small problem many times over
    made.clear()
    monkeypatch.setattr(rows, "COMPACT_SHARE", 1e-6)  # no copy fits: every pass streams
    tight = MulticlassSVM(C=1.0, eps=0.05, seed=3).fit(X, y)
    assert not made and tight.converged_


def test_a_verbose_fit_says_how_large_each_compact_copy_is(real_Xy, monkeypatch, capsys, tmp_path):
    """The compact copy sets a streamed run's peak (issue 30), so verbose training names
    its examples and size; the examples are those the next pass starts with."""
    X, y = real_Xy
    monkeypatch.setattr(rows, "CHUNK_NNZ", 300)
    monkeypatch.setattr(rows, "COMPACT_BELOW", 0.5)
    sizes = record_compactions(monkeypatch)
    model = MulticlassSVM(C=1.0, eps=0.05, seed=3, verbose=True).fit(X, y)
    notes = [line for line in capsys.readouterr().err.splitlines() if "compact copy" in line]
    assert sizes and len(notes) == len(sizes)
    n = X.shape[0]
    for line, (active, nbytes, _) in zip(notes, sizes):
        p = int(line.split("pass ")[1].split(":")[0])
        assert f"compact copy of {active:,} active examples" in line
        assert f"{nbytes / 2**20:,.0f} MiB" in line
        assert round(model.history_[p]["active"] * n) == active  # the pass after the copy
        assert nbytes >= X[:active].data.nbytes  # at least the copied rows' values
    # the feature cache's rows as train maps them (all-ones data broadcast): the same copies,
    # each without its values (float32, one per column index: as many bytes as the int32 indices)
    in_memory = list(sizes)
    sizes.clear()
    MulticlassSVM(C=1.0, eps=0.05, seed=3).fit(mapped_csr(X, tmp_path), y)
    assert [s[0] for s in sizes] == [s[0] for s in in_memory]
    assert all(m[1] == s[1] - s[2] for m, s in zip(sizes, in_memory))


def test_the_chunk_size_follows_the_memory_budget():
    assert rows.chunk_entries(None) == rows.CHUNK_NNZ == rows.chunk_entries("4G")
    assert rows.chunk_entries("1G") == rows.CHUNK_NNZ // 4
    assert rows.chunk_entries("16G") == rows.CHUNK_NNZ * 4


def test_row_sources_keep_rows_and_state_together_through_compaction(monkeypatch):
    """A kernel sees copies once the active set is compacted (several times here): each
    visited row is still its example's row, and every example's state reaches the full
    problem on reactivation."""
    monkeypatch.setattr(rows, "CHUNK_NNZ", 2000)
    monkeypatch.setattr(rows, "COMPACT_BELOW", 0.5)
    X = sp.random(5000, 300, density=0.02, format="csr", random_state=4)
    budget = np.arange(5000) % 7 + 1  # example i leaves the active set after budget[i] visits
    row_sum = np.array([X.indices[X.indptr[i]:X.indptr[i + 1]].sum() for i in range(5000)])
    visits = np.zeros(5000, dtype=np.int64)

    def kernel(rows_, state, index, active, tol):
        indptr, indices, _ = rows_
        visits_, budget_, row_sum_ = state
        s = 0
        while s < active:
            i = index[s]
            assert indices[indptr[i]:indptr[i + 1]].sum() == row_sum_[i]
            visits_[i] += 1
            if visits_[i] >= budget_[i]:
                active -= 1
                index[s], index[active] = index[active], index[s]
            else:
                s += 1
        return active, 0.0, 0

    source = rows.Streamed((X.indptr, X.indices, X.data), (visits, budget, row_sum), seed=0)
    kinds = []
    while source.active:
        source.run_pass(kernel, 1.0)
        source = source.shrunk()
        kinds.append(type(source).__name__)
    assert kinds.count("Compacted") >= 2 and kinds[0] == "Streamed"
    source = source.reactivate()
    assert isinstance(source, rows.Streamed) and source.active == 5000
    np.testing.assert_array_equal(visits, budget)
