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
from training.errors import InputError, UsageError

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


def decode_utf8(data: bytes, path: Path, first_line: int = 0) -> str:
    """The text of `data` (lines `first_line`.. of the file); invalid UTF-8 is an InputError
    naming the line (1-based), the offending byte and its offset in that line (0-based,
    said so in the message)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = first_line + data.count(b"\n", 0, exc.start) + 1
        offset = exc.start - (data.rfind(b"\n", 0, exc.start) + 1)
        raise InputError(f"invalid UTF-8: byte {data[exc.start]:#04x} at byte offset {offset} (0-based) "
                         f"of line {line}", path, line) from None


@dataclass(frozen=True)
class SentenceRange:
    """Sentences [first, stop) of a corpus and the byte range [start, end) of each file holding them."""

    first: int
    stop: int
    src: tuple[int, int]
    tgt: tuple[int, int]
    align: tuple[int, int]


@dataclass(frozen=True)
class CorpusPlan:
    """A corpus cut into sentence ranges without reading it into memory: the three file
    paths, the ranges in order, the sentence count and the fingerprint (SHA-256s)."""

    src: Path
    tgt: Path
    align: Path
    ranges: tuple[SentenceRange, ...]
    n_sentences: int
    fingerprint: dict


_SCAN_BLOCK = 1 << 24


def _scan(path: Path, *, range_bytes: int | None = None, at_lines: list[int] = ()) -> tuple[int, str, list]:
    """One streamed pass over a file: (line count, SHA-256, cuts).

    Cuts are (line, byte offset) pairs at line starts: with `range_bytes`, the first
    line start at least that many bytes after the previous cut; otherwise the starts of
    the lines numbered in `at_lines` (0-based). Lines end at '\n' only; a last line
    without one still counts.
    """
    digest = hashlib.sha256()
    n_lines = position = 0
    last = 10
    cuts: list[tuple[int, int]] = []
    wanted = iter(at_lines)
    want = next(wanted, None)
    try:
        with open(path, "rb") as fh:
            while block := fh.read(_SCAN_BLOCK):
                digest.update(block)
                ends = np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == 10) + (position + 1)
                if range_bytes is not None:
                    while True:
                        i = int(np.searchsorted(ends, (cuts[-1][1] if cuts else 0) + range_bytes))
                        if i >= ends.size:
                            break
                        cuts.append((n_lines + i + 1, int(ends[i])))
                else:
                    while want is not None and want <= n_lines + ends.size:
                        cuts.append((want, int(ends[want - n_lines - 1])))
                        want = next(wanted, None)
                n_lines += int(ends.size)
                position += len(block)
                last = block[-1]
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path) from exc
    if last != 10:
        n_lines += 1
    return n_lines, digest.hexdigest(), cuts


def plan_corpus(src: str | os.PathLike, tgt: str | os.PathLike, align: str | os.PathLike, *,
                range_bytes: int | None = None) -> CorpusPlan:
    """Cut a corpus into sentence ranges of about `range_bytes` of source text (None: one
    range), checking that the three files have as many lines. Memory: one read block."""
    paths = [Path(src), Path(tgt), Path(align)]
    n, src_sha, src_cuts = _scan(paths[0], range_bytes=range_bytes or 1 << 62)
    src_cuts = [cut for cut in src_cuts if cut[0] < n]
    lines = [cut[0] for cut in src_cuts]
    scans = [_scan(p, at_lines=lines) for p in paths[1:]]
    for path, (count, _, _) in zip(paths[1:], scans):
        if count != n:
            raise InputError(f"has {count} lines but {paths[0]} has {n}: the files must be parallel",
                             path, min(count, n) + 1)
    sizes = [p.stat().st_size for p in paths]
    bounds = [[0, *lines, n]] + [[0, *(b for _, b in cuts), size]
                                 for cuts, size in zip([src_cuts] + [s[2] for s in scans], sizes)]
    ranges = tuple(SentenceRange(bounds[0][k], bounds[0][k + 1], *((b[k], b[k + 1]) for b in bounds[1:]))
                   for k in range(len(bounds[0]) - 1))
    shas = [src_sha] + [s[1] for s in scans]
    combined = hashlib.sha256("".join(f"{sha}\n" for sha in shas).encode()).hexdigest()
    fingerprint = {"sha256": combined, **{side: {"path": str(p), "sha256": sha}
                                          for side, p, sha in zip(("src", "tgt", "align"), paths, shas)},
                   "sentences": n}
    return CorpusPlan(*paths, ranges, n, fingerprint)


def _read_slice(path: Path, span: tuple[int, int], first_line: int) -> tuple[list[str], bytes]:
    """Lines of bytes [start, end) of a file, split on '\n' only (like getline)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(span[0])
            data = fh.read(span[1] - span[0])
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path) from exc
    text = decode_utf8(data, path, first_line)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines, data


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


