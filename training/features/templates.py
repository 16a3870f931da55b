"""Feature extraction: PairBatch -> sorted, de-duplicated 64-bit feature keys per pair.

This is the one implementation of the SVM paper's feature templates (Tables 2 and 3);
trainers (through training/features/matrix.py) and the server (through
training/modelfile/model.py) both
call `extract_keys`, which is what keeps training and serving from drifting apart.
It must not look at anything outside the PairBatch (no target context, no corpus ids).

Key scheme (pinned in tests/features/test_keys_pinned.py):
- a base feature is `finalize(combine(tag, token))`, or for an alignment
  `finalize(combine(combine(tag_align, f), e))`; context words use a position tag
  (`ctx-2`, `ctx+1`, ...) and the tokens `<s>`/`</s>` past the sentence edges;
- the phrase-pair identity (`pair`) folds the source length, the source tokens, the
  target length and the target tokens into one key; the source-phrase identity
  (`source`, what Moses's `-f` tables condition on) folds the source length and tokens;
- an ANOVA d=2 feature is `finalize(combine(combine(tag_anova2, a), b))` for base
  keys a < b.
Features are binary: each pair's keys are sorted and unique.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from training.features.batch import PairBatch
from training.features.spec import (
    TAG_ALIGN,
    TAG_ANOVA2,
    TAG_BOS,
    TAG_CONTEXT_LEFT,
    TAG_CONTEXT_RIGHT,
    TAG_EOS,
    TAG_PAIR,
    TAG_SOURCE,
    TAG_SRC_FIRST,
    TAG_SRC_LAST,
    TAG_SRC_WORD,
    TAG_TGT_FIRST,
    TAG_TGT_LAST,
    TAG_TGT_WORD,
    FeatureSpec,
    template_tags,
)
from training.features.hashing import combine, finalize

__all__ = ["extract_keys", "key_bounds", "pair_keys", "FeatureSpec"]


# _key1 and _key2 are plain calls, not inline="always": numba would type them again at each
# of their dozen call sites (about 1 CPU s of a cold compile); LLVM inlines them all the same.
@nb.njit(nogil=True, cache=True)
def _key1(tag: np.uint64, token: np.uint64) -> np.uint64:
    return finalize(combine(tag, token))


@nb.njit(nogil=True, cache=True)
def _key2(tag: np.uint64, a: np.uint64, b: np.uint64) -> np.uint64:
    return finalize(combine(combine(tag, a), b))


@nb.njit(nogil=True, cache=True)
def _base_keys(p, src_tokens, src_offsets, pair_sentence, src_start, src_end, tgt_tokens, tgt_offsets,
               align_src, align_tgt, align_offsets, words, boundaries, alignments, pair, source, context,
               tags, out):
    """Write pair p's base features into out; return how many."""
    s = pair_sentence[p]
    sent0 = src_offsets[s]
    sent_len = src_offsets[s + 1] - sent0
    i0 = sent0 + src_start[p]
    i1 = sent0 + src_end[p]
    t0 = tgt_offsets[p]
    t1 = tgt_offsets[p + 1]
    m = 0
    if words:
        for i in range(i0, i1):
            out[m] = _key1(tags[TAG_SRC_WORD], src_tokens[i])
            m += 1
        for t in range(t0, t1):
            out[m] = _key1(tags[TAG_TGT_WORD], tgt_tokens[t])
            m += 1
    if boundaries:
        if i1 > i0:
            out[m] = _key1(tags[TAG_SRC_FIRST], src_tokens[i0])
            out[m + 1] = _key1(tags[TAG_SRC_LAST], src_tokens[i1 - 1])
            m += 2
        if t1 > t0:
            out[m] = _key1(tags[TAG_TGT_FIRST], tgt_tokens[t0])
            out[m + 1] = _key1(tags[TAG_TGT_LAST], tgt_tokens[t1 - 1])
            m += 2
    if alignments:
        for a in range(align_offsets[p], align_offsets[p + 1]):
            out[m] = _key2(tags[TAG_ALIGN], src_tokens[i0 + align_src[a]], tgt_tokens[t0 + align_tgt[a]])
            m += 1
    for k in range(1, context + 1):
        left = src_start[p] - k
        token = src_tokens[sent0 + left] if left >= 0 else tags[TAG_BOS]
        out[m] = _key1(tags[TAG_CONTEXT_LEFT + k - 1], token)
        right = src_end[p] - 1 + k
        token = src_tokens[sent0 + right] if right < sent_len else tags[TAG_EOS]
        out[m + 1] = _key1(tags[TAG_CONTEXT_RIGHT + k - 1], token)
        m += 2
    if pair:
        h = combine(tags[TAG_PAIR], np.uint64(i1 - i0))
        for i in range(i0, i1):
            h = combine(h, src_tokens[i])
        h = combine(h, np.uint64(t1 - t0))
        for t in range(t0, t1):
            h = combine(h, tgt_tokens[t])
        out[m] = finalize(h)
        m += 1
    if source:
        h = combine(tags[TAG_SOURCE], np.uint64(i1 - i0))
        for i in range(i0, i1):
            h = combine(h, src_tokens[i])
        out[m] = finalize(h)
        m += 1
    return m


