"""Pharaoh word-alignment text ("0-1 2-3", one line per sentence pair) <-> flat arrays.

Alignments of a whole corpus live as links int32 [k, 2] (0-based src, tgt) plus offsets
int64 [n_sentences + 1]; this module turns that shape into text and back in numba, so a
50k-line corpus costs no per-link Python objects. It is the project's one Pharaoh
parser (corpus reading for extraction and the aligner's outputs both use it). Its rules
are Moses's tokenization: links are separated by runs of spaces and tabs only, so a
carriage return (a Windows line ending) makes a line malformed, as it would make the
token unreadable for Moses's extract. It only checks syntax: whether an index fits its
sentence is the caller's business (it knows the sentence lengths).
"""

from __future__ import annotations

import os
import re

import numba
import numpy as np

from training.errors import InputError

_MAX_DIGITS = 9  # indices stay far below 10**9; more digits is garbage, not a sentence
_POINT = re.compile(r"\d{1,%d}-\d{1,%d}" % (_MAX_DIGITS, _MAX_DIGITS))



@numba.njit(nogil=True, cache=True)
def _parse(data):
    """(links, k, offsets, code, line): the first k rows of links are the parsed points;
    code 0, or 1 / 2 (malformed, too many digits) at 1-based `line`. parse_links cuts
    links to k: a slice copy here would compile numba's array copy (0.3 CPU s cold)."""
    n = data.shape[0]
    n_lines = 0
    for p in range(n):
        if data[p] == 10:
            n_lines += 1
    if n > 0 and data[n - 1] != 10:
        n_lines += 1
    links = np.empty((n // 4 + 1, 2), dtype=np.int32)  # a link takes >= 4 bytes with its separator
    offsets = np.zeros(n_lines + 1, dtype=np.int64)
    k = 0
    line = 0
    p = 0
    while p < n:
        c = data[p]
        if c == 10:
            line += 1
            offsets[line] = k
            p += 1
            continue
        if c == 32 or c == 9:
            p += 1
            continue
        for side in range(2):
            value = 0
            digits = 0
            while p < n and 48 <= data[p] <= 57:
                value = value * 10 + (data[p] - 48)
                digits += 1
                p += 1
                if digits > _MAX_DIGITS:
                    return links, 0, offsets, 2, line + 1
            if digits == 0:
                return links, 0, offsets, 1, line + 1
            links[k, side] = value
            if side == 0:
                if p >= n or data[p] != 45:
                    return links, 0, offsets, 1, line + 1
                p += 1
        if p < n and not (data[p] == 32 or data[p] == 9 or data[p] == 10):
            return links, 0, offsets, 1, line + 1
        k += 1
    if line < n_lines:
        offsets[n_lines] = k
    return links, k, offsets, 0, 0


def parse_links(data: bytes, path: str | os.PathLike, first_line: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Parse Pharaoh text into (links int32 [k, 2], offsets int64 [n_lines + 1]).

    `path` only names the file in the error, which gives the 1-based line (counted from
    `first_line`, the file line `data` starts at, when it is a slice of the file).
    """
    links, k, offsets, code, line = _parse(np.frombuffer(data, dtype=np.uint8))
    links = links[:k].copy()
    if code:
        raise InputError(_describe(data, line, code), path, first_line + line)
    return links, offsets


def _describe(data: bytes, line: int, code: int) -> str:
    """What is wrong with 1-based `line` (the slow path, run once for the error)."""
    text = data.split(b"\n")[line - 1].decode("utf-8", "replace")
    for token in text.replace("\t", " ").split(" "):
        if token and not _POINT.fullmatch(token):
            hint = " (a carriage return: convert Windows line endings)" if "\r" in token else ""
            return f"malformed alignment point {token!r} (expected i-j, 0-based){hint}"
    if code == 2:
        return f"alignment index has more than {_MAX_DIGITS} digits"
    return "malformed alignment line (expected links i-j separated by spaces)"


@numba.njit(nogil=True, cache=True)
def _put_int(buf, p, value):
    if value == 0:
        buf[p] = 48
        return p + 1
    width = 0
    v = value
    while v > 0:
        width += 1
        v //= 10
    for d in range(width - 1, -1, -1):
        buf[p + d] = 48 + value % 10
        value //= 10
    return p + width


@numba.njit(nogil=True, cache=True)
def _format(links, offsets):
    n_sent = offsets.shape[0] - 1
    buf = np.empty(links.shape[0] * 2 * (_MAX_DIGITS + 1) + n_sent, dtype=np.uint8)
    p = 0
    for k in range(n_sent):
        for q in range(offsets[k], offsets[k + 1]):
            if q > offsets[k]:
                buf[p] = 32
                p += 1
            p = _put_int(buf, p, links[q, 0])
            buf[p] = 45
            p += 1
            p = _put_int(buf, p, links[q, 1])
        buf[p] = 10
        p += 1
    return buf[:p]


def format_links(links: np.ndarray, offsets: np.ndarray) -> bytes:
    """Pharaoh text for a corpus alignment: one line per sentence, links space-separated."""
    links = np.ascontiguousarray(links, dtype=np.int64).reshape(-1, 2)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    return _format(links, offsets).tobytes()
