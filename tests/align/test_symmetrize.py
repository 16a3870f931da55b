"""Symmetrization is Moses's symal: hand-worked cases, a slow reference, invariants.

The reference below is written from symal's description, not from our kernel: it keeps
the alignment as a Python set of (target, source) keys and walks it the way symal walks
its std::set (always to the next larger key present *now*), where the kernel scans a
matrix. Agreement on random alignments is the evidence that the two readings coincide.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from training.errors import InputError
from training.corpus.symmetrize import METHODS, symmetrize

SIDES = [(-1, 0), (0, -1), (1, 0), (0, 1)]
DIAGONALS = [(-1, -1), (-1, 1), (1, -1), (1, 1)]


def reference(n_src, n_tgt, direct, inverse, method):
    """Slow symal: sets of (tgt, src) keys, visited in increasing key order."""
    a = {(t, s) for s, t in direct}
    b = {(t, s) for s, t in inverse}
    union = a | b
    if method == "union":
        current = set(union)
    else:
        current = a & b
    tgt_cov = {t for t, _ in current}
    src_cov = {s for _, s in current}

    def add(point):
        current.add(point)
        tgt_cov.add(point[0])
        src_cov.add(point[1])

    if method.startswith("grow"):
        neighbours = SIDES + (DIAGONALS if "diag" in method else [])
        changed = True
        while changed:
            changed = False
            key = min(current, default=None)
            while key is not None:
                for dt, ds in neighbours:
                    p = (key[0] + dt, key[1] + ds)
                    if not (0 <= p[0] < n_tgt and 0 <= p[1] < n_src) or p not in union:
                        continue
                    if p[0] not in tgt_cov or p[1] not in src_cov:
                        add(p)
                        changed = True
                key = min((q for q in current if q > key), default=None)
    if "final" in method:
        both = method.endswith("-and")
        for pool in (sorted(b - a), sorted(a - b)):
            for p in pool:
                if p in current:
                    continue
                free_t, free_s = p[0] not in tgt_cov, p[1] not in src_cov
                if (free_t and free_s) if both else (free_t or free_s):
                    add(p)
    return sorted((s, t) for t, s in current)


def run(n_src, n_tgt, direct, inverse, method="grow-diag-final-and"):
    links, offsets = symmetrize(
        np.array([n_src]), np.array([n_tgt]),
        np.array(direct, dtype=np.int32).reshape(-1, 2), np.array([0, len(direct)]),
        np.array(inverse, dtype=np.int32).reshape(-1, 2), np.array([0, len(inverse)]),
        method,
    )
    assert offsets.tolist() == [0, len(links)]
    return [tuple(x) for x in links.tolist()]


# --- hand-worked examples (each computed on paper from symal.cpp's rules) -------------

def test_final_and_prefers_the_inverse_direction():
    # intersection {0-0}; union adds 1-2 (inverse only) and 2-2 (direct only). Neither is
    # next to 0-0, so grow adds nothing. final-and tries inverse-only points first: 1-2
    # has both words free and goes in; then 2-2's target word 2 is taken, so "and"
    # refuses it while plain "final" (one free word is enough) takes it.
    direct, inverse = [(0, 0), (2, 2)], [(0, 0), (1, 2)]
    assert run(3, 3, direct, inverse, "intersection") == [(0, 0)]
    assert run(3, 3, direct, inverse, "grow-diag") == [(0, 0)]
    assert run(3, 3, direct, inverse, "grow-diag-final-and") == [(0, 0), (1, 2)]
    assert run(3, 3, direct, inverse, "grow-diag-final") == [(0, 0), (1, 2), (2, 2)]
    assert run(3, 3, direct, inverse, "union") == [(0, 0), (1, 2), (2, 2)]
    # swapping the directions swaps the winner
    assert run(3, 3, inverse, direct, "grow-diag-final-and") == [(0, 0), (2, 2)]


def test_grow_scans_target_major_and_coverage_updates_at_once():
    # intersection {0-0, 1-2}; union adds 0-1 and 1-1, both wanting target word 1.
    # The scan starts at key (t0, s0): its neighbour (dt, ds) = (1, 0) is 0-1, target 1
    # free -> added. Its diagonal (1, 1) is 1-1, but target 1 and source 1 are now both
    # covered -> refused, and stays refused from every later point.
    direct = [(0, 0), (1, 2), (1, 1)]
    inverse = [(0, 0), (1, 2), (0, 1)]
    assert run(2, 3, direct, inverse, "grow-diag") == [(0, 0), (0, 1), (1, 2)]
    assert run(2, 3, direct, inverse, "grow-diag-final-and") == [(0, 0), (0, 1), (1, 2)]
    # without diagonals the side neighbour (1, 0) still wins target word 1
    assert run(2, 3, direct, inverse, "grow") == [(0, 0), (0, 1), (1, 2)]


def test_diagonal_growth_needs_the_diag_variant():
    # intersection {0-0}; the only other union point 1-1 touches it diagonally.
    direct, inverse = [(0, 0), (1, 1)], [(0, 0)]
    assert run(2, 2, direct, inverse, "grow") == [(0, 0)]
    assert run(2, 2, direct, inverse, "grow-diag") == [(0, 0), (1, 1)]


def test_grow_reaches_a_chain_of_union_points_in_one_call():
    # a diagonal chain hanging off one intersection point: each added point enables the
    # next, found in the same pass because each lies ahead of the scan.
    direct = [(0, 0), (1, 1), (2, 2), (3, 3)]
    inverse = [(0, 0)]
    assert run(4, 4, direct, inverse, "grow-diag") == direct


def test_chain_growing_backwards_needs_more_passes():
    # the intersection point is last in scan order; the chain grows towards smaller keys,
    # which symal only visits on its next pass: the result is still the whole chain.
    direct = [(0, 0), (1, 1), (2, 2), (3, 3)]
    inverse = [(3, 3)]
    assert run(4, 4, direct, inverse, "grow-diag") == direct


def test_empty_and_unaligned_sentences():
    assert run(0, 0, [], [], "grow-diag-final-and") == []
    assert run(3, 2, [], [], "grow-diag-final-and") == []
    # nothing in the intersection: grow has no seed, final-and adds inverse first
    assert run(2, 2, [(0, 0)], [(0, 1)], "grow-diag-final-and") == [(0, 1)]


# --- random alignments against the reference ----------------------------------------

@st.composite
def sentence(draw):
    n_src = draw(st.integers(0, 7))
    n_tgt = draw(st.integers(0, 7))
    if n_src == 0 or n_tgt == 0:
        return n_src, n_tgt, [], []
    cells = st.tuples(st.integers(0, n_src - 1), st.integers(0, n_tgt - 1))
    if draw(st.booleans()):  # shaped like an aligner's output: one link per word per direction
        direct = sorted({(s, draw(st.integers(0, n_tgt - 1))) for s in range(n_src) if draw(st.booleans())})
        inverse = sorted({(draw(st.integers(0, n_src - 1)), t) for t in range(n_tgt) if draw(st.booleans())})
    else:  # arbitrary link sets
        direct = sorted(draw(st.sets(cells, max_size=n_src * n_tgt)))
        inverse = sorted(draw(st.sets(cells, max_size=n_src * n_tgt)))
    return n_src, n_tgt, direct, inverse


def corpus_arrays(sentences, which):
    links = [link for s in sentences for link in s[which]]
    offsets = np.cumsum([0] + [len(s[which]) for s in sentences])
    return np.array(links, dtype=np.int32).reshape(-1, 2), offsets


@settings(max_examples=300, deadline=None)
@given(st.lists(sentence(), min_size=1, max_size=6), st.sampled_from(sorted(METHODS)))
def test_matches_reference_on_random_corpora(sentences, method):
    direct, direct_off = corpus_arrays(sentences, 2)
    inverse, inverse_off = corpus_arrays(sentences, 3)
    links, offsets = symmetrize(
        np.array([s[0] for s in sentences]), np.array([s[1] for s in sentences]),
        direct, direct_off, inverse, inverse_off, method,
    )
    assert offsets.shape == (len(sentences) + 1,)
    for k, (n_src, n_tgt, d, i) in enumerate(sentences):
        got = [tuple(x) for x in links[offsets[k]:offsets[k + 1]].tolist()]
        assert got == reference(n_src, n_tgt, d, i, method)


@settings(max_examples=200, deadline=None)
@given(sentence())
def test_every_method_lies_between_intersection_and_union(case):
    n_src, n_tgt, direct, inverse = case
    results = {m: set(run(n_src, n_tgt, direct, inverse, m)) for m in METHODS}
    inter, union = set(direct) & set(inverse), set(direct) | set(inverse)
    assert results["intersection"] == inter
    assert results["union"] == union
    for m, r in results.items():
        assert inter <= r <= union, m
    # the final steps only add to what growing produced (but "final" and "final-and" are
    # both greedy, so neither contains the other in general)
    for grown in ("grow", "grow-diag"):
        assert results[grown] <= results[grown + "-final"]
        assert results[grown] <= results[grown + "-final-and"]
    # final-and only ever links words that were unlinked: no word gains a second link from it
    grown = results["grow-diag"]
    for s, t in results["grow-diag-final-and"] - grown:
        assert all(s != s2 and t != t2 for s2, t2 in grown)


# --- checks at the public entry -------------------------------------------------------

def test_rejects_links_outside_the_sentence():
    with pytest.raises(InputError, match=r"direct: link 2-0 is outside sentence 0 \(2 source, 1 target"):
        run(2, 1, [(2, 0)], [])
    with pytest.raises(InputError, match="inverse: link 0-5"):
        run(2, 1, [], [(0, 5)])


def test_rejects_bad_offsets_and_methods():
    one = np.array([2])
    with pytest.raises(InputError, match="offsets"):
        symmetrize(one, one, np.zeros((1, 2)), np.array([0, 2]), np.zeros((0, 2)), np.array([0, 0]))
    with pytest.raises(InputError, match="unknown symmetrization 'grow-diag-final-or'"):
        symmetrize(one, one, np.zeros((0, 2)), np.array([0, 0]), np.zeros((0, 2)), np.array([0, 0]),
                   "grow-diag-final-or")
