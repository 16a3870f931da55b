"""Which distortion limit a language pair needs, read off its word alignments.

Moses's distortion limit (default 6) bounds how far the decoder may jump in the source
between consecutive target phrases. A reordering model can only rank the reorderings the
decoder is allowed to try: on ja-en, 47% of sentences need a word-level jump longer than 6,
and raising the limit to 12 gained +6.7 BLEU tuned (issue 16, benchmarks/RESULTS.md), far
more than any reordering model did. The alignments say this before any decoding: for each
sentence, the longest jump between consecutive aligned target words is the smallest limit
at which the decoder could follow its word order with one-word phrases.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
from numba import njit

from training.corpus.pharaoh import parse_links

#: Moses's default [distortion-limit].
MOSES_DEFAULT_LIMIT = 6
#: The share of sentences a recommended limit may leave out of reach: on ja-en 12 leaves 1.6%
#: and was the best limit measured (16 added nothing for the classifier and cost Lexical BLEU).
DEFAULT_MISS_SHARE = 0.02
#: The longest limit advised, whatever the alignments say. On ja-en Kyoto Wikipedia (25 tokens a
#: line) 2% is only reached at 41, yet Lexical's weights tuned at 12 scored lower at 16 and 20
#: than at 12 (18.60 and 18.71 against 18.83 BLEU), 20 decoding 1.5x slower (issue 29's sweep,
#: benchmarks/RESULTS.md), and on ja-en Tanaka 16 added nothing.
MAX_ADVISED_LIMIT = 12
_CHUNK_BYTES = 1 << 22


@njit(cache=True)
def longest_jumps(links: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Per sentence: max over consecutive aligned target words j' < j of |start(j) - end(j') - 1|
    (Moses's distortion at the word level; start/end = first/last source word aligned to the
    target word; unaligned target words are skipped). links: int [k, 2] (source, target)."""
    n = offsets.shape[0] - 1
    out = np.zeros(n, np.int32)
    lo = np.empty(64, np.int64)
    hi = np.empty(64, np.int64)
    for s in range(n):
        a, b = offsets[s], offsets[s + 1]
        width = 0
        for k in range(a, b):
            width = max(width, links[k, 1] + 1)
        if width > lo.shape[0]:
            lo = np.empty(2 * width, np.int64)
            hi = np.empty(2 * width, np.int64)
        lo[:width] = np.iinfo(np.int64).max
        hi[:width] = -1
        for k in range(a, b):
            i, j = links[k, 0], links[k, 1]
            lo[j] = min(lo[j], i)
            hi[j] = max(hi[j], i)
        longest, previous_end, seen = 0, 0, False
        for j in range(width):
            if hi[j] < 0:
                continue
            if seen:
                longest = max(longest, abs(lo[j] - previous_end - 1))
            previous_end, seen = hi[j], True
        out[s] = longest
    return out


@dataclass(frozen=True)
class JumpProfile:
    """counts[d] = sentences whose longest word jump is d (the last bin holds everything longer)."""

    counts: np.ndarray

    @property
    def sentences(self) -> int:
        return int(self.counts.sum())

    def share_beyond(self, limit: int) -> float:
        """Share of sentences whose word order needs a jump longer than `limit`."""
        return float(self.counts[limit + 1:].sum()) / max(1, self.sentences)

    def recommend(self, miss_share: float = DEFAULT_MISS_SHARE, cap: int = MAX_ADVISED_LIMIT) -> int:
        """The smallest limit, never below Moses's default, that leaves at most `miss_share`
        of sentences out of reach, and never above `cap`: a longer limit costs decode time
        and gives a weak reordering model more wrong orders to choose from."""
        for limit in range(MOSES_DEFAULT_LIMIT, min(cap, self.counts.shape[0] - 1)):
            if self.share_beyond(limit) <= miss_share:
                return limit
        return min(cap, self.counts.shape[0] - 1)


def jump_profile(align_path: str | os.PathLike, max_jump: int = 100) -> JumpProfile:
    """Stream a Pharaoh alignment file in chunks of lines (memory bounded by the chunk, not
    the corpus) and count sentences by their longest word jump (capped at `max_jump`)."""
    counts = np.zeros(max_jump + 1, np.int64)
    line = 0
    with open(align_path, "rb") as f:
        rest = b""
        while True:
            block = f.read(_CHUNK_BYTES)
            data = rest + block
            if not block:
                rest = b""
            else:
                cut = data.rfind(b"\n") + 1
                data, rest = data[:cut], data[cut:]
            if data:
                links, offsets = parse_links(data, align_path, first_line=line)
                jumps = longest_jumps(links, offsets) if offsets.shape[0] > 1 else np.zeros(0, np.int32)
                counts += np.bincount(np.minimum(jumps, max_jump), minlength=max_jump + 1)
                line += offsets.shape[0] - 1
            if not block:
                return JumpProfile(counts)


def limit_advice(profile: JumpProfile) -> str:
    """One line for a user: the limit to set and the evidence for it."""
    limit = profile.recommend()
    default = profile.share_beyond(MOSES_DEFAULT_LIMIT)
    if limit == MOSES_DEFAULT_LIMIT:
        return (f"Moses's default distortion limit {MOSES_DEFAULT_LIMIT} reaches the word order of "
                f"{100 * (1 - default):.1f}% of the training sentences: keep it.")
    advice = (f"{100 * default:.1f}% of the training sentences need a word jump longer than Moses's default "
              f"distortion limit {MOSES_DEFAULT_LIMIT}; {limit} leaves {100 * profile.share_beyond(limit):.1f}%: "
              f"set [distortion-limit] {limit} (ja-en: +6.7 BLEU tuned, benchmarks/RESULTS.md).")
    if profile.share_beyond(limit) > DEFAULT_MISS_SHARE:
        advice += (f" A longer limit would reach more of them, but on the long sentences of ja-en Kyoto "
                   f"Wikipedia 16 and 20 scored lower than {MAX_ADVISED_LIMIT} (Lexical: 18.60 and 18.71 against "
                   f"18.83 BLEU), and 20 decoded 1.5x slower.")
    return advice
