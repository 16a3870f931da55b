"""One scoring request (the proto's ScoreRequest arrays) -> a validated PairBatch.

The server calls `batch_from_request_arrays` with the packed fields of
proto/reordering/v1/reordering.proto; every check runs in one numba pass (no per-pair Python)
and a bad request raises InputError naming the proto field, which the server turns
into INVALID_ARGUMENT. This module must not score or extract features; it only builds
the PairBatch that training/features/templates.py reads, exactly as a store chunk would.

`arrays_from_strings` goes the other way for clients written in Python (tests,
benchmarks, the Python client): strings in, packed arrays out. FIELDS is the one list of
the request's fields; the server reads ARRAY_FIELDS off the wire in this order
(server/score_wire.py) and calls `batch_from_flat`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numba as nb
import numpy as np

from training.features.batch import PairBatch
from training.errors import InputError
from training.features.hashing import hash_token_blob

# Alignment points are stored as int16 phrase-relative indices.
MAX_PHRASE_LENGTH = int(np.iinfo(np.int16).max)

# Fields in the order of the proto (and of the kernel's arguments).
FIELDS = ("token_bytes", "token_offsets", "source", "span_start", "span_end", "target_offsets",
          "target_tokens", "align_offsets", "align_source", "align_target")
ARRAY_FIELDS = FIELDS[1:]  # the packed uint32 ones (all but the token table)
# Error codes of _check_and_build; (field, entry, value, limit) fill the message.
_OK, _EMPTY, _START, _MONOTONE, _LAST, _COUNT, _RANGE, _PARALLEL, _TOO_LONG, _NEGATIVE = range(10)
_RANGE_WHAT = {
    "source": "the number of tokens in the token table",
    "span_start": "its span_end: spans are non-empty, end exclusive",
    "span_end": "the source length + 1",
    "target_tokens": "the number of tokens in the token table",
    "align_source": "its pair's source phrase length",
    "align_target": "its pair's target phrase length",
}


def _message(code: int, field: str, entry: int, value: int, limit: int) -> str:
    if code == _EMPTY:
        return "needs at least one entry (0)"
    if code == _START:
        return f"must start at 0, starts at {value}"
    if code == _MONOTONE:
        return f"not monotone at entry {entry} ({limit} then {value})"
    if code == _LAST:
        return f"last entry is {value}, expected {limit} (the length of the array it indexes)"
    if code == _COUNT:
        return f"expected {limit} entries (phrase pairs + 1), got {value}"
    if code == _PARALLEL:
        other = {"span_end": "span_start", "align_target": "align_source"}[field]
        return f"{value} entries, {other} has {limit}"
    if code == _NEGATIVE:
        return f"entry {entry} is {value}: out of range (indices are unsigned 32-bit)"
    if code == _TOO_LONG:
        return f"phrase of pair {entry} has {value} words; at most {limit}"
    return f"entry {entry} is {value}, must be below {limit} ({_RANGE_WHAT[field]})"


@nb.njit(nogil=True, cache=True)
def _offsets_ok(field, off, total):
    if off.shape[0] == 0:
        return _EMPTY, field, 0, 0, 0
    if off[0] != 0:
        return _START, field, 0, off[0], 0
    for i in range(1, off.shape[0]):
        if off[i] < off[i - 1]:
            return _MONOTONE, field, i, off[i], off[i - 1]
    if off[off.shape[0] - 1] != total:
        return _LAST, field, off.shape[0] - 1, off[off.shape[0] - 1], total
    return _OK, 0, 0, 0, 0


@nb.njit(nogil=True, cache=True)
def _below(field, arr, limit):
    for i in range(arr.shape[0]):
        if arr[i] >= limit:
            return _RANGE, field, i, arr[i], limit
    return _OK, 0, 0, 0, 0


@nb.njit(nogil=True, cache=True)
def _negative(field, arr):
    for i in range(arr.shape[0]):
        if arr[i] < 0:
            return _NEGATIVE, field, i, arr[i], 0
    return _OK, 0, 0, 0, 0


@nb.njit(nogil=True, cache=True)
def _check(n_bytes, tok_off, source, starts, ends, tgt_off, tgt_tok, al_off, al_src, al_tgt):
    """First problem found as (code, field, entry, value, limit), or code _OK."""
    for field, arr in enumerate((tok_off, source, starts, ends, tgt_off, tgt_tok, al_off, al_src, al_tgt)):
        r = _negative(field + 1, arr)
        if r[0] != _OK:
            return r
    r = _offsets_ok(np.int64(1), tok_off, n_bytes)
    if r[0] != _OK:
        return r
    n_tokens = tok_off.shape[0] - 1
    r = _below(np.int64(2), source, n_tokens)
    if r[0] != _OK:
        return r
    n_pairs = starts.shape[0]
    if ends.shape[0] != n_pairs:
        return _PARALLEL, 4, 0, ends.shape[0], n_pairs
    for p in range(n_pairs):
        if starts[p] >= ends[p]:
            return _RANGE, 3, p, starts[p], ends[p]
        if ends[p] > source.shape[0]:
            return _RANGE, 4, p, ends[p], source.shape[0] + 1
        if ends[p] - starts[p] > MAX_PHRASE_LENGTH:
            return _TOO_LONG, 4, p, ends[p] - starts[p], MAX_PHRASE_LENGTH
    if tgt_off.shape[0] != n_pairs + 1:
        return _COUNT, 5, 0, tgt_off.shape[0], n_pairs + 1
    r = _offsets_ok(np.int64(5), tgt_off, tgt_tok.shape[0])
    if r[0] != _OK:
        return r
    for p in range(n_pairs):
        if tgt_off[p + 1] - tgt_off[p] > MAX_PHRASE_LENGTH:
            return _TOO_LONG, 5, p, tgt_off[p + 1] - tgt_off[p], MAX_PHRASE_LENGTH
    r = _below(np.int64(6), tgt_tok, n_tokens)
    if r[0] != _OK:
        return r
    if al_tgt.shape[0] != al_src.shape[0]:
        return _PARALLEL, 9, 0, al_tgt.shape[0], al_src.shape[0]
    if al_off.shape[0] != n_pairs + 1:
        return _COUNT, 7, 0, al_off.shape[0], n_pairs + 1
    r = _offsets_ok(np.int64(7), al_off, al_src.shape[0])
    if r[0] != _OK:
        return r
    for p in range(n_pairs):
        src_len = ends[p] - starts[p]
        tgt_len = tgt_off[p + 1] - tgt_off[p]
        for a in range(al_off[p], al_off[p + 1]):
            if al_src[a] >= src_len:
                return _RANGE, 8, a, al_src[a], src_len
            if al_tgt[a] >= tgt_len:
                return _RANGE, 9, a, al_tgt[a], tgt_len
    return _OK, 0, 0, 0, 0


def _indices(name: str, values) -> np.ndarray:
    """Any integer sequence (protobuf repeated field, list, ndarray) -> int64 (range checked in _check)."""
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise InputError(f"field {name}: expected a flat list of integers")
    if arr.dtype.kind not in "iu":
        if arr.size:
            raise InputError(f"field {name}: expected integers, got {arr.dtype}")
        return np.zeros(0, dtype=np.int64)
    return arr.astype(np.int64, copy=False)  # uint64 above 2**63 turns negative: refused as out of range


@nb.njit(nogil=True, cache=True)
def _check_and_build(blob, flat, bounds):
    """All fields arrive as one int64 array (flat[bounds[i]:bounds[i+1]] is field i+1), so the
    whole request costs one dispatch. Returns the error tuple and, when it is _OK, the arrays."""
    tok_off = flat[bounds[0]:bounds[1]]
    source = flat[bounds[1]:bounds[2]]
    starts = flat[bounds[2]:bounds[3]]
    ends = flat[bounds[3]:bounds[4]]
    tgt_off = flat[bounds[4]:bounds[5]]
    tgt_tok = flat[bounds[5]:bounds[6]]
    al_off = flat[bounds[6]:bounds[7]]
    al_src = flat[bounds[7]:bounds[8]]
    al_tgt = flat[bounds[8]:bounds[9]]
    err = _check(blob.shape[0], tok_off, source, starts, ends, tgt_off, tgt_tok, al_off, al_src, al_tgt)
    n_pairs = starts.shape[0] if err[0] == _OK else 0
    n_src = source.shape[0] if err[0] == _OK else 0
    n_tgt = tgt_tok.shape[0] if err[0] == _OK else 0
    n_al = al_src.shape[0] if err[0] == _OK else 0
    src_tokens = np.empty(n_src, dtype=np.uint64)
    tgt_tokens = np.empty(n_tgt, dtype=np.uint64)
    src_start = np.empty(n_pairs, dtype=np.int32)
    src_end = np.empty(n_pairs, dtype=np.int32)
    a_src = np.empty(n_al, dtype=np.int16)
    a_tgt = np.empty(n_al, dtype=np.int16)
    if err[0] == _OK:
        hashes = hash_token_blob(blob, tok_off)
        for i in range(n_src):
            src_tokens[i] = hashes[source[i]]
        for i in range(n_tgt):
            tgt_tokens[i] = hashes[tgt_tok[i]]
        for p in range(n_pairs):
            src_start[p] = starts[p]
            src_end[p] = ends[p]
        for a in range(n_al):
            a_src[a] = al_src[a]
            a_tgt[a] = al_tgt[a]
    return err, src_tokens, tgt_tokens, src_start, src_end, a_src, a_tgt, tgt_off.copy(), al_off.copy()


def flatten_fields(fields: tuple) -> tuple[np.ndarray, np.ndarray]:
    """The nine index fields as one int64 array + bounds; InputError naming a field that is not integers."""
    try:
        sizes = [len(f) for f in fields]
        flat = np.concatenate(fields, dtype=np.int64, casting="same_kind")  # one conversion for all
        if flat.ndim != 1 or flat.shape[0] != sum(sizes):
            raise ValueError
    except (TypeError, ValueError):
        fields = tuple(_indices(name, f) for name, f in zip(ARRAY_FIELDS, fields))  # slow path: find the culprit
        sizes = [f.shape[0] for f in fields]
        flat = np.concatenate(fields) if fields else np.zeros(0, np.int64)
    bounds = np.zeros(len(fields) + 1, dtype=np.int64)
    np.cumsum(sizes, out=bounds[1:])
    return flat, bounds


def batch_from_request_arrays(token_bytes, token_offsets, source, span_start, span_end, target_offsets,
                              target_tokens, align_offsets, align_source, align_target) -> PairBatch:
    """Validate one sentence's phrase pairs and hash its token table into a PairBatch."""
    if not isinstance(token_bytes, (bytes, bytearray, memoryview)):
        raise InputError(f"field token_bytes: expected bytes, got {type(token_bytes).__name__}")
    flat, bounds = flatten_fields((token_offsets, source, span_start, span_end, target_offsets, target_tokens,
                             align_offsets, align_source, align_target))
    return batch_from_flat(np.frombuffer(token_bytes, dtype=np.uint8), flat, bounds)


