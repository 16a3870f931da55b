"""PairBatch: the one in-memory shape of "phrase pairs in their sentences".

Both the training path (chunks of the example store) and the serving path (one gRPC
request) are turned into a PairBatch, and feature extraction only ever sees a PairBatch.
That is what keeps training and serving from drifting apart. Everything is a flat numpy
array (CSR-style offsets); there is no per-pair Python object.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PairBatch:
    """Phrase pairs with exactly what a reordering feature may look at.

    Tokens are stable 64-bit hashes (`training.features.hashing`), never strings or corpus ids,
    so a batch built from a request and one built from the store are interchangeable.
    Spans are sentence-relative, start inclusive, end exclusive. Alignment points are
    phrase-relative (source index within the source phrase, target index within the
    target phrase). There is no target context: the decoder does not know it.
    """

    src_tokens: np.ndarray     # uint64 [total source tokens], all sentences concatenated
    src_offsets: np.ndarray    # int64 [n_sentences + 1]
    pair_sentence: np.ndarray  # int32 [n_pairs], index into the sentences
    src_start: np.ndarray      # int32 [n_pairs]
    src_end: np.ndarray        # int32 [n_pairs], exclusive
    tgt_tokens: np.ndarray     # uint64 [total target-phrase tokens]
    tgt_offsets: np.ndarray    # int64 [n_pairs + 1]
    align_src: np.ndarray      # int16 [total alignment points], phrase-relative
    align_tgt: np.ndarray      # int16 [total alignment points], phrase-relative
    align_offsets: np.ndarray  # int64 [n_pairs + 1]

    @property
    def n_pairs(self) -> int:
        return int(self.pair_sentence.shape[0])

    @property
    def n_sentences(self) -> int:
        return int(self.src_offsets.shape[0] - 1)


def pair_slice(batch: PairBatch, lo: int, hi: int) -> PairBatch:
    """Pairs lo..hi-1 of a batch (sentences are shared, not copied): feature extraction and
    scoring of a large batch go slice by slice with the same answers as in one go."""
    t0, t1 = batch.tgt_offsets[lo], batch.tgt_offsets[hi]
    a0, a1 = batch.align_offsets[lo], batch.align_offsets[hi]
    return PairBatch(
        src_tokens=batch.src_tokens, src_offsets=batch.src_offsets,
        pair_sentence=batch.pair_sentence[lo:hi], src_start=batch.src_start[lo:hi], src_end=batch.src_end[lo:hi],
        tgt_tokens=batch.tgt_tokens[t0:t1], tgt_offsets=batch.tgt_offsets[lo:hi + 1] - t0,
        align_src=batch.align_src[a0:a1], align_tgt=batch.align_tgt[a0:a1],
        align_offsets=batch.align_offsets[lo:hi + 1] - a0)
