"""Moses-exact phrase-pair extraction with orientation classes, as numba kernels.

This reproduces `extract E F A out MAXLEN orientation --model ...` of Moses
(phrase-extract/extract-main.cpp, master of 2025-02-03) on flat arrays: the same phrase
pairs, in the same order, with the same orientation labels, known quirks included,
because byte-for-byte compatibility with Moses is the point. Each quirk is marked
`QUIRK` below and listed in docs/moses-quirks.md. Written from reading the Moses source;
no Moses code is copied.

Vocabulary: F is the source (what the decoder translates from; Japanese on ja-en), E
the target. Moses's inclusive ends become exclusive ends only at the output boundary.

It must not read files, build strings or touch the example store: it turns corpus
arrays into (sentence, spans, labels) arrays and nothing else. Hot loops are
nopython/nogil/cache numba; there is no per-example Python object.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

from training.errors import InputError, UsageError
from training.moses.types import EXTRACT_CLASSES

KIND_CODES = {"wbe": 0, "phrase": 1, "hier": 2}
ORIENT_CODES = {"msd": 0, "mslr": 1, "mono": 2}
_WBE, _PHRASE, _HIER = 0, 1, 2
_MSD, _MSLR, _MONO = 0, 1, 2

# Moses's REO_POS, in our own numbering: LEFT (mono), RIGHT (swap), DLEFT, DRIGHT, UNKNOWN.
MONO, SWAP, DLEFT, DRIGHT, UNKNOWN = 0, 1, 2, 3, 4
# REO_POS -> store label (training.moses.types.EXTRACT_CLASSES coding), per orientation set.
# QUIRK (getOrientString): UNKNOWN is written "other" for msd, "nomono" for mono and
# "dright" for mslr, so an undecidable mslr case counts as discontinuous-right.
_LABEL_OF = np.array([
    [0, 1, 2, 2, 2],   # msd: mono swap other
    [0, 1, 2, 3, 3],   # mslr: mono swap dleft dright
    [0, 1, 1, 1, 1],   # mono: mono nomono
], dtype=np.int8)
assert EXTRACT_CLASSES["msd"] == ("mono", "swap", "other")
assert EXTRACT_CLASSES["mslr"] == ("mono", "swap", "dleft", "dright")
assert EXTRACT_CLASSES["mono"] == ("mono", "nomono")

DEFAULT_MAX_PHRASE_LENGTH = 7
DEFAULT_MODELS = ("wbe-msd",)


@dataclass(frozen=True)
class ExtractModel:
    """One `--model` of Moses's extract, e.g. hier-msd: an orientation kind and set."""

    kind: str         # wbe | phrase | hier
    orientation: str  # msd | mslr | mono

    @classmethod
    def parse(cls, text: str) -> "ExtractModel":
        kind, _, orientation = text.partition("-")
        orientation = "mono" if orientation == "monotonicity" else orientation
        if kind not in KIND_CODES or orientation not in ORIENT_CODES:
            raise UsageError(f"--model {text!r}: expected {{wbe|phrase|hier}}-{{msd|mslr|mono}}, e.g. hier-msd")
        return cls(kind, orientation)

    @property
    def name(self) -> str:
        return f"{self.kind}-{self.orientation}"

    @property
    def classes(self) -> tuple[str, ...]:
        return EXTRACT_CLASSES[self.orientation]

    def columns(self) -> tuple[str, str]:
        return f"{self.name}/prev", f"{self.name}/next"


def parse_models(names) -> tuple[ExtractModel, ...]:
    """Unique models in the order given (duplicates dropped)."""
    models: list[ExtractModel] = []
    for name in names:
        model = ExtractModel.parse(name)
        if model not in models:
            models.append(model)
    if not models:
        raise UsageError("at least one --model is needed")
    return tuple(models)


def model_table(models: tuple[ExtractModel, ...]) -> np.ndarray:
    """Kernel encoding: rows (kind, orientation, phrase partner or -1).

    QUIRK: a hier model's mslr scan is skipped when the phrase model of the same run
    already said dleft/dright (getOrientHierModel's `phraseOrient`). Moses runs at most
    one phrase model, so the partner of hier-X is phrase-X when that was requested too;
    as shown in docs/moses-quirks.md only phrase-mslr can change a hier-mslr label.
    """
    table = np.full((len(models), 3), -1, dtype=np.int64)
    for i, m in enumerate(models):
        table[i, 0] = KIND_CODES[m.kind]
        table[i, 1] = ORIENT_CODES[m.orientation]
        if m.kind == "hier":
            for j, p in enumerate(models):
                if p.kind == "phrase" and p.orientation == m.orientation:
                    table[i, 2] = j
    return table


