"""Hybrid (beyond the papers): the lexical table where a pair was seen, a classifier elsewhere.

On ja-en the lexical table wins on phrase pairs it saw in training and loses badly on
unseen ones; classifiers are the other way round. The hybrid combines them as a
Dirichlet backoff whose base measure is the classifier,

    p(k | pair, x) = (c_k(pair) + beta q_k(x)) / (N(pair) + beta)

written as a log-linear model so it serves through the plain softmax link with no
special case: p(k | pair, x) = softmax_k(z_k(x) + w_k(pair)), z the classifier's scores.
Each phrase-pair identity key carries the per-pair bias w(pair) that makes the model's
mean prediction over the pair's training occurrences equal the backoff estimate
(c_k + beta qbar_k) / (N + beta), qbar the classifier's mean prediction there (the
maxent optimality condition for a pair feature with the base weights fixed, solved by
a few vectorized fixed-point steps from w = ln(c_k + beta qbar_k) - ln qbar_k). The
context still moves the prediction around that mean. An unseen pair has no pair key,
so it gets the classifier alone.

Two choices make it win on both slices (benchmarks/RESULTS.md):
- the base classifier is trained on the examples of *rare* pairs only (seen at most
  `rare_max` times): held-out pairs the table has never seen resemble training pairs
  seen once (the Good-Turing intuition), and frequent pairs are the table's job anyway;
- beta is fitted on the calibration rows (sentences held out of the counts), by
  log-loss, so the seen/unseen mix of the fit is the mix the model will meet.

It trains on a `<base features>,pair` matrix that keys every seen pair and the base
features seen more than the threshold (10, the papers'; build_matrix's keep_pairs);
base features seen at most `base_threshold` times get no weight (a base feature must be
above both; give `--threshold` too to go below 10). It needs to know which
columns are pair keys: `train` passes `pair_columns` because `needs_pair_columns` is set.
Nothing it holds grows with the features seen once: at threshold 0 for every feature,
a Kyoto-sized corpus has hundreds of millions of columns (RESULTS, issue 29).
This module must not read stores.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, ClassVar

import numba as nb
import numpy as np
import scipy.sparse as sp

from training.constraints import positive, whole
from training.errors import InputError, UsageError
from training.families.base import ReorderingClassifier
from training.families.registry import FAMILIES, get_family, register
from training.families.solvers.sparse import decision_scores
from training.features.rowchunks import iter_row_chunks
from training.npyfile import NpyAppender
from training.probability import LOG_FLOOR, log_loss, log_softmax

BETAS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)


@nb.njit(nogil=True, cache=True)
def _scan_rows(indptr, indices, pair_id, row_pair, col_count):
    """Each row's pair (pair_id of its pair column, -1 if none) and every column's count;
    returns the most pair columns found in one row."""
    worst = 0
    for r in range(indptr.shape[0] - 1):
        found = 0
        for p in range(indptr[r], indptr[r + 1]):
            j = indices[p]
            col_count[j] += 1
            if pair_id[j] >= 0:
                row_pair[r] = pair_id[j]
                found += 1
        worst = max(worst, found)
    return worst


@nb.njit(nogil=True, cache=True)
def _restrict_rows(indptr, indices, data, keep, col_map, out_indptr, out_indices, out_data):
    """The kept rows with their columns renumbered by col_map (-1: dropped); returns
    (rows, entries) written. col_map is increasing, so columns stay sorted."""
    rows = 0
    w = 0
    out_indptr[0] = 0
    for r in range(indptr.shape[0] - 1):
        if not keep[r]:
            continue
        for p in range(indptr[r], indptr[r + 1]):
            c = col_map[indices[p]]
            if c >= 0:
                out_indices[w] = c
                out_data[w] = data[p]
                w += 1
        rows += 1
        out_indptr[rows] = w
    return rows, w


@nb.njit(nogil=True, cache=True)
def _pair_proba_sums(Z, w, row_pair, out):
    """out[pair] = the sum over the pair's rows of softmax(Z[row] + w[pair]): no
    temporary as large as Z (Kyoto: 40M rows)."""
    K = Z.shape[1]
    out[:] = 0.0
    p = np.empty(K)
    for r in range(Z.shape[0]):
        j = row_pair[r]
        top = -np.inf
        for k in range(K):
            p[k] = Z[r, k] + w[j, k]
            top = max(top, p[k])
        total = 0.0
        for k in range(K):
            p[k] = np.exp(p[k] - top)
            total += p[k]
        for k in range(K):
            out[j, k] += p[k] / total
    return out


@register
class HybridBackoff(ReorderingClassifier):
    """Lexical counts backing off to a classifier trained on rare pairs."""

    family: ClassVar[str] = "hybrid"
    link: ClassVar[str] = "softmax"
    needs_pair_columns: ClassVar[bool] = True
    default_features: ClassVar[str] = "S7,pair"
    default_threshold: ClassVar[int] = 10
    # rare_max >= 1: every training row has its pair's key, so 0 would leave the base no rows
    _parameter_constraints = {"base": [str], "base_params": [dict, None], "rare_max": [whole(1)],
                              "base_threshold": [whole(0)], "beta": [positive(), None]}

    def __init__(self, base: str = "maxent", base_params: dict | None = None, rare_max: int = 1,
                 base_threshold: int = 10, beta: float | None = None, n_classes: int | None = None,
                 verbose: bool = False):
        self.base = base
        self.base_params = base_params
        self.rare_max = rare_max
        self.base_threshold = base_threshold
        self.beta = beta
        self.n_classes = n_classes
        self.verbose = verbose

    @staticmethod
    def _can_be_base(family: type[ReorderingClassifier]) -> bool:
        """A softmax-link classifier over any features: its scores are the backoff's z(x)."""
        return family.link == "softmax" and family.features_by_language is None and not family.needs_pair_columns

    @classmethod
    def check_together(cls, values) -> None:
        """The base is a family that can be one, and base_params are in its ranges."""
        if values["base"] not in FAMILIES or not cls._can_be_base(FAMILIES[values["base"]]):
            bases = ", ".join(repr(name) for name, f in sorted(FAMILIES.items()) if cls._can_be_base(f))
            raise UsageError(f"family hybrid: base={values['base']!r} is not allowed: base must be one of {bases}")
        try:
            FAMILIES[values["base"]].from_params(values["base_params"])
        except UsageError as exc:
            raise UsageError(f"family hybrid: base_params of its base, {exc}") from None

    def _base_model(self) -> ReorderingClassifier:
        return get_family(self.base).from_params(self.base_params, n_classes=self.n_classes, verbose=self.verbose)

    def fit(self, X: sp.csr_matrix, y: np.ndarray, pair_columns: np.ndarray | None = None) -> "HybridBackoff":
        """One streamed pass finds each row's pair and the column counts; the base trains
        on its rare rows' base columns, written to a temporary file and streamed from it
        (no in-memory row or column slices of X)."""
        if pair_columns is None:
            raise InputError("hybrid: needs the pair-identity columns (train it with `moses-reorder train "
                             "--family hybrid --features S7,pair`)")
        X, y, K = self.check_Xy(X, y)
        self.pair_columns_ = np.asarray(pair_columns, dtype=bool)
        pairs = np.flatnonzero(self.pair_columns_)
        pair_id = np.full(X.shape[1], -1, dtype=np.int64)
        pair_id[pairs] = np.arange(pairs.size)
        row_pair = np.full(X.shape[0], -1, dtype=np.int64)
        col_count = np.zeros(X.shape[1], dtype=np.int64)
        for lo, hi, (indptr, indices, _) in iter_row_chunks(X):
            if _scan_rows(indptr, indices, pair_id, row_pair[lo:hi], col_count) > 1:
                raise InputError("hybrid: an example has two pair-identity keys")
        has = row_pair >= 0
        self.pair_count_ = np.bincount(row_pair[has] * K + y[has],
                                       minlength=pairs.size * K).reshape(pairs.size, K).astype(np.float64)
        self.base_columns_ = np.flatnonzero(~self.pair_columns_ & (col_count > self.base_threshold))
        # Rare pairs: the rows whose pair has at most rare_max examples (a row without a
        # known pair key counts as rare: it is unseen by construction).
        n_pair = self.pair_count_.sum(axis=1)
        rare = (row_pair < 0) | (n_pair[np.maximum(row_pair, 0)] <= self.rare_max)
        with tempfile.TemporaryDirectory(prefix="hybrid-base-") as tmp:
            X_base = self._base_rows(X, rare, Path(tmp))
            self.base_model_ = self._base_model().fit(X_base, y[rare])
            del X_base
        self.rare_examples_ = int(rare.sum())
        # Training-time cache (not exported): the examples with a pair key and their base scores.
        self._rows = np.flatnonzero(has)
        self._row_pair = row_pair[has]
        self._X_source = X
        self._refresh_base()
        self.beta_ = float(self.beta) if self.beta is not None else 2.0
        self._set_pair_weights()
        self.history_ = list(getattr(self.base_model_, "history_", []))
        return self

    def _column_map(self, n_columns: int) -> np.ndarray:
        col_map = np.full(n_columns, -1, dtype=np.int64)
        col_map[self.base_columns_] = np.arange(self.base_columns_.size)
        return col_map

    def _base_chunks(self, X: sp.csr_matrix, keep: np.ndarray):
        """(first row, end row, CSR of the kept rows' base columns) chunk by chunk."""
        col_map = self._column_map(X.shape[1])
        for lo, hi, (indptr, indices, data) in iter_row_chunks(X):
            out_indptr = np.empty(hi - lo + 1, dtype=np.int64)
            out_indices = np.empty(indices.shape[0], dtype=np.int32)
            out_data = np.empty(indices.shape[0], dtype=np.float32)
            rows, nnz = _restrict_rows(indptr, indices, data, keep[lo:hi], col_map, out_indptr, out_indices,
                                       out_data)
            yield lo, hi, sp.csr_matrix((out_data[:nnz], out_indices[:nnz], out_indptr[:rows + 1]),
                                        shape=(rows, self.base_columns_.size), copy=False)

    def _base_rows(self, X: sp.csr_matrix, keep: np.ndarray, directory: Path) -> sp.csr_matrix:
        """The kept rows' base columns as a CSR mapped from files in `directory`."""
        indptr = NpyAppender(directory / "indptr.npy", np.int64)
        indices = NpyAppender(directory / "indices.npy", np.int32)
        data = NpyAppender(directory / "data.npy", np.float32)
        indptr.append(np.zeros(1, dtype=np.int64))
        for _, _, part in self._base_chunks(X, keep):
            indptr.append(part.indptr[1:] + indices.count)
            indices.append(part.indices)
            data.append(part.data)
        for appender in (indptr, indices, data):
            appender.finish()
        arrays = [np.load(directory / f"{name}.npy", mmap_mode="r") for name in ("data", "indices", "indptr")]
        X_base = sp.csr_matrix(tuple(arrays), shape=(arrays[2].shape[0] - 1, self.base_columns_.size), copy=False)
        X_base.has_sorted_indices = True
        return X_base

    def _base_scores(self, X: sp.csr_matrix, keep: np.ndarray) -> np.ndarray:
        """The base model's decision values of the kept rows, a chunk at a time."""
        Z = np.empty((int(keep.sum()), self.pair_count_.shape[1]), dtype=np.float64)
        at = 0
        for _, _, part in self._base_chunks(X, keep):
            Z[at:at + part.shape[0]] = self.base_model_.decision_function(part)
            at += part.shape[0]
        return Z

    def _refresh_base(self) -> None:
        """Base scores of the pair rows and qbar, each pair's mean base prediction."""
        keep = np.zeros(self._X_source.shape[0], dtype=bool)
        keep[self._rows] = True
        self._Z = self._base_scores(self._X_source, keep)
        mean = self._pair_mean(np.zeros_like(self.pair_count_))
        self.pair_mean_proba_ = np.clip(mean, 1e-6, 1.0, out=mean)

    def _pair_mean(self, w: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Each pair's mean prediction over its training rows under pair weights w (into out)."""
        out = _pair_proba_sums(self._Z, w, self._row_pair, np.empty_like(self.pair_count_) if out is None else out)
        out /= np.maximum(self.pair_count_.sum(axis=1), 1)[:, None]
        return out

    def _set_pair_weights(self, steps: int = 8) -> None:
        """w(pair) such that the mean prediction over the pair's rows is the backoff target.

        Every [pairs x K] array is updated in place: with tens of millions of pairs each is
        most of a GB, and the expressions written out held about eight of them (issue 29)."""
        q, c = self.pair_mean_proba_, self.pair_count_
        log_target = c + self.beta_ * q
        log_target /= c.sum(axis=1, keepdims=True) + self.beta_
        np.log(log_target, out=log_target)
        w = log_target - np.log(q)
        step = np.empty_like(c)
        for _ in range(steps):
            self._pair_mean(w, out=step)
            np.clip(step, 1e-12, 1.0, out=step)
            np.log(step, out=step)
            np.subtract(log_target, step, out=step)
            w += step
        del log_target, step
        w -= w.max(axis=1, keepdims=True)
        self.pair_weight_ = np.maximum(w, LOG_FLOOR, out=w)

    def calibrate(self, X: sp.csr_matrix, y: np.ndarray) -> "HybridBackoff":
        """Calibrate the base (if it does that), then fit beta by held-out log-loss."""
        X = sp.csr_matrix(X)
        y = np.asarray(y, dtype=np.int64)
        if X.shape[0] == 0:
            return self
        with tempfile.TemporaryDirectory(prefix="hybrid-calibrate-") as tmp:
            self.base_model_.calibrate(self._base_rows(X, np.ones(X.shape[0], dtype=bool), Path(tmp)), y)
        self._refresh_base()
        self._set_pair_weights()
        if self.beta is None:
            best = None
            for beta in BETAS:
                self.beta_ = beta
                self._set_pair_weights()
                z = self.decision_function(X)
                loss = log_loss(log_softmax(z), y, None)
                if best is None or loss < best[0]:
                    best = (loss, beta)
            self.beta_ = best[1]
            self._set_pair_weights()
        return self

    def export_arrays(self) -> dict[str, np.ndarray]:
        for name in ("_rows", "_row_pair", "_X_source", "_Z"):  # the training cache goes
            self.__dict__.pop(name, None)
        W, b = self._weights()
        return {"weights": W, "bias": b}

    def _weights(self) -> tuple[np.ndarray, np.ndarray]:
        base = self.base_model_.export_arrays()
        W = np.zeros((self.pair_columns_.shape[0], base["weights"].shape[1]), dtype=np.float32)
        W[self.base_columns_] = base["weights"]
        W[np.flatnonzero(self.pair_columns_)] = self.pair_weight_
        return W, np.asarray(base["bias"], dtype=np.float32)

    def decision_function(self, X: sp.csr_matrix) -> np.ndarray:
        W, b = self._weights()
        return decision_scores(X, W, b)

    def fit_summary(self) -> dict[str, Any]:
        return {"beta": self.beta_, "pairs": int(self.pair_count_.shape[0]),
                "base_features": int(self.base_columns_.size), "rare_examples": self.rare_examples_,
                "base": {"family": self.base, **self.base_model_.fit_summary()}}
