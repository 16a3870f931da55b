"""The decoder's context of a phrase pair: the boundary words of the phrase placed next to it.

When Moses places option c right after option p, it knows p: p's last target word (the
target word just before c) and the source word aligned to it. Moses's table cannot use
them; a model with `neighbour` features (psi, issue 48) scores class k of c backward as

    own_k(c) + ctx_k(p)         own from c's features (phi), ctx from p's two words only

and forward, for p followed by c, as own_k(p) + ctx_k(c) from c's first target word. The
score splits because no feature conjoins a context word with a pair feature (that is also
what keeps the model from reading the orientation off a conjunction of the two), so a
server answers once per sentence with each pair's own block and the block it contributes
as a neighbour, and the decoder adds the two at each expansion.

This module is the one implementation of those features, for training (the gold neighbour
of every extracted example, from its sentence: `gold_neighbour_words`) and for serving
(each pair's own boundary words, as the neighbour it will be: `pair_boundary_words`);
`neighbour_keys` turns either into keys. It must not look at anything else. The rules,
the same on both sides (tests/features/test_neighbour.py pins them):
- backward: the target word just before the phrase and the source word aligned to it;
  the sentence start gives `<s>` for both (the decoder's first phrase);
- forward: the target word just after the phrase and its source word; `</s>` at the end;
- a target word aligned to several source words takes the last (rightmost) of them;
- an unaligned target word has the source word `<unaligned>`.
In the decoder the neighbour is a phrase pair consistent with the alignment, so the links
of its boundary target word are exactly its links in the sentence: training and serving
see the same two words (up to the phrase table keeping one alignment per pair).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from training.features.batch import PairBatch
from training.features.hashing import combine, finalize, hash_string

KEYS_PER_NEIGHBOUR = 3
BACKWARD, FORWARD = 0, 1

_BOS, _EOS, _UNALIGNED = (hash_string(t) for t in ("<s>", "</s>", "<unaligned>"))
# [direction, (target word, source word, both)]: tags of their own, so a word before the
# phrase and the same word after it are different features.
_TAGS = np.array([[hash_string(f"feature-template/v1/{side}.{what}") for what in ("tgt", "src", "tgt&src")]
                  for side in ("prev", "next")], dtype=np.uint64)
_TAGS.setflags(write=False)


@nb.njit(nogil=True, cache=True)
def _keys(tgt, src, tags):
    n = tgt.shape[0]
    out = np.empty((n, 3), dtype=np.uint64)
    for p in range(n):
        out[p, 0] = finalize(combine(tags[0], tgt[p]))
        out[p, 1] = finalize(combine(tags[1], src[p]))
        out[p, 2] = finalize(combine(combine(tags[2], tgt[p]), src[p]))
    return out


def neighbour_keys(tgt: np.ndarray, src: np.ndarray, direction: int) -> np.ndarray:
    """uint64 [n, KEYS_PER_NEIGHBOUR]: the features of n neighbours (their target word and
    source word hashes) in `direction` (BACKWARD: the neighbour before, FORWARD: after)."""
    return _keys(np.ascontiguousarray(tgt, dtype=np.uint64), np.ascontiguousarray(src, dtype=np.uint64),
                 _TAGS[direction])


def edge_words(direction: int) -> tuple[np.ndarray, np.ndarray]:
    """The sentence edge as a neighbour: <s> before the first phrase, </s> after the last."""
    token = _BOS if direction == BACKWARD else _EOS
    return np.array([token], dtype=np.uint64), np.array([token], dtype=np.uint64)


@nb.njit(nogil=True, cache=True)
def _pair_words(src_tokens, src_offsets, pair_sentence, src_start, tgt_tokens, tgt_offsets, align_src,
                align_tgt, align_offsets, last, unaligned):
    n = pair_sentence.shape[0]
    tgt = np.empty(n, dtype=np.uint64)
    src = np.empty(n, dtype=np.uint64)
    for p in range(n):
        t0, t1 = tgt_offsets[p], tgt_offsets[p + 1]
        if t1 == t0:  # no target word: the client carries its neighbour's context over it
            tgt[p] = unaligned
            src[p] = unaligned
            continue
        at = t1 - t0 - 1 if last else 0
        tgt[p] = tgt_tokens[t1 - 1] if last else tgt_tokens[t0]
        best = -1
        for i in range(align_offsets[p], align_offsets[p + 1]):
            if align_tgt[i] == at and align_src[i] > best:
                best = align_src[i]
        if best < 0:
            src[p] = unaligned
        else:
            src[p] = src_tokens[src_offsets[pair_sentence[p]] + src_start[p] + best]
    return tgt, src


def pair_boundary_words(batch: PairBatch, direction: int) -> tuple[np.ndarray, np.ndarray]:
    """Each pair as the neighbour of another: BACKWARD, its last target word and that word's
    source word (what it is to the phrase placed after it); FORWARD, its first ones (what it
    is to the phrase before it). (target hashes, source hashes), uint64 [n_pairs] each."""
    return _pair_words(batch.src_tokens, batch.src_offsets, batch.pair_sentence, batch.src_start,
                       batch.tgt_tokens, batch.tgt_offsets, batch.align_src, batch.align_tgt,
                       batch.align_offsets, direction == BACKWARD, _UNALIGNED)


@nb.njit(nogil=True, cache=True)
def _gold_words(sentence, tgt_start, tgt_end, src_ids, src_offsets, tgt_ids, tgt_offsets, align,
                align_offsets, src_hashes, tgt_hashes, forward, edge, unaligned):
    n = sentence.shape[0]
    tgt = np.empty(n, dtype=np.uint64)
    src = np.empty(n, dtype=np.uint64)
    for e in range(n):
        s = sentence[e]
        length = tgt_offsets[s + 1] - tgt_offsets[s]
        t = tgt_end[e] if forward else tgt_start[e] - 1
        if t < 0 or t >= length:
            tgt[e] = edge
            src[e] = edge
            continue
        tgt[e] = tgt_hashes[tgt_ids[tgt_offsets[s] + t]]
        best = -1
        for i in range(align_offsets[s], align_offsets[s + 1]):
            if align[i, 1] == t and align[i, 0] > best:
                best = align[i, 0]
        src[e] = unaligned if best < 0 else src_hashes[src_ids[src_offsets[s] + best]]
    return tgt, src


def gold_neighbour_words(store, sentence: np.ndarray, tgt_start: np.ndarray, tgt_end: np.ndarray,
                         direction: int) -> tuple[np.ndarray, np.ndarray]:
    """The neighbour the reference gives each example (a store's examples: their global
    sentence and target span): the target word just before (BACKWARD) or after (FORWARD)
    the phrase and its source word. (target hashes, source hashes), uint64 [n] each."""
    s = store.sentences
    edge = _BOS if direction == BACKWARD else _EOS
    return _gold_words(np.asarray(sentence, dtype=np.int64), np.asarray(tgt_start, dtype=np.int64),
                       np.asarray(tgt_end, dtype=np.int64), s["src_ids"], s["src_offsets"], s["tgt_ids"],
                       s["tgt_offsets"], s["align"], s["align_offsets"], store.src_hashes, store.tgt_hashes,
                       direction == FORWARD, edge, _UNALIGNED)


@nb.njit(nogil=True, cache=True)
def _with_keys(indptr, keys, extra):
    n = indptr.shape[0] - 1
    m = extra.shape[1]
    out_ptr = np.empty(n + 1, dtype=np.int64)
    out = np.empty(keys.shape[0] + n * m, dtype=np.uint64)
    out_ptr[0] = 0
    w = 0
    for p in range(n):
        start = w
        for i in range(indptr[p], indptr[p + 1]):
            out[w] = keys[i]
            w += 1
        for j in range(m):  # insert each into the sorted row, dropping a duplicate
            k = extra[p, j]
            i = w
            while i > start and out[i - 1] > k:
                i -= 1
            if i > start and out[i - 1] == k:
                continue
            for r in range(w, i, -1):
                out[r] = out[r - 1]
            out[i] = k
            w += 1
        out_ptr[p + 1] = w
    return out_ptr, out[:w]


def with_neighbour_keys(indptr: np.ndarray, keys: np.ndarray, extra: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A key CSR (rows sorted and unique) with each row's `extra` keys [n, m] merged in:
    a training row of a context model is its pair's features and its neighbour's."""
    return _with_keys(indptr, keys, np.ascontiguousarray(extra, dtype=np.uint64))