def batch_from_flat(blob: np.ndarray, flat: np.ndarray, bounds: np.ndarray) -> PairBatch:
    """The same from the token table as uint8 and the nine index fields as one int64 array
    (`flat[bounds[i]:bounds[i + 1]]` is ARRAY_FIELDS[i]), as server/score_wire.py reads them
    off the wire."""
    (code, field, entry, value, limit), src_tokens, tgt_tokens, src_start, src_end, a_src, a_tgt, tgt_off, a_off = \
        _check_and_build(blob, flat, bounds)
    if code != _OK:
        name = FIELDS[field]
        raise InputError(f"field {name}: {_message(code, name, int(entry), int(value), int(limit))}")
    return PairBatch(
        src_tokens=src_tokens,
        src_offsets=np.array([0, src_tokens.shape[0]], dtype=np.int64),
        pair_sentence=np.zeros(src_start.shape[0], dtype=np.int32),
        src_start=src_start, src_end=src_end,
        tgt_tokens=tgt_tokens, tgt_offsets=tgt_off,
        align_src=a_src, align_tgt=a_tgt, align_offsets=a_off,
    )


Pair = tuple[int, int, Sequence[str], Sequence[tuple[int, int]]]


def arrays_from_strings(source: Sequence[str], pairs: Sequence[Pair]) -> dict[str, object]:
    """Strings -> the ScoreRequest fields (a dict of packed arrays, keyed by proto field name).

    Each pair is (span_start, span_end, target tokens, [(src, tgt), ...] phrase-relative
    alignment). Tokens are stored once in the token table.
    """
    table: dict[str, int] = {}

    def ids(tokens: Sequence[str]) -> list[int]:
        return [table.setdefault(t, len(table)) for t in tokens]

    src_ids = ids(source)
    target_offsets, target_tokens, align_offsets, a_src, a_tgt = [0], [], [0], [], []
    for _, _, target, alignment in pairs:
        target_tokens.extend(ids(target))
        target_offsets.append(len(target_tokens))
        for i, j in alignment:
            a_src.append(i)
            a_tgt.append(j)
        align_offsets.append(len(a_src))
    encoded = [t.encode("utf-8") for t in table]
    token_offsets = np.zeros(len(encoded) + 1, dtype=np.uint32)
    np.cumsum([len(b) for b in encoded], out=token_offsets[1:])
    u32 = np.uint32
    return {
        "token_bytes": b"".join(encoded),
        "token_offsets": token_offsets,
        "source": np.array(src_ids, dtype=u32),
        "span_start": np.array([p[0] for p in pairs], dtype=u32),
        "span_end": np.array([p[1] for p in pairs], dtype=u32),
        "target_offsets": np.array(target_offsets, dtype=u32),
        "target_tokens": np.array(target_tokens, dtype=u32),
        "align_offsets": np.array(align_offsets, dtype=u32),
        "align_source": np.array(a_src, dtype=u32),
        "align_target": np.array(a_tgt, dtype=u32),
    }


def batch_from_strings(source: Sequence[str], pairs: Sequence[Pair]) -> PairBatch:
    """Convenience for tests and benchmarks: strings -> request arrays -> PairBatch."""
    return batch_from_request_arrays(**arrays_from_strings(source, pairs))