@nb.njit(nogil=True, cache=True)
def _sift_down(a, lo, root, end):
    """Heapsort's step: move a[lo + root] down the max-heap held in a[lo:lo + end]."""
    x = a[lo + root]
    child = 2 * root + 1
    while child < end:
        if child + 1 < end and a[lo + child + 1] > a[lo + child]:
            child += 1
        if a[lo + child] <= x:
            break
        a[lo + root] = a[lo + child]
        root = child
        child = 2 * root + 1
    a[lo + root] = x


@nb.njit(nogil=True, cache=True)
def _heapsort(a, lo, hi):
    """Sort a[lo:hi] in place. Our own, not `a[lo:hi].sort()`: that compiles numba's
    quicksort, about 3 CPU s of a cold pipeline's compiling, for rows the default
    feature set never has (S6 rows are short: insertion sort)."""
    n = hi - lo
    for root in range(n // 2 - 1, -1, -1):
        _sift_down(a, lo, root, n)
    for end in range(n - 1, 0, -1):
        x = a[lo]
        a[lo] = a[lo + end]
        a[lo + end] = x
        _sift_down(a, lo, 0, end)


@nb.njit(nogil=True, cache=True)
def _sort_unique(a, lo, hi):
    """Sort a[lo:hi] in place and drop repeats; return the new end."""
    if hi - lo < 2:
        return hi
    if hi - lo <= 24:  # insertion sort: most rows are this short, and it needs no view object
        for i in range(lo + 1, hi):
            x = a[i]
            j = i
            while j > lo and a[j - 1] > x:
                a[j] = a[j - 1]
                j -= 1
            a[j] = x
    else:
        _heapsort(a, lo, hi)
    w = lo + 1
    for r in range(lo + 1, hi):
        if a[r] != a[w - 1]:
            a[w] = a[r]
            w += 1
    return w


@nb.njit(nogil=True, cache=True)
def _bounds(src_start, src_end, tgt_offsets, align_offsets, words, boundaries, alignments, pair, source,
            context, anova_low, anova_high):
    """Per pair, an upper bound of its keys (before de-duplication) as cumulative offsets
    bound[n_pairs + 1], and the largest number of base features of one pair."""
    n = src_start.shape[0]
    bound = np.empty(n + 1, dtype=np.int64)
    bound[0] = 0
    max_base = 0
    for p in range(n):
        nb_ = 2 * context + (1 if pair else 0) + (1 if source else 0)
        if words:
            nb_ += (src_end[p] - src_start[p]) + (tgt_offsets[p + 1] - tgt_offsets[p])
        if boundaries:
            nb_ += 4
        if alignments:
            nb_ += align_offsets[p + 1] - align_offsets[p]
        size = 0
        if anova_low <= 1:
            size += nb_
        if anova_high >= 2:
            size += nb_ * (nb_ - 1) // 2
        bound[p + 1] = bound[p] + size
        max_base = max(max_base, nb_)
    return bound, max_base


@nb.njit(nogil=True, cache=True)
def _extract(src_tokens, src_offsets, pair_sentence, src_start, src_end, tgt_tokens, tgt_offsets,
             align_src, align_tgt, align_offsets, words, boundaries, alignments, pair, source, context,
             anova_low, anova_high, tags):
    n = pair_sentence.shape[0]
    bound, max_base = _bounds(src_start, src_end, tgt_offsets, align_offsets, words, boundaries, alignments,
                              pair, source, context, anova_low, anova_high)
    keys = np.empty(bound[n], dtype=np.uint64)
    base = np.empty(max_base, dtype=np.uint64)
    indptr = np.empty(n + 1, dtype=np.int64)
    indptr[0] = 0
    w = 0  # rows are compacted in place: w never passes the row's own start
    for p in range(n):
        m = _base_keys(p, src_tokens, src_offsets, pair_sentence, src_start, src_end, tgt_tokens,
                       tgt_offsets, align_src, align_tgt, align_offsets, words, boundaries, alignments,
                       pair, source, context, tags, base)
        m = _sort_unique(base, np.int64(0), m)  # not the literal 0: one signature, compiled once
        start = bound[p]
        e = start
        if anova_low <= 1:
            for i in range(m):
                keys[e] = base[i]
                e += 1
        if anova_high >= 2:
            tag = tags[TAG_ANOVA2]
            for i in range(m):
                for j in range(i + 1, m):
                    keys[e] = _key2(tag, base[i], base[j])
                    e += 1
        e = _sort_unique(keys, start, e)
        for r in range(start, e):
            keys[w] = keys[r]
            w += 1
        indptr[p + 1] = w
    return indptr, keys, w


def extract_keys(batch: PairBatch, spec: FeatureSpec) -> tuple[np.ndarray, np.ndarray]:
    """CSR of feature keys: pair p has keys[indptr[p]:indptr[p+1]], sorted and unique.

    These are the pair's own features. A spec with neighbour features is refused: their keys
    depend on the phrase next to the pair (training/features/neighbour.py), so a caller must
    say which it means (spec.pair_spec for the own block)."""
    if spec.neighbour:
        raise ValueError(f"extract_keys: {spec.name} has neighbour features; pass spec.pair_spec "
                         "and add the neighbour's keys (training.features.neighbour)")
    indptr, full, used = _extract(
        batch.src_tokens, batch.src_offsets, batch.pair_sentence, batch.src_start, batch.src_end,
        batch.tgt_tokens, batch.tgt_offsets, batch.align_src, batch.align_tgt, batch.align_offsets,
        "words" in spec.templates, "boundaries" in spec.templates, "alignments" in spec.templates,
        "pair" in spec.templates, "source" in spec.templates, spec.context, spec.anova_low,
        spec.anova_high, template_tags())
    keys = full[:used]
    if used * 4 < full.shape[0] * 3:
        keys = keys.copy()  # give back the over-allocation when duplicates were many
    return indptr, keys


def kernel_cached() -> bool:
    """Whether numba's cache already holds the extraction kernel (a first run must compile it)."""
    from training.jitcache import is_cold

    return not is_cold(_extract)


def warm_up(_: object = None) -> None:
    """Compile the extraction kernel (or load it from numba's cache) for the argument types of a
    batch read from the store, on a two-pair batch made here. A task: `pipeline` runs it on a
    second core while the first one compiles extraction. Any feature set does: its settings
    are values, not argument types."""
    ids = np.arange(3, dtype=np.uint64)
    offsets = np.array([0, 1, 3], dtype=np.int64)
    batch = PairBatch(src_tokens=ids, src_offsets=np.array([0, 3], dtype=np.int64),
                      pair_sentence=np.zeros(2, dtype=np.int32), src_start=np.array([0, 1], dtype=np.int32),
                      src_end=np.array([1, 3], dtype=np.int32), tgt_tokens=ids.copy(), tgt_offsets=offsets,
                      align_src=np.array([0, 0, 1], dtype=np.int16), align_tgt=np.array([0, 1, 0], dtype=np.int16),
                      align_offsets=offsets.copy())
    extract_keys(batch, FeatureSpec.parse("S15"))


def key_bounds(batch: PairBatch, spec: FeatureSpec) -> np.ndarray:
    """int64 [n_pairs + 1] cumulative upper bounds of each pair's keys under `spec`, without
    extracting: pair p has at most bounds[p+1] - bounds[p] keys, and `extract_keys` allocates
    bounds[-1] of them. With ANOVA d=2 that is quadratic in a pair's base features, so a
    server checks this before it extracts (and cuts a large request into slices by it)."""
    bound, _ = _bounds(batch.src_start, batch.src_end, batch.tgt_offsets, batch.align_offsets,
                       "words" in spec.templates, "boundaries" in spec.templates, "alignments" in spec.templates,
                       "pair" in spec.templates, "source" in spec.templates, spec.context, spec.anova_low,
                       spec.anova_high)
    return bound


_PAIR_SPEC = FeatureSpec(("pair",))


def pair_keys(batch: PairBatch) -> np.ndarray:
    """One key per phrase pair: the identity of (source phrase, target phrase)."""
    indptr, keys = extract_keys(batch, _PAIR_SPEC)
    assert keys.shape[0] == batch.n_pairs
    return keys