def _encode_side(lines: list[str], path: Path, max_len: int,
                 first_line: int = 0) -> tuple[list[str], np.ndarray, np.ndarray]:
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
                             path, first_line + first + i + 1)
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
                         path, first_line + line)
    return list(vocab), ids, offsets


def _check_alignment(links: np.ndarray, offsets: np.ndarray, paths: tuple[Path, Path, Path], src_len: np.ndarray,
                     tgt_len: np.ndarray, first_line: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Every point inside its sentence (InputError naming the line); exact duplicates
    dropped, keeping the first occurrence and the file's order. `paths`: (source, target,
    alignment) files. A point on an empty line is that line's error, not the alignment's:
    Moses skips a pair with an empty side, but its alignment line must then be empty too."""
    n = src_len.shape[0]
    sentence = np.repeat(np.arange(n, dtype=np.int64), np.diff(offsets))
    bad = np.flatnonzero((links[:, 0] >= src_len[sentence]) | (links[:, 1] >= tgt_len[sentence]))
    if bad.size:
        i, (s, t) = int(sentence[bad[0]]), links[bad[0]]
        line = first_line + i + 1
        for side, length in ((0, src_len[i]), (1, tgt_len[i])):
            if length == 0:
                raise InputError(f"the line is empty, but line {line} of {paths[2].name} aligns points to it "
                                 f"({s}-{t}); a pair with an empty side needs an empty alignment line "
                                 "(is a line missing or two lines joined?)", paths[side], line)
        raise InputError(f"alignment point {s}-{t} out of range: source has {src_len[i]} tokens, "
                         f"target has {tgt_len[i]}", paths[2], line)
    width = HARD_MAX_SENTENCE_LENGTH + 1
    key = (sentence * width + links[:, 0]) * width + links[:, 1]
    _, first = np.unique(key, return_index=True)
    keep = np.sort(first)
    align_offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(sentence[keep], minlength=n), out=align_offsets[1:])
    return links[keep].astype(np.int16), align_offsets


def check_max_sentence_length(max_sentence_length: int) -> None:
    if not 1 <= max_sentence_length <= HARD_MAX_SENTENCE_LENGTH:
        raise UsageError(f"--max-sentence-length must be in 1..{HARD_MAX_SENTENCE_LENGTH} "
                         f"(spans are stored as int16), got {max_sentence_length}")


def read_range(plan: CorpusPlan, span: SentenceRange,
               max_sentence_length: int = DEFAULT_MAX_SENTENCE_LENGTH) -> Corpus:
    """Read and validate one sentence range. Its vocabularies are its own, in order of
    first use within the range (so ranges read in corpus order and merged in that order
    give the whole corpus's vocabularies); errors name the file's own line numbers."""
    (src_lines, _), (tgt_lines, _), (_, align_data) = (
        _read_slice(path, part, span.first)
        for path, part in ((plan.src, span.src), (plan.tgt, span.tgt), (plan.align, span.align)))
    src_vocab, src_ids, src_offsets = _encode_side(src_lines, plan.src, max_sentence_length, span.first)
    tgt_vocab, tgt_ids, tgt_offsets = _encode_side(tgt_lines, plan.tgt, max_sentence_length, span.first)
    links, link_offsets = parse_links(align_data, plan.align, span.first)  # line counts checked by the plan
    align_arr, align_offsets = _check_alignment(links, link_offsets, (plan.src, plan.tgt, plan.align),
                                                np.diff(src_offsets),
                                                np.diff(tgt_offsets), span.first)
    return Corpus(src_vocab, tgt_vocab, src_ids, src_offsets, tgt_ids, tgt_offsets, align_arr, align_offsets)


def read_corpus(src: str | os.PathLike, tgt: str | os.PathLike, align: str | os.PathLike,
                max_sentence_length: int = DEFAULT_MAX_SENTENCE_LENGTH) -> Corpus:
    """Read, validate and encode one whole corpus into memory. Raises InputError naming file
    and line. (Extraction streams it instead: plan_corpus + read_range.)"""
    check_max_sentence_length(max_sentence_length)
    plan = plan_corpus(src, tgt, align)
    corpus = read_range(plan, plan.ranges[0], max_sentence_length)
    return Corpus(**{**corpus.__dict__, "fingerprint": plan.fingerprint})
