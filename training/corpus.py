"""Read and validate a word-aligned parallel corpus into flat numpy arrays.

This is the one public entry for corpus files: every check a user can act on happens
here (line counts, malformed or out-of-range alignment points, invalid UTF-8,
over-long sentences), each error naming the file and the 1-based line. Everything
downstream (extraction kernels, the example store) trusts what comes out.

Tokenization is Moses's (`util::tokenize`): split on runs of spaces and tabs only, so a
token may contain any other character (an ideographic space, a carriage return).
Lines are split on `\\n` only, like `getline`. Vocabularies are built here with a
Python dict (once per corpus, never per example); sentences become int32 id arrays in
CSR form. It must not do extraction or labelling.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from training.errors import InputError

#: Spans are stored as int16, so no sentence may be longer than this.
HARD_MAX_SENTENCE_LENGTH = 32767
DEFAULT_MAX_SENTENCE_LENGTH = 1000
#: Moses's field separator; a token equal to it would make every text output ambiguous.
FIELD_SEPARATOR = "|||"

_POINT = re.compile(r"(\d+)-(\d+)")
_NON_ALIGNMENT_CHAR = re.compile(r"[^0-9\- \t\n]")


@dataclass(frozen=True)
class Corpus:
    """A validated corpus: vocabularies, token ids and alignment points, all CSR by sentence.

    Source is the side the decoder translates from (Moses's F, here Japanese); target is
    Moses's E. `align` keeps the alignment file's point order (Moses's extract text
    prints points in that order within a target word); exact duplicates are dropped.
    """

    src_vocab: list[str]
    tgt_vocab: list[str]
    src_ids: np.ndarray        # int32 [total source tokens]
    src_offsets: np.ndarray    # int64 [n + 1]
    tgt_ids: np.ndarray        # int32
    tgt_offsets: np.ndarray    # int64 [n + 1]
    align: np.ndarray          # int16 [m, 2] (source index, target index), sentence-relative
    align_offsets: np.ndarray  # int64 [n + 1]
    fingerprint: dict = field(default_factory=dict)

    @property
    def n_sentences(self) -> int:
        return int(self.src_offsets.shape[0] - 1)


def _read_lines(path: Path) -> tuple[list[str], str]:
    """Lines split on '\\n' only (like getline) and the file's SHA-256."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path) from exc
    digest = hashlib.sha256(data).hexdigest()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1)
        raise InputError(f"invalid UTF-8 at byte {column} of the line", path, line) from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines, digest


def tokenize(line: str) -> list[str]:
    """Moses's util::tokenize: runs of ' ' and '\\t' separate tokens; nothing else does."""
    if "\t" in line:
        line = line.replace("\t", " ")
    return [t for t in line.split(" ") if t]


