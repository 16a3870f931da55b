"""The SVM paper's Table 3 example comes out exactly for S1..S6 (and the alignment sets).

Our reading of Table 3 (its text is garbled by PDF extraction). The sentence pair is
f = f1 f2 f3 f4 f5 f6 and e = e1 e2 e3 e4 e5, with three extracted phrase pairs
(`src ||| tgt ||| orientation ||| phrase-internal alignment`):

    f1 f2    ||| e1    ||| mono  ||| 0-0 1-0
    f3 f4 f5 ||| e4 e5 ||| swap  ||| 0-1 2-0
    f6       ||| e2 e3 ||| other ||| 0-0 0-1

and the table lists the features of the second pair, phi(f3 f4 f5, e4 e5):

    S1: f3, f4, f5, e4, e5                       all words
    S2: f3, f5, e4, e5                           boundaries (first/last of each side)
    S3: f3&e5, f5&e4                             alignments (0-1 -> f3&e5, 2-0 -> f5&e4)
    S4: f3, f5, e4, e5, f2-, f6+                 boundaries + one word of context each side
    S5: f3_f5, f3_e4, f3_e5, f3_f2-, f3_f6+, f5_e4, f5_e5, f5_f2-, f5_f6+,
        e4_e5, e4_f2-, e4_f6+, f2-_f6+           ANOVA d=2: the 15 pairs of S4's 6 features
    S6: S4 and S5 together                       ANOVA d<=2 (the extraction printed the
                                                 last pair as "f2-f6-"; it is f2-_f6+)

The tags the paper leaves implicit are ours: words are side-tagged, boundaries
position-tagged (f3 as first source word, f5 as last), context words carry their
offset. Keys are computed here by an independent pure-Python implementation of the
hash scheme, so this test pins the scheme as well as the templates.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from training.features.templates import extract_keys
from training.features.spec import NAMED_SPECS, FeatureSpec
from training.modelfile.request import batch_from_strings

from feature_key_reference import anova2, combine, finalize, fnv, key, tag

F = "f1 f2 f3 f4 f5 f6".split()
PAIRS = [
    (0, 2, ["e1"], [(0, 0), (1, 0)]),
    (2, 5, ["e4", "e5"], [(0, 1), (2, 0)]),
    (5, 6, ["e2", "e3"], [(0, 0), (0, 1)]),
]

S1 = [key("src", "f3"), key("src", "f4"), key("src", "f5"), key("tgt", "e4"), key("tgt", "e5")]
S2 = [key("src.first", "f3"), key("src.last", "f5"), key("tgt.first", "e4"), key("tgt.last", "e5")]
S3 = [key("align", "f3", "e5"), key("align", "f5", "e4")]
CONTEXT1 = [key("ctx-1", "f2"), key("ctx+1", "f6")]
S4 = S2 + CONTEXT1
S5 = [anova2(a, b) for a, b in itertools.combinations(S4, 2)]
S6 = S4 + S5
S7 = S3 + CONTEXT1
EXPECTED = {"S1": S1, "S2": S2, "S3": S3, "S4": S4, "S5": S5, "S6": S6, "S7": S7,
            "S8": [anova2(a, b) for a, b in itertools.combinations(S7, 2)]}


def row(spec: str, pair: int) -> list[int]:
    indptr, keys = extract_keys(batch_from_strings(F, PAIRS), FeatureSpec.parse(spec))
    return keys[indptr[pair]:indptr[pair + 1]].tolist()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_table3_second_pair(name):
    expected = EXPECTED[name]
    assert len(set(expected)) == len(expected)
    assert row(name, 1) == sorted(expected)


def test_table3_counts():
    # S5 is every unordered pair of S4's six base features: C(6, 2) = 15.
    assert len(S5) == 15 and len(S6) == 21


def test_context_at_sentence_edges_uses_sentence_markers():
    # First pair f1 f2: nothing before it -> <s>; last pair f6: nothing after it -> </s>.
    assert set(row("S4", 0)) >= {key("ctx-1", "<s>"), key("ctx+1", "f3")}
    assert set(row("S4", 2)) >= {key("ctx-1", "f5"), key("ctx+1", "</s>")}


def test_context_size3_is_position_tagged():
    expected = [key("ctx-1", "f2"), key("ctx-2", "f1"), key("ctx-3", "<s>"),
                key("ctx+1", "f6"), key("ctx+2", "</s>"), key("ctx+3", "</s>")]
    assert row("S13", 1) == sorted(S3 + expected)


def test_single_word_phrase_has_both_boundary_positions():
    # f6 ||| e2 e3: f6 is both the first and the last source word.
    assert row("S2", 2) == sorted([key("src.first", "f6"), key("src.last", "f6"),
                                   key("tgt.first", "e2"), key("tgt.last", "e3")])


def test_repeated_features_count_once():
    # Both words of the phrase are "a": binary features, one key.
    keys = extract_keys(batch_from_strings(["a", "a"], [(0, 2, ["x"], [(0, 0), (1, 0)])]),
                        FeatureSpec.parse("words"))[1]
    assert keys.tolist() == sorted([key("src", "a"), key("tgt", "x")])


def test_pair_identity_key():
    h = combine(tag("pair"), 3)
    for t in ["f3", "f4", "f5"]:
        h = combine(h, fnv(t))
    h = combine(h, 2)
    for t in ["e4", "e5"]:
        h = combine(h, fnv(t))
    assert row("pair", 1) == [finalize(h)]
    # The phrase boundary is part of the key: "f3 f4 | f5" differs from "f3 | f4 f5".
    a = batch_from_strings(["x", "y"], [(0, 2, ["z"], [])])
    b = batch_from_strings(["x"], [(0, 1, ["y", "z"], [])])
    spec = FeatureSpec.parse("pair")
    assert extract_keys(a, spec)[1][0] != extract_keys(b, spec)[1][0]


def test_named_sets_match_table2():
    table2 = {
        "S1": ("words", 0, "1"), "S2": ("boundaries", 0, "1"), "S3": ("alignments", 0, "1"),
        "S4": ("boundaries", 1, "1"), "S5": ("boundaries", 1, "2"), "S6": ("boundaries", 1, "le2"),
        "S7": ("alignments", 1, "1"), "S8": ("alignments", 1, "2"), "S9": ("alignments", 1, "le2"),
        "S10": ("boundaries", 3, "1"), "S11": ("boundaries", 3, "2"), "S12": ("boundaries", 3, "le2"),
        "S13": ("alignments", 3, "1"), "S14": ("alignments", 3, "2"), "S15": ("alignments", 3, "le2"),
    }
    for name, (template, context, anova) in table2.items():
        spec = NAMED_SPECS[name]
        assert (spec.templates, spec.context, spec.anova) == ((template,), context, anova)
        assert FeatureSpec.parse(f"{template},context={context},anova={anova}").name == name


def test_empty_and_ragged_batches():
    empty = batch_from_strings(["a"], [])
    indptr, keys = extract_keys(empty, FeatureSpec.parse("S15"))
    assert indptr.tolist() == [0] and keys.shape == (0,)
    # A pair without alignment points still gets its context features under S7.
    indptr, keys = extract_keys(batch_from_strings(["a", "b"], [(1, 2, ["x"], [])]), FeatureSpec.parse("S7"))
    assert keys.tolist() == sorted([key("ctx-1", "a"), key("ctx+1", "</s>")])
    assert np.all(np.diff(indptr) >= 0)
