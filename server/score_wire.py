"""A ScoreRequest's bytes -> its fields, without building a protobuf message (issue 46).

Score's request is mostly nine packed `repeated uint32` fields. Parsing it with upb and
then turning each repeated field into a numpy array cost more than validating and hashing
the request (RESULTS, issue 46: about 150 µs of a 459-pair sentence's handling, the
message's nine containers converted one by one). `scan_score_request` reads the wire
format once, in one numba pass, straight into the int64 array (and bounds) that
training.modelfile.request.batch_from_flat takes, and returns the scalar fields.

It only ever accepts: bytes it does not fully understand (groups, a field of ours with an
unexpected wire type, a varint past its field's range, a truncated field, a model name
that is not UTF-8) return None, and the caller parses them with upb
(server.guard.parse_request), which accepts or refuses them and names the error. An
unknown field is skipped, as upb does; a repeated field may come packed or not, in any
number of pieces; a later scalar replaces an earlier one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

from training.modelfile.request import ARRAY_FIELDS

_FIRST_ARRAY = 4  # token_offsets = 4 ... align_target = 12, in ARRAY_FIELDS order
_N_ARRAYS = len(ARRAY_FIELDS)
_U32 = 1 << 32


@dataclass(frozen=True)
class ScoreFields:
    """What Score reads of its request: the scalar fields, the token table and the nine
    index fields as one int64 array (`flat[bounds[i]:bounds[i + 1]]` is ARRAY_FIELDS[i])."""

    model: str
    version: int
    context_blocks: bool
    token_bytes: np.ndarray  # uint8
    flat: np.ndarray
    bounds: np.ndarray

    @property
    def n_pairs(self) -> int:
        return int(self.bounds[3] - self.bounds[2])  # span_start

    @property
    def n_source(self) -> int:
        return int(self.bounds[2] - self.bounds[1])  # source


@nb.njit(nogil=True, cache=True)
def _varint(buf, pos, end):
    """(value, next position); next position -1 when truncated, longer than 10 bytes or
    past 64 bits. A value past 63 bits comes back negative: callers bound what they accept."""
    value = 0
    shift = 0
    for i in range(pos, min(pos + 10, end)):
        b = buf[i]
        if i == pos + 9 and b > 1:  # past 64 bits
            return 0, -1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, i + 1
        shift += 7
    return 0, -1


@nb.njit(nogil=True, cache=True)
def _walk(buf, flat, bounds, fill):
    """One pass over the message. fill=False: count each index field's values into
    bounds[field + 1]; fill=True: write them into flat at bounds. Returns ok, then the
    model's and token table's (start, end) and version and context_blocks as int64."""
    n = buf.shape[0]
    pos = 0
    model_a = model_b = tok_a = tok_b = 0
    version = 0
    context = 0
    at = bounds.copy()
    while pos < n:
        tag, pos = _varint(buf, pos, n)
        if pos < 0 or tag >= _U32:
            return False, 0, 0, 0, 0, 0, 0
        field = tag >> 3
        wire = tag & 7
        if field == 0:
            return False, 0, 0, 0, 0, 0, 0
        if _FIRST_ARRAY <= field < _FIRST_ARRAY + _N_ARRAYS:
            k = field - _FIRST_ARRAY
            if wire == 0:  # one value
                stop = n
            elif wire == 2:  # packed: values up to the piece's length
                length, pos = _varint(buf, pos, n)
                if pos < 0 or length < 0 or length > n - pos:
                    return False, 0, 0, 0, 0, 0, 0
                stop = pos + length
            else:
                return False, 0, 0, 0, 0, 0, 0
            while pos < stop or wire == 0:
                value, pos = _varint(buf, pos, stop)
                if pos < 0 or value < 0 or value >= _U32:
                    return False, 0, 0, 0, 0, 0, 0
                if fill:
                    flat[at[k]] = value
                    at[k] += 1
                else:
                    bounds[k + 1] += 1
                if wire == 0:
                    break
            continue
        if wire == 0:
            value, pos = _varint(buf, pos, n)
            if pos < 0:
                return False, 0, 0, 0, 0, 0, 0
            if field == 2:
                if value < 0:  # a version past 2**63: upb decides
                    return False, 0, 0, 0, 0, 0, 0
                version = value
            elif field == 13:
                if value != 0 and value != 1:
                    return False, 0, 0, 0, 0, 0, 0
                context = value
            elif field <= 3:
                return False, 0, 0, 0, 0, 0, 0
        elif wire == 2:
            length, pos = _varint(buf, pos, n)
            if pos < 0 or length < 0 or length > n - pos:
                return False, 0, 0, 0, 0, 0, 0
            if field == 1:
                model_a, model_b = pos, pos + length
            elif field == 3:
                tok_a, tok_b = pos, pos + length
            elif field <= 13:
                return False, 0, 0, 0, 0, 0, 0
            pos += length
        elif wire == 1 or wire == 5:
            if field <= 13:
                return False, 0, 0, 0, 0, 0, 0
            pos += 8 if wire == 1 else 4
            if pos > n:
                return False, 0, 0, 0, 0, 0, 0
        else:  # groups, or not a wire type
            return False, 0, 0, 0, 0, 0, 0
    return True, model_a, model_b, tok_a, tok_b, version, context


@nb.njit(nogil=True, cache=True)
def _scan(buf):
    bounds = np.zeros(_N_ARRAYS + 1, dtype=np.int64)
    flat = np.empty(0, dtype=np.int64)
    ok, model_a, model_b, tok_a, tok_b, version, context = _walk(buf, flat, bounds, False)
    if not ok:
        return False, flat, bounds, 0, 0, 0, 0, 0, 0
    for k in range(_N_ARRAYS):
        bounds[k + 1] += bounds[k]
    flat = np.empty(bounds[_N_ARRAYS], dtype=np.int64)
    _walk(buf, flat, bounds, True)
    return True, flat, bounds, model_a, model_b, tok_a, tok_b, version, context


def scan_score_request(raw: bytes) -> ScoreFields | None:
    """The request's fields, or None when upb must parse these bytes (module docstring)."""
    buf = np.frombuffer(raw, dtype=np.uint8)
    ok, flat, bounds, model_a, model_b, tok_a, tok_b, version, context = _scan(buf)
    if not ok:
        return None
    try:
        model = raw[model_a:model_b].decode("utf-8")
    except UnicodeDecodeError:
        return None
    return ScoreFields(model, int(version), bool(context), buf[tok_a:tok_b], flat, bounds)
