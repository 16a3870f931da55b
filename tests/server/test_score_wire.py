"""Score reads its request off the wire in one pass (server/score_wire.py, issue 46).

Specification: whatever bytes the pass accepts, it reads exactly as upb parses them (the
model name, version, context flag, token table and the nine index fields, in order);
whatever it does not fully understand it hands to upb (returns None), never refuses nor
reads differently. Repeated fields may come packed or not, split in pieces; unknown fields
are skipped; a later scalar replaces an earlier one.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from server.api import pb
from server.score_wire import scan_score_request
from server.service import varint_bytes as _varint
from training.modelfile.request import ARRAY_FIELDS, arrays_from_strings, flatten_fields

PAIRS = [(0, 1, ["a"], [(0, 0)]), (0, 2, ["b", "c"], [(0, 1), (1, 0)]), (1, 3, ["d"], [])]


def _request(**extra) -> pb.ScoreRequest:
    return pb.ScoreRequest(model="m", version=3, **arrays_from_strings(["x", "y", "z"], PAIRS), **extra)


def _agrees(raw: bytes) -> bool:
    """scan_score_request(raw) is None or equals upb's reading; True when it read it."""
    fields = scan_score_request(raw)
    if fields is None:
        return False
    message = pb.ScoreRequest.FromString(raw)  # whatever the scan accepts, upb accepts
    flat, bounds = flatten_fields(tuple(getattr(message, name) for name in ARRAY_FIELDS))
    assert (fields.model, fields.version, fields.context_blocks) == \
        (message.model, message.version, message.context_blocks)
    assert fields.token_bytes.tobytes() == message.token_bytes
    assert np.array_equal(fields.flat, flat) and np.array_equal(fields.bounds, bounds)
    assert fields.n_pairs == len(message.span_start) and fields.n_source == len(message.source)
    return True


def test_a_serialized_request_reads_as_upb_reads_it():
    assert _agrees(_request().SerializeToString())
    assert _agrees(_request(context_blocks=True).SerializeToString())
    assert _agrees(b"")  # every field at its default


def test_unpacked_split_unknown_and_repeated_scalars_read_as_upb_reads_them():
    base = _request().SerializeToString()
    unpacked = b"".join(_varint(5 << 3) + _varint(v) for v in (0, 2, 1))  # source, one varint each
    split = _varint(9 << 3 | 2) + _varint(1) + b"\x00"  # one more packed piece of target_tokens
    unknown = _varint(99 << 3 | 2) + _varint(3) + b"abc" + _varint(98 << 3 | 5) + bytes(4) + \
        _varint(97 << 3 | 1) + bytes(8) + _varint(96 << 3) + _varint(1 << 40)
    later_name = _varint(1 << 3 | 2) + _varint(2) + "né".encode()[:2]  # "n" + the first byte of é
    assert _agrees(base + unpacked + split + unknown)
    assert _agrees(base + _varint(1 << 3 | 2) + _varint(2) + b"m2" + _varint(2 << 3) + _varint(7))
    assert scan_score_request(base + later_name) is None  # not UTF-8: upb's to refuse


def test_what_the_scan_does_not_accept_goes_to_upb():
    base = _request().SerializeToString()
    for tail in (_varint(5 << 3) + _varint(1 << 32),  # past uint32: upb's reading decides
                 _varint(5 << 3 | 5) + bytes(4),  # a field of ours with another wire type
                 _varint(50 << 3 | 3),  # a group
                 _varint(4 << 3 | 2) + _varint(10) + b"\x01",  # truncated
                 b"\x80" * 11,  # not a varint
                 _varint(13 << 3) + _varint(2),  # a bool that is not 0 or 1
                 _varint(6 << 3),  # a tag and no value
                 b"\x00"):  # field 0
        assert scan_score_request(base + tail) is None, tail


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.binary(max_size=12),
                          st.tuples(st.integers(1, 14), st.integers(0, 5), st.integers(0, 1 << 34))), max_size=12))
def test_random_bytes_are_read_as_upb_reads_them_or_left_to_it(pieces):
    raw = bytearray(_request().SerializeToString())
    for piece in pieces:
        if isinstance(piece, bytes):
            raw += piece
        else:
            field, wire, value = piece
            raw += _varint(field << 3 | wire) + _varint(value)
    _agrees(bytes(raw))
