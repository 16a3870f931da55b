"""Fixtures for extraction tests: the 2k-line ja-en slice the Moses golden files were made from."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from training.corpus.reading import Corpus, read_corpus


@pytest.fixture(scope="session")
def corpus_2k(slice_2k) -> Corpus:
    return read_corpus(slice_2k["src"], slice_2k["tgt"], slice_2k["align"])


def golden_lines(path: Path) -> list[bytes]:
    """A golden file's lines, bytewise sorted (what `LC_ALL=C sort` gives)."""
    return sorted(gzip.decompress(path.read_bytes()).split(b"\n")[:-1])


def sorted_lines(data: bytes) -> list[bytes]:
    return sorted(data.split(b"\n")[:-1])
