"""Every template combination equals a plain-Python reading of the templates, on random pairs.

The reference below is written from DESIGN.md "Features" (and the key scheme in the
docstring of training/features/templates.py) without looking at the numba kernels: words
side-tagged, boundaries position-tagged, alignments `f&e`, context words position-tagged
with <s>/</s> past the edges, the phrase-pair identity, ANOVA pairs of distinct base
features; binary features (each key once per pair).
"""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from training.features.templates import extract_keys, pair_keys
from training.features.spec import FeatureSpec
from training.modelfile.request import batch_from_strings

from feature_key_reference import anova2, combine, finalize, fnv, key, tag

WORDS = ["a", "b", "c", "犬", "が", "</s>"]


def reference(source, pairs, spec):
    rows = []
    for f0, f1, target, alignment in pairs:
        src = source[f0:f1]
        base = []
        if "words" in spec.templates:
            base += [key("src", w) for w in src] + [key("tgt", w) for w in target]
        if "boundaries" in spec.templates:
            base += [key("src.first", src[0]), key("src.last", src[-1])]
            if target:
                base += [key("tgt.first", target[0]), key("tgt.last", target[-1])]
        if "alignments" in spec.templates:
            base += [key("align", src[i], target[j]) for i, j in alignment]
        for k in range(1, spec.context + 1):
            left = source[f0 - k] if f0 - k >= 0 else "<s>"
            right = source[f1 - 1 + k] if f1 - 1 + k < len(source) else "</s>"
            base += [key(f"ctx-{k}", left), key(f"ctx+{k}", right)]
        if "pair" in spec.templates:
            h = combine(tag("pair"), len(src))
            for w in src:
                h = combine(h, fnv(w))
            h = combine(h, len(target))
            for w in target:
                h = combine(h, fnv(w))
            base.append(finalize(h))
        if "source" in spec.templates:
            h = combine(tag("source"), len(src))
            for w in src:
                h = combine(h, fnv(w))
            base.append(finalize(h))
        base = set(base)
        out = set()
        if spec.anova in ("1", "le2"):
            out |= base
        if spec.anova in ("2", "le2"):
            out |= {anova2(a, b) for a, b in itertools.combinations(sorted(base), 2)}
        rows.append(sorted(out))
    return rows


@st.composite
def sentence_with_pairs(draw):
    source = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=8))
    pairs = []
    for _ in range(draw(st.integers(0, 5))):
        f0 = draw(st.integers(0, len(source) - 1))
        f1 = draw(st.integers(f0 + 1, len(source)))
        target = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=4))
        points = draw(st.sets(st.tuples(st.integers(0, f1 - f0 - 1), st.integers(0, len(target) - 1)),
                              max_size=4))
        pairs.append((f0, f1, target, sorted(points)))
    return source, pairs


SPECS = st.builds(
    FeatureSpec,
    templates=st.sets(st.sampled_from(["words", "boundaries", "alignments", "pair", "source"]), min_size=1).map(tuple),
    context=st.sampled_from([0, 1, 2, 3]),
    anova=st.sampled_from(["1", "2", "le2"]),
)


@settings(max_examples=150, deadline=None)
@given(sentence_with_pairs(), SPECS)
def test_extract_keys_matches_reference(sp, spec):
    source, pairs = sp
    indptr, keys = extract_keys(batch_from_strings(source, pairs), spec)
    got = [keys[indptr[p]:indptr[p + 1]].tolist() for p in range(len(pairs))]
    assert got == reference(source, pairs, spec)


@settings(max_examples=50, deadline=None)
@given(sentence_with_pairs())
def test_pair_keys_one_per_pair(sp):
    source, pairs = sp
    got = pair_keys(batch_from_strings(source, pairs))
    assert got.dtype == np.uint64
    assert got.tolist() == [r[0] for r in reference(source, pairs, FeatureSpec(("pair",)))]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 2**64 - 1) | st.integers(0, 40), max_size=300), st.integers(0, 5))
def test_a_row_is_sorted_and_unique_however_long(values, lo):
    """Rows past 24 keys take the kernel's own heapsort (not numba's quicksort, to compile less)."""
    from training.features.templates import _sort_unique

    row = np.array([7] * lo + values, dtype=np.uint64)
    end = _sort_unique(row, np.int64(lo), np.int64(row.shape[0]))
    assert row[lo:end].tolist() == sorted(set(values))
    assert row[:lo].tolist() == [7] * lo  # what lies before the row is left alone


def test_spec_parsing_forms():
    assert FeatureSpec.parse("anova=le2,alignments,context=1").name == "S9"
    assert FeatureSpec.parse("s7").name == "S7"
    assert FeatureSpec.parse("alignments, context=1, anova=<=2").name == "S9"
    combo = FeatureSpec.parse("S7,pair")
    assert combo.templates == ("alignments", "pair") and combo.context == 1
    assert combo.name == "alignments,pair,context=1,anova=1"
    assert FeatureSpec.parse(combo.name) == combo
