"""Property tests on random small alignments: the numba kernel against the set-based reference.

Several sentences go through one kernel call, so state left over from a previous
sentence (the kernel reuses its buffers) would show up as a difference.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.extract.reference import extract_reference
from training.corpus.reading import Corpus
from training.moses.extract import extract_sentences, parse_models

MODEL_SETS = [
    ["wbe-msd", "wbe-mslr", "wbe-mono", "phrase-msd", "phrase-mono", "hier-msd", "hier-mono"],
    ["phrase-mslr", "hier-mslr"],   # hier takes phrase's dleft/dright (quirk 7)
    ["hier-mslr", "wbe-mslr"],      # hier alone scans over-length blocks too
    ["phrase-mslr", "wbe-msd"],     # no hier: no over-length enumeration
]


@st.composite
def sentence(draw):
    """Random alignments, half of them near-permutations (the shapes that reorder)."""
    n_f = draw(st.integers(0, 7))
    n_e = draw(st.integers(0, 7))
    cells = [(f, e) for f in range(n_f) for e in range(n_e)]
    if not cells:
        return n_f, n_e, []
    if draw(st.booleans()):
        order = draw(st.permutations(range(n_e)))
        points = {(f, order[f % n_e]) for f in range(n_f) if draw(st.integers(0, 4))}
        points |= set(draw(st.lists(st.sampled_from(cells), max_size=2)))
        return n_f, n_e, sorted(points)
    return n_f, n_e, draw(st.lists(st.sampled_from(cells), max_size=10, unique=True))


def corpus_of(sentences) -> Corpus:
    src_len = [s[0] for s in sentences]
    tgt_len = [s[1] for s in sentences]
    offsets = lambda lengths: np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    align = np.array([p for s in sentences for p in s[2]], dtype=np.int16).reshape(-1, 2)
    return Corpus(["w"], ["v"], np.zeros(sum(src_len), np.int32), offsets(src_len),
                  np.zeros(sum(tgt_len), np.int32), offsets(tgt_len), align,
                  offsets([len(s[2]) for s in sentences]))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sentences=st.lists(sentence(), min_size=1, max_size=4), max_len=st.integers(1, 4),
       model_set=st.sampled_from(MODEL_SETS))
def test_kernel_agrees_with_reference(sentences, max_len, model_set):
    models = parse_models(model_set)
    corpus = corpus_of(sentences)
    rows, labels = extract_sentences(corpus, models, 0, len(sentences), max_len)
    keys = [(m.kind, m.orientation) for m in models]
    names = [m.classes for m in models for _ in (0, 1)]
    for s, (n_f, n_e, points) in enumerate(sentences):
        mine = rows[:, 0] == s
        ours = {tuple(r[1:]): tuple(names[j][v] for j, v in enumerate(l))
                for r, l in zip(rows[mine].tolist(), labels[mine].tolist())}
        assert len(ours) == int(mine.sum()), "a pair was extracted twice"
        assert ours == extract_reference(set(points), n_f, n_e, max_len, keys)


@settings(max_examples=200, deadline=None)
@given(sent=sentence(), max_len=st.integers(1, 7))
def test_every_pair_is_consistent_and_within_limits(sent, max_len):
    n_f, n_e, points = sent
    rows, _ = extract_sentences(corpus_of([sent]), parse_models(["hier-msd"]), 0, 1, max_len)
    for _, s_f, e_f, s_e, e_e in rows.tolist():
        assert 0 <= s_f < e_f <= n_f and 0 <= s_e < e_e <= n_e
        assert e_f - s_f <= max_len and e_e - s_e <= max_len
        inside = [(f, e) for f, e in points if s_f <= f < e_f or s_e <= e < e_e]
        assert inside, "a pair must contain an alignment point"
        assert all(s_f <= f < e_f and s_e <= e < e_e for f, e in inside), "alignment crosses the box"
