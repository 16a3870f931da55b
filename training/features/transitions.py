"""Transitions the decoder can propose and the reference never makes (issue 48's trap).

A context model is trained on gold transitions only: each example next to the neighbour
the reference gives it. The decoder shows it others: any phrase pair of the sentence whose
source span is disjoint from the scored pair's can be placed right before it (backward) or
right after it (forward), and the orientation is then whatever the two source spans make.
`wrong_neighbours` draws such transitions from an example store's sentences, so that a
model can be asked whether it tells the reference's transitions from the wrong ones: the
question the decoder asks it, which gold-event accuracy never does.

The rules (tests/features/test_transitions.py pins them):
- a candidate is another example of the same sentence whose source span does not overlap
  the scored one's;
- a candidate the reference could place there (backward: its target span ends where the
  scored pair's starts; forward: it starts where the scored pair's ends) is not wrong:
  it is another segmentation of the gold neighbour, and is left out;
- the orientation is the phrase-based one of the two source spans, in Moses's msd coding:
  monotone when they touch in the decoder's order, swap when they touch the other way,
  discontinuous otherwise. (For a hier type the decoder takes it from the whole block
  translated so far; one phrase is the part this can see.)
- up to `per_example` candidates an example, drawn uniformly without replacement with a
  fixed seed, so a run is repeatable.
Examples must be grouped by sentence (a store's order); only whole sentences are looked at.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from training.features.neighbour import BACKWARD, FORWARD

MONO, SWAP, DISC = 0, 1, 2   # Moses's msd column order (training/moses/types.py CLASSES["msd"])


@nb.njit(nogil=True, cache=True)
def _orientation(first_start, first_end, second_start, second_end):
    """Of the second span placed right after the first (source positions, ends exclusive)."""
    if first_end == second_start:
        return MONO
    if second_end == first_start:
        return SWAP
    return DISC


@nb.njit(nogil=True, cache=True)
def _draw(sentence, src_start, src_end, tgt_start, tgt_end, forward, per_example, seed):
    np.random.seed(seed)
    n = sentence.shape[0]
    # at most per_example transitions a scored example
    out_e = np.empty(n * per_example, dtype=np.int64)
    out_c = np.empty(n * per_example, dtype=np.int64)
    out_o = np.empty(n * per_example, dtype=np.int8)
    pool = np.empty(n, dtype=np.int64)
    w = 0
    a = 0
    while a < n:
        b = a
        while b < n and sentence[b] == sentence[a]:
            b += 1
        for e in range(a, b):
            m = 0
            for c in range(a, b):
                if src_end[c] <= src_start[e] or src_start[c] >= src_end[e]:      # disjoint sources
                    if (tgt_start[c] != tgt_end[e]) if forward else (tgt_end[c] != tgt_start[e]):
                        pool[m] = c
                        m += 1
            take = min(m, per_example)
            for j in range(take):                     # partial Fisher-Yates: a uniform sample
                k = j + np.random.randint(m - j)
                pool[j], pool[k] = pool[k], pool[j]
                c = pool[j]
                out_e[w] = e
                out_c[w] = c
                if forward:   # e, then c
                    out_o[w] = _orientation(src_start[e], src_end[e], src_start[c], src_end[c])
                else:         # c, then e
                    out_o[w] = _orientation(src_start[c], src_end[c], src_start[e], src_end[e])
                w += 1
        a = b
    return out_e[:w], out_c[:w], out_o[:w]


def wrong_neighbours(sentence: np.ndarray, src_start: np.ndarray, src_end: np.ndarray, tgt_start: np.ndarray,
                     tgt_end: np.ndarray, direction: int, per_example: int, seed: int = 0
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(scored example, wrong neighbour, msd orientation) of each transition drawn: indices
    into the given examples (a store chunk's, whole sentences, grouped), the neighbour
    placed before the example (BACKWARD) or after it (FORWARD)."""
    if direction not in (BACKWARD, FORWARD):
        raise ValueError(f"direction must be BACKWARD or FORWARD, got {direction!r}")
    if per_example < 1:
        raise ValueError(f"per_example must be at least 1, got {per_example}")
    arrays = [np.ascontiguousarray(x, dtype=np.int64) for x in (sentence, src_start, src_end, tgt_start, tgt_end)]
    return _draw(*arrays, direction == FORWARD, int(per_example), int(seed))