@nb.njit(nogil=True, cache=True)
def _is_aligned(A, n_f, n_e, f, e):
    """Moses's isAligned: (-1,-1) and (|F|,|E|) are the sentence corners and count as aligned.

    A plain call, not inline="always": numba would type its body again at each of the ten
    call sites (1.5 CPU s of a cold compile); LLVM inlines the call all the same."""
    if e == -1 and f == -1:
        return True
    if e <= -1 or f <= -1:
        return False
    if e == n_e and f == n_f:
        return True
    if e >= n_e or f >= n_f:
        return False
    return A[e, f]


@nb.njit(nogil=True, cache=True)
def _word_orient(A, n_f, n_e, s_f, e_f, s_e, e_e, orient, forward):
    """getOrientWordModel: word-based orientation from single alignment points."""
    if not forward:
        row = s_e - 1
        lt = _is_aligned(A, n_f, n_e, s_f - 1, row)
        rt = _is_aligned(A, n_f, n_e, e_f + 1, row)
    else:
        row = e_e + 1
        lt = _is_aligned(A, n_f, n_e, e_f + 1, row)
        rt = _is_aligned(A, n_f, n_e, s_f - 1, row)
    if lt and not rt:
        return MONO
    if orient == _MONO:
        return UNKNOWN
    if not lt and rt:
        return SWAP
    if orient == _MSD:
        return UNKNOWN
    # mslr. Here lt == rt. If both are set the scans are skipped and the result is
    # UNKNOWN (QUIRK: written "dright"). Backward scans row startE-1 for a point left of
    # startF-1 (dright) / right of endF+1 (dleft); forward scans row endE+1 for a point
    # right of endF+1 (dright) / left of startF-1 (dleft). The bounds are the real ones.
    if not lt:
        if not forward:
            for f in range(s_f - 2, -1, -1):
                if _is_aligned(A, n_f, n_e, f, row):
                    lt = True
                    break
        else:
            for f in range(e_f + 2, n_f):
                if _is_aligned(A, n_f, n_e, f, row):
                    lt = True
                    break
    if not rt:
        if not forward:
            for f in range(e_f + 2, n_f):
                if _is_aligned(A, n_f, n_e, f, row):
                    rt = True
                    break
        else:
            for f in range(s_f - 2, -1, -1):
                if _is_aligned(A, n_f, n_e, f, row):
                    rt = True
                    break
    if lt and not rt:
        return DRIGHT
    if not lt and rt:
        return DLEFT
    return UNKNOWN


@nb.njit(nogil=True, cache=True)
def _block_orient(A, BL, BR, n_f, n_e, s_f, e_f, s_e, e_e, orient, forward, phrase_orient):
    """getOrientPhraseModel and getOrientHierModel in one.

    BL[e, f] / BR[e, f] say that some extracted block ends at target e with its source
    start / end at f (Moses's bottom-left / bottom-right corner maps). The phrase model
    passes the in-limit maps and phrase_orient=UNKNOWN; the hier model passes in-limit
    plus over-length maps and its phrase partner's result, which reproduces Moses's
    hier function exactly (its extra tests are then the phrase tests on more blocks).

    QUIRK (forward): Moses mirrors the backward call with the same BL/BR maps, so it
    looks for blocks whose target *ends* at endE+1 rather than starts there. Blocks
    starting right after the phrase are never consulted; only the word-level corner
    test finds them.
    QUIRK (mslr): the scan away from the sentence end stops at |F|-2 (the function is
    called with countF-1 and a strict comparison), so a block at source |F|-1 is never
    seen by the dleft scan (backward) or the dright scan (forward).
    """
    if not forward:
        row = s_e - 1
        lt = _is_aligned(A, n_f, n_e, s_f - 1, row)
        rt = _is_aligned(A, n_f, n_e, e_f + 1, row)
        mono_map, mono_f = BR, s_f - 1
        swap_map, swap_f = BL, e_f + 1
    else:
        row = e_e + 1
        lt = _is_aligned(A, n_f, n_e, e_f + 1, row)
        rt = _is_aligned(A, n_f, n_e, s_f - 1, row)
        mono_map, mono_f = BL, e_f + 1
        swap_map, swap_f = BR, s_f - 1
    has_row = 0 <= row < n_e
    if (phrase_orient == MONO or (lt and not rt)
            or (has_row and 0 <= mono_f < n_f and mono_map[row, mono_f])):
        return MONO
    if orient == _MONO:
        return UNKNOWN
    if (phrase_orient == SWAP or (not lt and rt)
            or (has_row and 0 <= swap_f < n_f and swap_map[row, swap_f])):
        return SWAP
    if orient == _MSD:
        return UNKNOWN
    if phrase_orient != UNKNOWN:
        return phrase_orient
    if not has_row:
        return UNKNOWN
    if not forward:
        for f in range(s_f - 2, -1, -1):
            if BR[row, f]:
                return DRIGHT
        for f in range(e_f + 2, n_f - 1):
            if BL[row, f]:
                return DLEFT
    else:
        for f in range(e_f + 2, n_f - 1):
            if BL[row, f]:
                return DRIGHT
        for f in range(s_f - 2, -1, -1):
            if BR[row, f]:
                return DLEFT
    return UNKNOWN


