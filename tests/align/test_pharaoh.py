"""Pharaoh text <-> flat link arrays: round trips, the real corpus file, syntax errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from training.errors import InputError
from training.corpus.pharaoh import format_links, parse_links


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)), max_size=8), max_size=8))
def test_round_trip(sentences):
    links = np.array([l for s in sentences for l in s], dtype=np.int32).reshape(-1, 2)
    offsets = np.cumsum([0] + [len(s) for s in sentences])
    text = format_links(links, offsets)
    assert text == "".join(" ".join(f"{i}-{j}" for i, j in s) + "\n" for s in sentences).encode()
    got_links, got_offsets = parse_links(text, "x")
    assert got_links.tolist() == links.tolist()
    assert got_offsets.tolist() == offsets.tolist()


def test_real_alignment_file_round_trips_byte_for_byte(ja_en_dir):
    data = (ja_en_dir / "train.align").read_bytes()
    links, offsets = parse_links(data, "train.align")
    assert offsets.shape[0] - 1 == data.count(b"\n") == 50_000
    assert format_links(links, offsets) == data


def test_lenient_spacing_empty_lines_and_missing_final_newline():
    links, offsets = parse_links(b"0-1  2-3\t\n\n4-5", "x")
    assert links.tolist() == [[0, 1], [2, 3], [4, 5]]
    assert offsets.tolist() == [0, 2, 2, 3]
    assert parse_links(b"", "x")[1].tolist() == [0]


@pytest.mark.parametrize("text, line", [
    (b"0-1\n1-\n", 2),
    (b"0-1\n\n-1\n", 3),
    (b"0-1 2:3\n", 1),
    (b"0-1-2\n", 1),
    (b"0-1x\n", 1),
    (b"0 1\n", 1),
    (b"01234567890-1\n", 1),
    (b"0-1\n0-1\r\n", 2),
])
def test_malformed_links_name_the_line(text, line):
    with pytest.raises(InputError, match=rf"^a\.align:{line}: "):
        parse_links(text, "a.align")


def test_a_carriage_return_is_named_as_such():
    """Moses splits links on spaces and tabs only: '0-1\\r' is not a link (one rule for every reader)."""
    with pytest.raises(InputError, match=r"a\.align:1: malformed alignment point '0-1\\r'.*carriage return"):
        parse_links(b"0-1\r\n", "a.align")
