"""Moses's extract text formats (`extract` and `extract.o`), rendered from arrays.

For interop and diffing only: the example store is the real output. Lines are
assembled as bytes by numba kernels from the vocabularies' UTF-8 blobs, so writing
tens of millions of lines costs no per-example Python object.

Line shapes (extract-main.cpp, addPhrase / getOrientationInfo):
- extract:   `f1 f2 ||| e1 e2 ||| 0-0 1-1` (points phrase-relative, source-target,
  target-major and in the alignment file's order within a target word)
- extract.o with a wbe model: `f1 f2 ||| e1 e2 ||| PREV NEXT`
- extract.o otherwise:        `f1 f2 ||| e1 e2 |||  | pPREV pNEXT | hPREV hNEXT`, an
  absent phrase or hier model leaving its slot empty.
QUIRK: when wbe is combined with phrase or hier, Moses writes only the wbe pair
(if/else in getOrientationInfo), so the phrase/hier labels are lost from the text (they
are in the store). Moses runs at most one model per kind, so text output refuses a
model list with two models of one kind. It must not decide labels or read files.
"""

from __future__ import annotations

from functools import cached_property

import numba as nb
import numpy as np

from training.errors import InputError, UsageError
from training.moses.extract import ExtractModel
from training.features.hashing import encode_tokens


def check_moses_expressible(models: tuple[ExtractModel, ...]) -> None:
    kinds = [m.kind for m in models]
    for kind in set(kinds):
        if kinds.count(kind) > 1:
            raise UsageError(f"--moses-format: Moses's extract runs one {kind} model at a time, "
                             f"got {', '.join(m.name for m in models if m.kind == kind)}")


