"""The shared held-out split: the last 10% of sentences, the same every time."""

from __future__ import annotations

import numpy as np
import pytest

from training.errors import InputError
from training.eval.split import heldout_sentences


def test_last_tenth_of_the_ja_en_corpus():
    mask = heldout_sentences(50_000)
    assert mask.dtype == bool and mask.shape == (50_000,)
    assert mask.sum() == 5_000
    assert not mask[:45_000].any() and mask[45_000:].all()


@pytest.mark.parametrize("n, fraction, held", [
    (0, 0.1, 0), (1, 0.1, 0), (4, 0.1, 0), (5, 0.1, 1), (14, 0.1, 1), (15, 0.1, 2),
    (30, 0.1, 3), (5, 0.7, 4), (10, 0.0, 0), (10, 1.0, 10), (7, 0.5, 4),
])
def test_count_is_rounded_half_up_and_taken_from_the_end(n, fraction, held):
    mask = heldout_sentences(n, fraction)
    assert mask.sum() == held
    assert np.array_equal(mask, np.arange(n) >= n - held)


def test_deterministic():
    assert np.array_equal(heldout_sentences(12_345, 0.2), heldout_sentences(12_345, 0.2))


@pytest.mark.parametrize("n, fraction", [(-1, 0.1), (2.5, 0.1), (True, 0.1), (10, -0.1), (10, 1.5)])
def test_rejects_nonsense(n, fraction):
    with pytest.raises(InputError):
        heldout_sentences(n, fraction)
