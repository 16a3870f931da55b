"""The one train/held-out split of a corpus, by sentence, shared by eval, experiment and benchmarks.

It must stay a pure function of the sentence count: nothing is stored, so every command
that needs the split recomputes the same one.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from training.errors import InputError


def heldout_sentences(n_sentences: int, fraction: float = 0.1) -> np.ndarray:
    """Boolean mask over sentences, True for held-out: the last `fraction` of them.

    Deterministic, so eval, experiment and benchmark figures computed at different times
    by different commands refer to the same test sentences without a split file to keep
    in sync, and a rerun reproduces a number. Contiguous (a tail, not a random sample),
    because the example store keeps sentences in corpus order in whole-sentence chunks:
    the held-out part is a run of trailing sentences, training streams everything before
    it, and no sentence's phrase pairs fall on both sides. A tail is a fair sample only
    if the corpus is in arbitrary order; shuffle a corpus sorted by length, source or date
    once before extraction. The count is n_sentences * fraction rounded half up.
    """
    if isinstance(n_sentences, bool) or int(n_sentences) != n_sentences or n_sentences < 0:
        raise InputError(f"n_sentences must be a non-negative integer, not {n_sentences!r}")
    if not 0.0 <= fraction <= 1.0:
        raise InputError(f"fraction must be between 0 and 1, not {fraction!r}")
    n_sentences = int(n_sentences)
    # exact decimal arithmetic: 5 * 0.7 is 3.4999999999999996 in floats, and should round to 4
    n_held = min(n_sentences, int(n_sentences * Fraction(repr(float(fraction))) + Fraction(1, 2)))
    mask = np.zeros(n_sentences, dtype=bool)
    mask[n_sentences - n_held:] = True
    return mask
