"""One scoring request (the proto's ScoreRequest arrays) -> a validated PairBatch.

The server calls `batch_from_request_arrays` with the packed fields of
proto/reordering/v1/reordering.proto; every check is vectorized (no per-pair Python)
and a bad request raises InputError naming the proto field, which the server turns
into INVALID_ARGUMENT. This module must not score or extract features; it only builds
the PairBatch that training/features.py reads, exactly as a store chunk would.

`request_arrays` does the reverse for clients written in Python (tests, benchmarks,
the Python client): strings in, packed arrays out.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from training.batch import PairBatch
from training.errors import InputError
from training.hashing import hash_token_blob

# Alignment points are stored as int16 phrase-relative indices.
MAX_PHRASE_LENGTH = np.iinfo(np.int16).max


def _indices(name: str, values) -> np.ndarray:
    """Any integer sequence (protobuf repeated field, list, ndarray) -> int64, all >= 0."""
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise InputError(f"field {name}: expected a flat list of integers")
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.dtype.kind not in "iu":
        raise InputError(f"field {name}: expected integers, got {arr.dtype}")
    if arr.dtype == np.uint64 and int(arr.max()) > np.iinfo(np.int64).max:
        raise InputError(f"field {name}: value {int(arr.max())} out of range")
    arr = arr.astype(np.int64, copy=False)
    if int(arr.min()) < 0:
        raise InputError(f"field {name}: negative value {int(arr.min())}")
    return arr


def _offsets(name: str, values, n_items: int, total: int, what: str) -> np.ndarray:
    arr = _indices(name, values)
    if arr.shape[0] != n_items + 1:
        raise InputError(f"field {name}: expected {n_items + 1} entries ({what} + 1), got {arr.shape[0]}")
    if arr[0] != 0:
        raise InputError(f"field {name}: must start at 0, starts at {int(arr[0])}")
    bad = np.flatnonzero(arr[1:] < arr[:-1])
    if bad.size:
        i = int(bad[0])
        raise InputError(f"field {name}: not monotone at entry {i + 1} ({int(arr[i])} then {int(arr[i + 1])})")
    if arr[-1] != total:
        raise InputError(f"field {name}: last entry is {int(arr[-1])}, expected {total}")
    return arr


def _below(name: str, arr: np.ndarray, limit, what: str) -> None:
    bad = np.flatnonzero(arr >= limit)
    if bad.size:
        i = int(bad[0])
        bound = limit if np.isscalar(limit) else int(limit[i])
        raise InputError(f"field {name}: entry {i} is {int(arr[i])}, must be below {bound} ({what})")


def batch_from_request_arrays(token_bytes, token_offsets, source, span_start, span_end, target_offsets,
                              target_tokens, align_offsets, align_source, align_target) -> PairBatch:
    """Validate one sentence's phrase pairs and hash its token table into a PairBatch."""
    if not isinstance(token_bytes, (bytes, bytearray, memoryview)):
        raise InputError(f"field token_bytes: expected bytes, got {type(token_bytes).__name__}")
    blob = np.frombuffer(token_bytes, dtype=np.uint8)
    offsets = _indices("token_offsets", token_offsets)
    if offsets.shape[0] == 0:
        raise InputError("field token_offsets: needs at least one entry (0)")
    n_tokens = offsets.shape[0] - 1
    offsets = _offsets("token_offsets", offsets, n_tokens, blob.shape[0], "tokens")

    src = _indices("source", source)
    _below("source", src, n_tokens, "the number of tokens in the token table")
    starts = _indices("span_start", span_start)
    ends = _indices("span_end", span_end)
    n_pairs = starts.shape[0]
    if ends.shape[0] != n_pairs:
        raise InputError(f"field span_end: {ends.shape[0]} entries, span_start has {n_pairs}")
    _below("span_start", starts, ends, "its span_end: spans are non-empty, end exclusive")
    _below("span_end", ends, src.shape[0] + 1, "the source length + 1")

    tgt_tok = _indices("target_tokens", target_tokens)
    tgt_off = _offsets("target_offsets", target_offsets, n_pairs, tgt_tok.shape[0], "phrase pairs")
    _below("target_tokens", tgt_tok, n_tokens, "the number of tokens in the token table")

    a_src = _indices("align_source", align_source)
    a_tgt = _indices("align_target", align_target)
    if a_tgt.shape[0] != a_src.shape[0]:
        raise InputError(f"field align_target: {a_tgt.shape[0]} entries, align_source has {a_src.shape[0]}")
    a_off = _offsets("align_offsets", align_offsets, n_pairs, a_src.shape[0], "phrase pairs")
    src_len = ends - starts
    tgt_len = np.diff(tgt_off)
    _below("span_end", src_len, MAX_PHRASE_LENGTH + 1, f"source phrases are at most {MAX_PHRASE_LENGTH} words")
    _below("target_offsets", tgt_len, MAX_PHRASE_LENGTH + 1, f"target phrases are at most {MAX_PHRASE_LENGTH} words")
    points = np.diff(a_off)
    _below("align_source", a_src, np.repeat(src_len, points), "its pair's source phrase length")
    _below("align_target", a_tgt, np.repeat(tgt_len, points), "its pair's target phrase length")

    hashes = hash_token_blob(blob, offsets)
    return PairBatch(
        src_tokens=hashes[src],
        src_offsets=np.array([0, src.shape[0]], dtype=np.int64),
        pair_sentence=np.zeros(n_pairs, dtype=np.int32),
        src_start=starts.astype(np.int32),
        src_end=ends.astype(np.int32),
        tgt_tokens=hashes[tgt_tok],
        tgt_offsets=tgt_off,
        align_src=a_src.astype(np.int16),
        align_tgt=a_tgt.astype(np.int16),
        align_offsets=a_off,
    )


Pair = tuple[int, int, Sequence[str], Sequence[tuple[int, int]]]


def request_arrays(source: Sequence[str], pairs: Sequence[Pair]) -> dict[str, object]:
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
    return batch_from_request_arrays(**request_arrays(source, pairs))
