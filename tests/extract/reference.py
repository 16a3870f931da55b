"""A slow, set-based reference of Moses's extraction and orientation, written from the definitions.

Deliberately unlike training/moses/extract.py: no corner maps, no incremental spans, no
buffers; blocks are Python sets and every rule is a comprehension over them, stated as
in MOSES-NOTES.md section 1 (quirks included). Only the property tests use it.
"""

from __future__ import annotations

MONO, SWAP, DLEFT, DRIGHT, UNKNOWN = "mono", "swap", "dleft", "dright", None
WRITTEN = {  # how UNKNOWN is written, per orientation set
    "msd": "other", "mslr": "dright", "mono": "nomono",
}


def aligned(points, n_f, n_e, f, e) -> bool:
    if (f, e) == (-1, -1) or (f, e) == (n_f, n_e):
        return True
    return (f, e) in points


def blocks(points, n_f, n_e, max_len, every_length):
    """All consistent blocks (s_f, e_f, s_e, e_e), inclusive ends, source grown over unaligned words.

    With `every_length` (a hier model) blocks of any size; otherwise both sides < max_len
    and the aligned core maxF-minF < max_len.
    """
    aligned_f = {f for f, _ in points}
    found = set()
    for s_e in range(n_e):
        for e_e in range(s_e, n_e):
            if not every_length and e_e - s_e >= max_len:
                continue
            fs = {f for f, e in points if s_e <= e <= e_e}
            if not fs:
                continue
            lo, hi = min(fs), max(fs)
            if not every_length and hi - lo >= max_len:
                continue
            if any(lo <= f <= hi and not s_e <= e <= e_e for f, e in points):
                continue
            for s_f in range(0, lo + 1):
                for e_f in range(hi, n_f):
                    if any(f in aligned_f for f in range(s_f, lo)) or any(f in aligned_f for f in range(hi + 1, e_f + 1)):
                        continue
                    if not every_length and e_f - s_f >= max_len:
                        continue
                    found.add((s_f, e_f, s_e, e_e))
    return found


def in_limit(block, max_len) -> bool:
    s_f, e_f, s_e, e_e = block
    return e_f - s_f < max_len and e_e - s_e < max_len


def word_orientation(points, n_f, n_e, pair, orient, forward):
    s_f, e_f, s_e, e_e = pair
    row = e_e + 1 if forward else s_e - 1
    toward = (e_f + 1) if forward else (s_f - 1)   # the corner that means "monotone"
    away = (s_f - 1) if forward else (e_f + 1)     # the corner that means "swap"
    lt, rt = aligned(points, n_f, n_e, toward, row), aligned(points, n_f, n_e, away, row)
    if lt and not rt:
        return MONO
    if orient == "mono":
        return UNKNOWN
    if rt and not lt:
        return SWAP
    if orient == "msd":
        return UNKNOWN
    beyond_toward = range(e_f + 2, n_f) if forward else range(0, s_f - 1)
    beyond_away = range(0, s_f - 1) if forward else range(e_f + 2, n_f)
    left = lt or any(aligned(points, n_f, n_e, f, row) for f in beyond_toward)
    right = rt or any(aligned(points, n_f, n_e, f, row) for f in beyond_away)
    if left and not right:
        return DRIGHT
    if right and not left:
        return DLEFT
    return UNKNOWN


def block_orientation(points, n_f, n_e, pair, orient, forward, neighbours, phrase_orient=UNKNOWN):
    """Phrase model (neighbours = in-limit blocks) or hier model (all blocks + phrase result).

    Neighbours are only ever looked up by their *last* target word (Moses's
    bottom-left/bottom-right maps), forward included: that is the forward quirk.
    """
    s_f, e_f, s_e, e_e = pair
    row = e_e + 1 if forward else s_e - 1
    lt = aligned(points, n_f, n_e, (e_f + 1) if forward else (s_f - 1), row)
    rt = aligned(points, n_f, n_e, (s_f - 1) if forward else (e_f + 1), row)
    ending_at_row = [b for b in neighbours if b[3] == row]
    if forward:
        mono_block = any(b[0] == e_f + 1 for b in ending_at_row)
        swap_block = any(b[1] == s_f - 1 for b in ending_at_row)
        dright_block = any(e_f + 2 <= b[0] <= n_f - 2 for b in ending_at_row)
        dleft_block = any(0 <= b[1] <= s_f - 2 for b in ending_at_row)
    else:
        mono_block = any(b[1] == s_f - 1 for b in ending_at_row)
        swap_block = any(b[0] == e_f + 1 for b in ending_at_row)
        dright_block = any(0 <= b[1] <= s_f - 2 for b in ending_at_row)
        dleft_block = any(e_f + 2 <= b[0] <= n_f - 2 for b in ending_at_row)  # |F|-2: off-by-one quirk
    if phrase_orient == MONO or (lt and not rt) or mono_block:
        return MONO
    if orient == "mono":
        return UNKNOWN
    if phrase_orient == SWAP or (rt and not lt) or swap_block:
        return SWAP
    if orient == "msd":
        return UNKNOWN
    if phrase_orient is not UNKNOWN:
        return phrase_orient
    if dright_block:
        return DRIGHT
    if dleft_block:
        return DLEFT
    return UNKNOWN


def extract_reference(points, n_f, n_e, max_len, models):
    """{(s_f, e_f+1, s_e, e_e+1): tuple of labels (model0 prev, model0 next, ...)} as strings."""
    if n_f == 0 or n_e == 0:
        return {}
    every_length = any(kind == "hier" for kind, _ in models)
    every = blocks(points, n_f, n_e, max_len, every_length)
    inside = {b for b in every if in_limit(b, max_len)}
    result = {}
    for pair in inside:
        labels = []
        for kind, orient in models:
            for forward in (False, True):
                if kind == "wbe":
                    raw = word_orientation(points, n_f, n_e, pair, orient, forward)
                elif kind == "phrase":
                    raw = block_orientation(points, n_f, n_e, pair, orient, forward, inside)
                else:
                    partner = UNKNOWN
                    if ("phrase", orient) in models:
                        partner = block_orientation(points, n_f, n_e, pair, orient, forward, inside)
                    raw = block_orientation(points, n_f, n_e, pair, orient, forward, every, partner)
                labels.append(WRITTEN[orient] if raw is UNKNOWN else raw)
        s_f, e_f, s_e, e_e = pair
        result[(s_f, e_f + 1, s_e, e_e + 1)] = tuple(labels)
    return result
