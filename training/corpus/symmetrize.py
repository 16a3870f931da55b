"""Symmetrize two directional word alignments into one (grow-diag-final-and and friends).

This reproduces Moses's `symal` (Och & Ney's refined method as Koehn et al. 2003 define
grow-diag-final, and the `-both` "and" variant Moses trains with by default), including
the order in which it visits points, because the order decides which of two competing
points gets a word first. It must not read or write files: it works on flat arrays of
links for a whole corpus, in one numba loop, with no per-point Python objects.

The two inputs, in symal's terms (both given as 0-based `(src, tgt)` pairs):
- `direct`: the direction in which each source word has at most one link (symal's
  `a[j]`; eflomal's *reverse* links),
- `inverse`: the direction in which each target word has at most one link (symal's
  `b[i]`; eflomal's *forward* links).
Arbitrary link sets are accepted too; the definition below does not need functions.

grow-diag-final-and, step by step (symal.cpp, `printgrow`):
1. Start from the intersection; a word is *covered* once it has a link.
2. Grow: scan the current points in target-major order (target index, then source
   index); for each, try its neighbours in the order (dt, ds) = (-1,0), (0,-1), (1,0),
   (0,1) and, for the "diag" variants, (-1,-1), (-1,1), (1,-1), (1,1). A neighbour is
   added when it is in the union and at least one of its two words is uncovered;
   coverage updates at once. A point added ahead of the scan position is visited in the
   same pass (symal iterates a std::set while inserting); repeat passes until one adds
   nothing.
3. Final: visit the union points that only `inverse` has, in target-major order, then
   those only `direct` has; add one when both its words are uncovered ("and") or when
   at least one is ("final" without "and"), again updating coverage at once.
"""

from __future__ import annotations

import numba
import numpy as np

from training.errors import InputError, UsageError

# method name -> (grow, diagonal, final, both_uncovered); intersection/union are special.
METHODS: dict[str, tuple[bool, bool, bool, bool]] = {
    "intersection": (False, False, False, False),
    "union": (False, False, False, False),
    "grow": (True, False, False, False),
    "grow-diag": (True, True, False, False),
    "grow-final": (True, False, True, False),
    "grow-final-and": (True, False, True, True),
    "grow-diag-final": (True, True, True, False),
    "grow-diag-final-and": (True, True, True, True),
}

# symal's neighbour order, as (d_tgt, d_src): the four sides, then the four diagonals.
_NEIGHBOURS = np.array(
    [[-1, 0], [0, -1], [1, 0], [0, 1], [-1, -1], [-1, 1], [1, -1], [1, 1]], dtype=np.int64
)


@numba.njit(nogil=True, cache=True)
def _symmetrize_corpus(src_len, tgt_len, direct, direct_off, inverse, inverse_off,
                       mode, grow, n_neighbours, final, both_uncovered, neighbours):
    n_sent = src_len.shape[0]
    max_src = 0
    max_tgt = 0
    for k in range(n_sent):
        max_src = max(max_src, src_len[k])
        max_tgt = max(max_tgt, tgt_len[k])
    # in_union[t, s]: bit 1 = direct has (s, t), bit 2 = inverse has it.
    in_union = np.zeros((max_tgt, max_src), dtype=np.int8)
    current = np.zeros((max_tgt, max_src), dtype=np.bool_)
    tgt_covered = np.zeros(max_tgt, dtype=np.bool_)
    src_covered = np.zeros(max_src, dtype=np.bool_)
    out = np.empty((direct.shape[0] + inverse.shape[0], 2), dtype=np.int32)
    out_off = np.zeros(n_sent + 1, dtype=np.int64)
    n_out = 0
    for k in range(n_sent):
        m = src_len[k]
        n = tgt_len[k]
        in_union[:n, :m] = 0
        current[:n, :m] = False
        tgt_covered[:n] = False
        src_covered[:m] = False
        for p in range(direct_off[k], direct_off[k + 1]):
            in_union[direct[p, 1], direct[p, 0]] |= 1
        for p in range(inverse_off[k], inverse_off[k + 1]):
            in_union[inverse[p, 1], inverse[p, 0]] |= 2
        for t in range(n):
            for s in range(m):
                if (mode == 1 and in_union[t, s] != 0) or in_union[t, s] == 3:
                    current[t, s] = True
                    tgt_covered[t] = True
                    src_covered[s] = True
        if grow:
            added = True
            while added:
                added = False
                for t in range(n):
                    for s in range(m):
                        if not current[t, s]:
                            continue
                        for o in range(n_neighbours):
                            tt = t + neighbours[o, 0]
                            ss = s + neighbours[o, 1]
                            if tt < 0 or tt >= n or ss < 0 or ss >= m:
                                continue
                            if in_union[tt, ss] == 0:
                                continue
                            if tgt_covered[tt] and src_covered[ss]:
                                continue
                            current[tt, ss] = True
                            tgt_covered[tt] = True
                            src_covered[ss] = True
                            added = True
        if final:
            for only in (2, 1):  # inverse-only points first, then direct-only (symal order)
                for t in range(n):
                    for s in range(m):
                        if in_union[t, s] != only or current[t, s]:
                            continue
                        if both_uncovered:
                            ok = not tgt_covered[t] and not src_covered[s]
                        else:
                            ok = not (tgt_covered[t] and src_covered[s])
                        if ok:
                            current[t, s] = True
                            tgt_covered[t] = True
                            src_covered[s] = True
        for s in range(m):
            for t in range(n):
                if current[t, s]:
                    out[n_out, 0] = s
                    out[n_out, 1] = t
                    n_out += 1
        out_off[k + 1] = n_out
    return out[:n_out].copy(), out_off