@nb.njit(nogil=True, cache=True)
def _grow(rows, labels, needed):
    cap = rows.shape[0]
    if needed <= cap:
        return rows, labels
    new_cap = max(needed, 2 * cap)
    new_rows = np.empty((new_cap, rows.shape[1]), dtype=rows.dtype)
    new_labels = np.empty((new_cap, labels.shape[1]), dtype=labels.dtype)
    # Element loops, not `new_rows[:cap] = rows`: a slice assignment compiles numba's
    # broadcast-error formatting, 8 of a cold pipeline's compile seconds (benchmarks/first_run.py).
    for i in range(cap):
        for j in range(rows.shape[1]):
            new_rows[i, j] = rows[i, j]
        for j in range(labels.shape[1]):
            new_labels[i, j] = labels[i, j]
    return new_rows, new_labels


@nb.njit(nogil=True, cache=True)
def extract_block(src_offsets, tgt_offsets, align, align_offsets, first, stop,
                  max_len, models, capacity):
    """Extract sentences [first, stop): (rows, labels, n), the first n of rows [:, 5] int32
    and labels [:, 2*M] int8 filled (extract_sentences cuts them to n: a slice copy here
    would compile numba's array copy, about 0.7 CPU s of a cold compile).

    rows = (sentence, src_start, src_end, tgt_start, tgt_end), ends exclusive, pairs in
    Moses's output order (startE, endE ascending; startF descending; endF ascending).
    labels[:, 2*k] / [:, 2*k+1] are model k's prev / next labels (extraction coding).
    """
    n_models = models.shape[0]
    relax = False
    for k in range(n_models):
        if models[k, 0] == _HIER:
            relax = True
    max_f = 1
    max_e = 1
    for s in range(first, stop):
        max_f = max(max_f, src_offsets[s + 1] - src_offsets[s])
        max_e = max(max_e, tgt_offsets[s + 1] - tgt_offsets[s])
    A = np.zeros((max_e, max_f), dtype=np.bool_)
    in_bl = np.zeros((max_e, max_f), dtype=np.bool_)
    in_br = np.zeros((max_e, max_f), dtype=np.bool_)
    all_bl = np.zeros((max_e, max_f), dtype=np.bool_)
    all_br = np.zeros((max_e, max_f), dtype=np.bool_)
    count_f = np.zeros(max_f, dtype=np.int64)
    prefix_f = np.zeros(max_f + 1, dtype=np.int64)
    e_min = np.zeros(max_e, dtype=np.int64)
    e_max = np.zeros(max_e, dtype=np.int64)
    e_count = np.zeros(max_e, dtype=np.int64)
    raw = np.empty((n_models, 2), dtype=np.int64)
    rows = np.empty((max(capacity, 16), 5), dtype=np.int32)
    labels = np.empty((max(capacity, 16), 2 * n_models), dtype=np.int8)
    n = 0
    for s in range(first, stop):
        n_f = src_offsets[s + 1] - src_offsets[s]
        n_e = tgt_offsets[s + 1] - tgt_offsets[s]
        if n_f == 0 or n_e == 0:
            continue  # Moses skips a sentence pair with an empty side.
        # Element loops, not slice assignments (`A[:n_e, :n_f] = False`): numba compiles each
        # slice assignment's own code, about 1.5 CPU s of a cold compile for these nine.
        for e in range(n_e):
            for f in range(n_f):
                A[e, f] = False
                in_bl[e, f] = False
                in_br[e, f] = False
                all_bl[e, f] = False
                all_br[e, f] = False
            e_count[e] = 0
            e_min[e] = n_f
            e_max[e] = -1
        for f in range(n_f):
            count_f[f] = 0
        for p in range(align_offsets[s], align_offsets[s + 1]):
            f = align[p, 0]
            e = align[p, 1]
            A[e, f] = True
            count_f[f] += 1
            e_count[e] += 1
            e_min[e] = min(e_min[e], f)
            e_max[e] = max(e_max[e], f)
        prefix_f[0] = 0
        for f in range(n_f):
            prefix_f[f + 1] = prefix_f[f] + count_f[f]
        start_n = n
        # Enumerate consistent blocks. With a hier model every length is enumerated
        # (relaxLimit): over-length blocks only feed the corner maps.
        for s_e in range(n_e):
            min_f = n_f
            max_fi = -1
            inside = 0
            e_e = s_e
            while e_e < n_e and (relax or e_e < s_e + max_len):
                if e_count[e_e] > 0:
                    min_f = min(min_f, e_min[e_e])
                    max_fi = max(max_fi, e_max[e_e])
                    inside += e_count[e_e]
                if (max_fi >= 0 and (relax or max_fi - min_f < max_len)
                        and prefix_f[max_fi + 1] - prefix_f[min_f] == inside):
                    # The source side may grow over unaligned words at both ends.
                    s_f = min_f
                    while (s_f >= 0 and (relax or s_f > max_fi - max_len)
                           and (s_f == min_f or count_f[s_f] == 0)):
                        e_f = max_fi
                        while (e_f < n_f and (relax or e_f < s_f + max_len)
                               and (e_f == max_fi or count_f[e_f] == 0)):
                            all_bl[e_e, s_f] = True
                            all_br[e_e, e_f] = True
                            if e_e - s_e < max_len and e_f - s_f < max_len:
                                in_bl[e_e, s_f] = True
                                in_br[e_e, e_f] = True
                                rows, labels = _grow(rows, labels, n + 1)
                                rows[n, 0] = s
                                rows[n, 1] = s_f
                                rows[n, 2] = e_f + 1
                                rows[n, 3] = s_e
                                rows[n, 4] = e_e + 1
                                n += 1
                            e_f += 1
                        s_f -= 1
                e_e += 1
        # Orientation of every in-limit pair, against the complete corner maps.
        for i in range(start_n, n):
            s_f = rows[i, 1]
            e_f = rows[i, 2] - 1
            s_e = rows[i, 3]
            e_e = rows[i, 4] - 1
            for k in range(n_models):  # phrase models first: hier may need their result
                if models[k, 0] == _PHRASE:
                    for d in range(2):
                        raw[k, d] = _block_orient(A, in_bl, in_br, n_f, n_e, s_f, e_f, s_e, e_e,
                                                  models[k, 1], d == 1, np.int64(UNKNOWN))  # int64: one signature
            for k in range(n_models):
                kind = models[k, 0]
                for d in range(2):
                    if kind == _WBE:
                        raw[k, d] = _word_orient(A, n_f, n_e, s_f, e_f, s_e, e_e, models[k, 1], d == 1)
                    elif kind == _HIER:
                        partner = UNKNOWN if models[k, 2] < 0 else raw[models[k, 2], d]
                        raw[k, d] = _block_orient(A, all_bl, all_br, n_f, n_e, s_f, e_f, s_e, e_e,
                                                  models[k, 1], d == 1, partner)
                    labels[i, 2 * k + d] = _LABEL_OF[models[k, 1], raw[k, d]]
    return rows, labels, n


def extract_sentences(corpus, models: tuple[ExtractModel, ...], first: int, stop: int,
                      max_phrase_length: int = DEFAULT_MAX_PHRASE_LENGTH) -> tuple[np.ndarray, np.ndarray]:
    """Python entry: extract sentences [first, stop) of a training.corpus.reading.Corpus."""
    if max_phrase_length < 1:
        raise UsageError(f"--max-phrase-length must be at least 1, got {max_phrase_length}")
    capacity = 64 * max(stop - first, 1)
    rows, labels, n = extract_block(corpus.src_offsets, corpus.tgt_offsets, corpus.align, corpus.align_offsets,
                                    first, stop, max_phrase_length, model_table(models), capacity)
    return rows[:n].copy(), labels[:n].copy()
