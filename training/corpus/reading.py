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
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path

import numpy as np

from training.corpus.pharaoh import parse_links
from training.errors import InputError

#: Spans are stored as int16, so no sentence may be longer than this.
HARD_MAX_SENTENCE_LENGTH = 32767
DEFAULT_MAX_SENTENCE_LENGTH = 1000
#: Moses's field separator; a token equal to it would make every text output ambiguous.
FIELD_SEPARATOR = "|||"
_LINE_BATCH = 16384


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


def decode_utf8(data: bytes, path: Path) -> str:
    """The file's text; invalid UTF-8 is an InputError naming the line (1-based), the
    offending byte and its offset in that line (0-based, said so in the message)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        offset = exc.start - (data.rfind(b"\n", 0, exc.start) + 1)
        raise InputError(f"invalid UTF-8: byte {data[exc.start]:#04x} at byte offset {offset} (0-based) "
                         f"of line {line}", path, line) from None


def _read_lines(path: Path) -> tuple[list[str], str, bytes]:
    """Lines split on '\\n' only (like getline), the file's SHA-256 and its bytes."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path) from exc
    digest = hashlib.sha256(data).hexdigest()
    text = decode_utf8(data, path)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines, digest, data


def tokenize(line: str) -> list[str]:
    """Moses's util::tokenize: runs of ' ' and '\\t' separate tokens; nothing else does."""
    if "\t" in line:
        line = line.replace("\t", " ")
    return [t for t in line.split(" ") if t]


def _tokenize_all(lines: list[str]) -> list[list[str]]:
    """tokenize() of every line; plain single-spaced text takes a C-speed path."""
    text_is_plain = all("\t" not in line and "  " not in line and line[:1] != " " and line[-1:] != " "
                        for line in lines)
    if text_is_plain:
        return [line.split(" ") if line else [] for line in lines]
    return [tokenize(line) for line in lines]


def _encode_side(lines: list[str], path: Path, max_len: int) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Token ids (in order of first use) and CSR offsets, a batch of lines at a time.

    Batching bounds the transient Python token objects; only ids are kept.
    """
    vocab: dict[str, int] = {}
    id_parts: list[np.ndarray] = []
    length_parts: list[np.ndarray] = []
    for first in range(0, len(lines), _LINE_BATCH):
        tokens_per_line = _tokenize_all(lines[first:first + _LINE_BATCH])
        lengths = np.fromiter(map(len, tokens_per_line), dtype=np.int64, count=len(tokens_per_line))
        too_long = np.flatnonzero(lengths > max_len)
        if too_long.size:
            i = int(too_long[0])
            raise InputError(f"sentence has {lengths[i]} tokens, more than --max-sentence-length {max_len}",
                             path, first + i + 1)
        flat = list(chain.from_iterable(tokens_per_line))
        for token in dict.fromkeys(flat):
            vocab.setdefault(token, len(vocab))
        id_parts.append(np.fromiter(map(vocab.__getitem__, flat), dtype=np.int32, count=len(flat)))
        length_parts.append(lengths)
    ids = np.concatenate(id_parts) if id_parts else np.zeros(0, dtype=np.int32)
    offsets = np.zeros(len(lines) + 1, dtype=np.int64)
    if length_parts:
        np.cumsum(np.concatenate(length_parts), out=offsets[1:])
    if FIELD_SEPARATOR in vocab:
        bad = vocab[FIELD_SEPARATOR]
        line = int(np.searchsorted(offsets, np.flatnonzero(ids == bad)[0], side="right"))
        raise InputError(f"token {FIELD_SEPARATOR!r} is Moses's field separator and cannot be a word",
                         path, line)
    return list(vocab), ids, offsets


def _check_alignment(links: np.ndarray, offsets: np.ndarray, path: Path, src_len: np.ndarray,
                     tgt_len: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every point inside its sentence (InputError naming the line); exact duplicates
    dropped, keeping the first occurrence and the file's order."""
    n = src_len.shape[0]
    sentence = np.repeat(np.arange(n, dtype=np.int64), np.diff(offsets))
    bad = np.flatnonzero((links[:, 0] >= src_len[sentence]) | (links[:, 1] >= tgt_len[sentence]))
    if bad.size:
        i, (s, t) = int(sentence[bad[0]]), links[bad[0]]
        raise InputError(f"alignment point {s}-{t} out of range: source has {src_len[i]} tokens, "
                         f"target has {tgt_len[i]}", path, i + 1)
    width = HARD_MAX_SENTENCE_LENGTH + 1
    key = (sentence * width + links[:, 0]) * width + links[:, 1]
    _, first = np.unique(key, return_index=True)
    keep = np.sort(first)
    align_offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(sentence[keep], minlength=n), out=align_offsets[1:])
    return links[keep].astype(np.int16), align_offsets


def read_corpus(src: str | os.PathLike, tgt: str | os.PathLike, align: str | os.PathLike,
                max_sentence_length: int = DEFAULT_MAX_SENTENCE_LENGTH) -> Corpus:
    """Read, validate and encode one corpus. Raises InputError naming file and line."""
    if not 1 <= max_sentence_length <= HARD_MAX_SENTENCE_LENGTH:
        raise InputError(f"--max-sentence-length must be in 1..{HARD_MAX_SENTENCE_LENGTH} "
                         f"(spans are stored as int16), got {max_sentence_length}")
    paths = [Path(src), Path(tgt), Path(align)]
    (src_lines, src_sha, _), (tgt_lines, tgt_sha, _), (align_lines, align_sha, align_data) = (
        _read_lines(p) for p in paths)
    n = len(src_lines)
    for path, lines in ((paths[1], tgt_lines), (paths[2], align_lines)):
        if len(lines) != n:
            raise InputError(f"has {len(lines)} lines but {paths[0]} has {n}: the files must be parallel",
                             path, min(len(lines), n) + 1)
    src_vocab, src_ids, src_offsets = _encode_side(src_lines, paths[0], max_sentence_length)
    tgt_vocab, tgt_ids, tgt_offsets = _encode_side(tgt_lines, paths[1], max_sentence_length)
    links, link_offsets = parse_links(align_data, paths[2])  # one line per sentence: counted above
    align_arr, align_offsets = _check_alignment(links, link_offsets, paths[2], np.diff(src_offsets),
                                                np.diff(tgt_offsets))
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