def _encode_side(lines: list[str], path: Path, max_len: int) -> tuple[list[str], np.ndarray, np.ndarray]:
    tokens_per_line = [tokenize(line) for line in lines]
    lengths = np.fromiter((len(t) for t in tokens_per_line), dtype=np.int64, count=len(lines))
    too_long = np.flatnonzero(lengths > max_len)
    if too_long.size:
        i = int(too_long[0])
        raise InputError(f"sentence has {lengths[i]} tokens, more than --max-sentence-length {max_len}",
                         path, i + 1)
    offsets = np.zeros(len(lines) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    vocab: dict[str, int] = {}
    ids = np.fromiter((vocab.setdefault(t, len(vocab)) for toks in tokens_per_line for t in toks),
                      dtype=np.int32, count=int(offsets[-1]))
    if FIELD_SEPARATOR in vocab:
        bad = vocab[FIELD_SEPARATOR]
        line = int(np.searchsorted(offsets, np.flatnonzero(ids == bad)[0], side="right"))
        raise InputError(f"token {FIELD_SEPARATOR!r} is Moses's field separator and cannot be a word",
                         path, line)
    return list(vocab), ids, offsets


def _alignment_line_error(line: str, path: Path, lineno: int, n_src: int, n_tgt: int) -> InputError:
    """Find and describe the first problem of one alignment line (the slow, exact path)."""
    for token in tokenize(line):
        m = _POINT.fullmatch(token)
        if m is None:
            return InputError(f"malformed alignment point {token!r} (expected i-j, 0-based)", path, lineno)
        s, t = int(m.group(1)), int(m.group(2))
        if s >= n_src or t >= n_tgt:
            return InputError(f"alignment point {token} out of range: source has {n_src} tokens, "
                              f"target has {n_tgt}", path, lineno)
    return InputError("malformed alignment line", path, lineno)


def _parse_alignment(lines: list[str], path: Path, src_len: np.ndarray, tgt_len: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Vectorized parse of Pharaoh `i-j` points; any doubt falls back to the exact line check."""
    n = len(lines)
    counts = np.fromiter((len(tokenize(line)) for line in lines), dtype=np.int64, count=n)
    text = "\n".join(lines)
    bad_char = _NON_ALIGNMENT_CHAR.search(text)
    well_formed = bad_char is None and text.count("-") == int(counts.sum()) and not re.search(
        r"(^|[ \t\n])-|-($|[ \t\n])|-[0-9]*-", text)
    if not well_formed:
        for i, line in enumerate(lines):
            if any(_POINT.fullmatch(tok) is None for tok in tokenize(line)):
                raise _alignment_line_error(line, path, i + 1, int(src_len[i]), int(tgt_len[i]))
        raise AssertionError("alignment pre-check failed but no line is malformed")  # pragma: no cover
    numbers = np.array(text.replace("-", " ").split(), dtype=np.int64).reshape(-1, 2)
    sentence = np.repeat(np.arange(n, dtype=np.int64), counts)
    bad = np.flatnonzero((numbers[:, 0] >= src_len[sentence]) | (numbers[:, 1] >= tgt_len[sentence]))
    if bad.size:
        i = int(sentence[bad[0]])
        raise _alignment_line_error(lines[i], path, i + 1, int(src_len[i]), int(tgt_len[i]))
    # Drop exact duplicates, keeping the first occurrence and the file's order.
    width = HARD_MAX_SENTENCE_LENGTH + 1
    key = (sentence * width + numbers[:, 0]) * width + numbers[:, 1]
    _, first = np.unique(key, return_index=True)
    keep = np.sort(first)
    align = numbers[keep].astype(np.int16)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(sentence[keep], minlength=n), out=offsets[1:])
    return align, offsets


def read_corpus(src: str | os.PathLike, tgt: str | os.PathLike, align: str | os.PathLike,
                max_sentence_length: int = DEFAULT_MAX_SENTENCE_LENGTH) -> Corpus:
    """Read, validate and encode one corpus. Raises InputError naming file and line."""
    if not 1 <= max_sentence_length <= HARD_MAX_SENTENCE_LENGTH:
        raise InputError(f"--max-sentence-length must be in 1..{HARD_MAX_SENTENCE_LENGTH} "
                         f"(spans are stored as int16), got {max_sentence_length}")
    paths = [Path(src), Path(tgt), Path(align)]
    (src_lines, src_sha), (tgt_lines, tgt_sha), (align_lines, align_sha) = (_read_lines(p) for p in paths)
    n = len(src_lines)
    for path, lines in ((paths[1], tgt_lines), (paths[2], align_lines)):
        if len(lines) != n:
            raise InputError(f"has {len(lines)} lines but {paths[0]} has {n}: the files must be parallel",
                             path, min(len(lines), n) + 1)
    src_vocab, src_ids, src_offsets = _encode_side(src_lines, paths[0], max_sentence_length)
    tgt_vocab, tgt_ids, tgt_offsets = _encode_side(tgt_lines, paths[1], max_sentence_length)
    align_arr, align_offsets = _parse_alignment(align_lines, paths[2], np.diff(src_offsets), np.diff(tgt_offsets))
    combined = hashlib.sha256(f"{src_sha}\n{tgt_sha}\n{align_sha}\n".encode()).hexdigest()
    fingerprint = {
        "sha256": combined,
        "src": {"path": str(paths[0]), "sha256": src_sha},
        "tgt": {"path": str(paths[1]), "sha256": tgt_sha},
        "align": {"path": str(paths[2]), "sha256": align_sha},
        "sentences": n,
    }
    return Corpus(src_vocab, tgt_vocab, src_ids, src_offsets, tgt_ids, tgt_offsets,
                  align_arr, align_offsets, fingerprint)
