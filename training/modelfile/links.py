"""Link functions: per-output feature sums -> orientation probabilities, registered by name.

Every family scores as keys -> rows -> per-output sums (+ bias) -> link (DESIGN.md,
Weight file). A weight file names its link in the metadata; the scorer looks it up in
LINKS. Adding a link is one function plus one `@register_link("name")` line. A link
must not look at features or strings: it gets the model (for its metadata and extra
arrays), the summed scores and how many of each pair's keys the model knew.

Signature: link(model, scores float32 [n_pairs x n_outputs], n_found int32 [n_pairs])
-> float32 [n_pairs x n_outputs], each direction's block of K classes summing to 1.
It may overwrite `scores` in place and return it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numba as nb
import numpy as np

if TYPE_CHECKING:
    from training.modelfile.model import LoadedModel

LinkFunction = Callable[["LoadedModel", np.ndarray, np.ndarray], np.ndarray]
LINKS: dict[str, LinkFunction] = {}


def register_link(name: str) -> Callable[[LinkFunction], LinkFunction]:
    def add(func: LinkFunction) -> LinkFunction:
        if name in LINKS:
            raise ValueError(f"link {name!r} registered twice")
        LINKS[name] = func
        return func
    return add


@nb.njit(nogil=True, cache=True)
def softmax_blocks(scores, n_classes):
    """In place: a softmax over each consecutive block of n_classes columns of each row."""
    n, m = scores.shape
    for p in range(n):
        for b in range(0, m, n_classes):
            top = scores[p, b]
            for j in range(b + 1, b + n_classes):
                top = max(top, scores[p, j])
            total = np.float32(0.0)
            for j in range(b, b + n_classes):
                e = np.exp(scores[p, j] - top)
                scores[p, j] = e
                total += e
            for j in range(b, b + n_classes):
                scores[p, j] /= total
    return scores


@register_link("softmax")
def softmax(model: "LoadedModel", scores: np.ndarray, n_found: np.ndarray) -> np.ndarray:
    """Multinomial logistic link (maxent, dual-mlr, svm, nb-map): softmax per direction."""
    return softmax_blocks(scores, len(model.classes))


@nb.njit(nogil=True, cache=True)
def _log_gamma_ratio(alpha_sum, n_found):
    """[pairs x outputs] ln Gamma(A_k) - ln Gamma(A_k + n_p), eq. 11's denominator. math.lgamma
    in numba rather than scipy.special.gammaln: scoring must not need scipy, which only
    training installs (pyproject.toml's `train` extra; the serving image leaves it out)."""
    n, m = n_found.shape[0], alpha_sum.shape[0]
    out = np.empty((n, m))
    for k in range(m):
        base = math.lgamma(alpha_sum[k])
        for p in range(n):
            out[p, k] = base - math.lgamma(alpha_sum[k] + n_found[p])
    return out


@register_link("dirichlet")
def dirichlet(model: "LoadedModel", scores: np.ndarray, n_found: np.ndarray) -> np.ndarray:
    """Bayesian naive Bayes (nb-bayes): the Dirichlet-multinomial predictive, eq. 11.

    Weights are ln alpha_km (posterior hyper-parameters, eq. 13) and features are binary,
    so scores = ln p(o_k) + sum_m ln alpha_km; the eq. 11 denominator adds
    ln Gamma(A_k) - ln Gamma(A_k + n) with A_k the extra `alpha_sum` and n the pair's
    known keys. An optional extra `temperature` (one per direction) divides the
    log-posterior before the softmax (calibration, argmax unchanged).
    """
    A = np.asarray(model.arrays["alpha_sum"], dtype=np.float64)
    out = scores.astype(np.float64) + _log_gamma_ratio(A, n_found)
    K = len(model.classes)
    if "temperature" in model.arrays:
        out /= np.repeat(np.asarray(model.arrays["temperature"], dtype=np.float64), K)[None, :]
    return softmax_blocks(out.astype(np.float32), K)