def unique_rows(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(unique rows, inverse) like np.unique(axis=0), but through 1-D uint64 row keys.

    np.unique(axis=0) sorts structured rows and is ten times slower. Keys are a
    multiplicative mix of the rows' 64-bit words; the result is verified, and a
    collision (never seen) falls back to np.unique(axis=0).
    """
    matrix = np.ascontiguousarray(matrix)
    words = matrix.astype(np.float64 if matrix.dtype.kind == "f" else np.int64).view(np.uint64)
    key = np.zeros(matrix.shape[0], dtype=np.uint64)
    for j in range(words.shape[1]):
        key = (key ^ words[:, j]) * np.uint64(0x100000001B3) + np.uint64(j + 1)
        key ^= key >> np.uint64(29)
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    unique = matrix[first]
    inverse = inverse.reshape(-1)
    if not np.array_equal(unique[inverse], matrix):
        unique, inverse = np.unique(matrix, axis=0, return_inverse=True)
    return unique, inverse.reshape(-1)


def orientation_tail(models: tuple[ExtractModel, ...], label_row) -> str:
    """The orientation field of one extract.o line for one row of store labels."""
    words = {m.kind: f"{m.classes[label_row[2 * k]]} {m.classes[label_row[2 * k + 1]]}"
             for k, m in enumerate(models)}
    if "wbe" in words:
        return words["wbe"]
    return f" | {words.get('phrase', '')} | {words.get('hier', '')}"


@nb.njit(nogil=True, cache=True, inline="always")
def _put(out, pos, blob, start, end):
    for b in range(start, end):
        out[pos] = blob[b]
        pos += 1
    return pos


@nb.njit(nogil=True, cache=True, inline="always")
def _put_separator(out, pos):
    """Moses's field separator `|||` (written byte by byte: an array literal costs a compile)."""
    for k in range(3):
        out[pos + k] = 124
    return pos + 3


@nb.njit(nogil=True, cache=True, inline="always")
def _int_len(value):
    n = 1
    while value >= 10:
        value //= 10
        n += 1
    return n


@nb.njit(nogil=True, cache=True, inline="always")
def _put_int(out, pos, value):
    end = pos + _int_len(value)
    for k in range(end - 1, pos - 1, -1):
        out[k] = 48 + value % 10
        value //= 10
    return end


@nb.njit(nogil=True, cache=True)
def _render(rows, src_ids, src_offsets, tgt_ids, tgt_offsets, src_blob, src_tok, tgt_blob, tgt_tok,
            tails, tail_offsets, tail_index, align, align_offsets, align_order, with_alignment, with_target):
    """Lines `src ||| tgt |||` + (alignment points | ' ' + tail) + newline, as one byte array.

    Without the target (`f` reordering tables) a line is `src |||` + ' ' + tail.
    """
    total = 0
    for i in range(rows.shape[0]):
        s = rows[i, 0]
        for t in range(src_offsets[s] + rows[i, 1], src_offsets[s] + rows[i, 2]):
            total += src_tok[src_ids[t] + 1] - src_tok[src_ids[t]] + 1
        if with_target:
            total += 4
            for t in range(tgt_offsets[s] + rows[i, 3], tgt_offsets[s] + rows[i, 4]):
                total += tgt_tok[tgt_ids[t] + 1] - tgt_tok[tgt_ids[t]] + 1
        total += 3 + 1
        if with_alignment:
            for q in range(align_offsets[s], align_offsets[s + 1]):
                p = align_order[q]
                e = align[p, 1]
                if rows[i, 3] <= e < rows[i, 4]:
                    total += 2 + _int_len(align[p, 0] - rows[i, 1]) + _int_len(e - rows[i, 3])
        else:
            k = tail_index[i]
            total += 1 + tail_offsets[k + 1] - tail_offsets[k]
    out = np.empty(total, dtype=np.uint8)
    pos = 0
    for i in range(rows.shape[0]):
        s = rows[i, 0]
        for t in range(src_offsets[s] + rows[i, 1], src_offsets[s] + rows[i, 2]):
            pos = _put(out, pos, src_blob, src_tok[src_ids[t]], src_tok[src_ids[t] + 1])
            out[pos] = 32
            pos += 1
        if with_target:
            pos = _put_separator(out, pos)
            out[pos] = 32
            pos += 1
            for t in range(tgt_offsets[s] + rows[i, 3], tgt_offsets[s] + rows[i, 4]):
                pos = _put(out, pos, tgt_blob, tgt_tok[tgt_ids[t]], tgt_tok[tgt_ids[t] + 1])
                out[pos] = 32
                pos += 1
        pos = _put_separator(out, pos)
        if with_alignment:
            for q in range(align_offsets[s], align_offsets[s + 1]):
                p = align_order[q]
                e = align[p, 1]
                if rows[i, 3] <= e < rows[i, 4]:
                    out[pos] = 32
                    pos = _put_int(out, pos + 1, align[p, 0] - rows[i, 1])
                    out[pos] = 45
                    pos = _put_int(out, pos + 1, e - rows[i, 3])
        else:
            out[pos] = 32
            k = tail_index[i]
            pos = _put(out, pos + 1, tails, tail_offsets[k], tail_offsets[k + 1])
        out[pos] = 10
        pos += 1
    return out


_NO_ORDER = np.zeros(0, dtype=np.int64)


class MosesTextRenderer:
    """Renders Moses text lines for rows (sentence, src span, tgt span) of one corpus.

    `corpus` is a training.corpus.reading.Corpus (at extraction) or a store's corpus view.
    """

    def __init__(self, corpus, models: tuple[ExtractModel, ...] = ()):
        check_moses_expressible(models)
        self.corpus = corpus
        self.models = models
        self._src = encode_tokens(corpus.src_vocab)
        self._tgt = encode_tokens(corpus.tgt_vocab)

    @cached_property
    def _align_order(self) -> np.ndarray:
        """Target-major point order, the alignment file's order among points of one target word."""
        c = self.corpus
        sentence = np.repeat(np.arange(c.n_sentences), np.diff(c.align_offsets))
        return np.lexsort((c.align[:, 1], sentence)).astype(np.int64)

    def _render(self, rows, tails, tail_offsets, tail_index, with_alignment, with_target=True) -> bytes:
        c = self.corpus
        return _render(rows, c.src_ids, c.src_offsets, c.tgt_ids, c.tgt_offsets,
                       self._src[0], self._src[1], self._tgt[0], self._tgt[1],
                       tails, tail_offsets, tail_index, c.align, c.align_offsets,
                       self._align_order if with_alignment else _NO_ORDER, with_alignment,
                       with_target).tobytes()

    def extract_lines(self, rows: np.ndarray) -> bytes:
        """Moses's `extract` file lines (phrase pairs with their alignment)."""
        empty = np.zeros(0, dtype=np.uint8)
        return self._render(rows, empty, np.zeros(1, np.int64), np.zeros(len(rows), np.int64), True)

    def orientation_lines(self, rows: np.ndarray, labels: np.ndarray) -> bytes:
        """Moses's `extract.o` file lines."""
        if len(rows) == 0:
            return b""
        combos, tail_index = unique_rows(labels)
        return self.tailed_lines(rows, [orientation_tail(self.models, row) for row in combos.tolist()],
                                 tail_index)

    def tailed_lines(self, rows: np.ndarray, tails: list[str], tail_index: np.ndarray,
                     with_target: bool = True) -> bytes:
        """Lines `src ||| tgt ||| TAIL` (or `src ||| TAIL`), TAIL = tails[tail_index[row]]."""
        blob, offsets = encode_tokens(tails)
        return self._render(rows, blob, offsets, np.asarray(tail_index).reshape(-1).astype(np.int64),
                            False, with_target)