def _check_links(name: str, links: np.ndarray, offsets: np.ndarray,
                 src_len: np.ndarray, tgt_len: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    links = np.ascontiguousarray(links, dtype=np.int32).reshape(-1, 2)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    if offsets.shape != (src_len.shape[0] + 1,) or offsets[0] != 0 or offsets[-1] != links.shape[0]:
        raise InputError(f"{name}: offsets must have one entry per sentence plus one, from 0 to the number of links")
    if np.any(np.diff(offsets) < 0):
        raise InputError(f"{name}: offsets must not decrease")
    sentence = np.repeat(np.arange(src_len.shape[0]), np.diff(offsets))
    bad = (links[:, 0] < 0) | (links[:, 0] >= src_len[sentence]) | (links[:, 1] < 0) | (links[:, 1] >= tgt_len[sentence])
    if np.any(bad):
        p = int(np.argmax(bad))
        raise InputError(
            f"{name}: link {links[p, 0]}-{links[p, 1]} is outside sentence {sentence[p]} "
            f"({src_len[sentence[p]]} source, {tgt_len[sentence[p]]} target words)"
        )
    return links, offsets


def symmetrize(src_lengths: np.ndarray, tgt_lengths: np.ndarray,
               direct: np.ndarray, direct_offsets: np.ndarray,
               inverse: np.ndarray, inverse_offsets: np.ndarray,
               method: str = "grow-diag-final-and") -> tuple[np.ndarray, np.ndarray]:
    """Combine two directional alignments of a whole corpus into one.

    Links are int [k, 2] arrays of 0-based (src, tgt) pairs; sentence i owns rows
    offsets[i]:offsets[i+1]. Returns (links int32 [k, 2], offsets int64 [n+1]), each
    sentence's links sorted by source then target index. `direct` is the direction in
    which every source word has at most one link (eflomal's reverse output), `inverse`
    the one in which every target word has (eflomal's forward output); the order only
    matters for the final steps, where symal prefers `inverse`'s points.
    """
    if method not in METHODS:
        raise UsageError(f"unknown symmetrization {method!r}; choose from {', '.join(METHODS)}")
    src_len = np.ascontiguousarray(src_lengths, dtype=np.int64)
    tgt_len = np.ascontiguousarray(tgt_lengths, dtype=np.int64)
    if src_len.shape != tgt_len.shape or src_len.ndim != 1:
        raise InputError("src_lengths and tgt_lengths must be 1-d arrays of one length per sentence")
    if np.any(src_len < 0) or np.any(tgt_len < 0):
        raise InputError("sentence lengths must not be negative")
    direct, direct_offsets = _check_links("direct", direct, direct_offsets, src_len, tgt_len)
    inverse, inverse_offsets = _check_links("inverse", inverse, inverse_offsets, src_len, tgt_len)
    grow, diagonal, final, both = METHODS[method]
    mode = 1 if method == "union" else 0
    return _symmetrize_corpus(src_len, tgt_len, direct, direct_offsets, inverse, inverse_offsets,
                              mode, grow, 8 if diagonal else 4, final, both, _NEIGHBOURS)
