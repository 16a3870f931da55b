"""Fixtures for extraction tests: the 2k-line ja-en slice the Moses golden files were made from."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from training.corpus import Corpus, read_corpus

GOLDEN_LINES = 2000


@pytest.fixture(scope="session")
def slice_2k(ja_en_dir: Path, tmp_path_factory) -> dict[str, Path]:
    """First 2000 lines of train.{ja,en,align}: source=ja (Moses's F), target=en (E)."""
    out = tmp_path_factory.mktemp("ja-en-2k")
    paths = {}
    for side, ext in (("src", "ja"), ("tgt", "en"), ("align", "align")):
        with open(ja_en_dir / f"train.{ext}", "rb") as fh:
            lines = [next(fh) for _ in range(GOLDEN_LINES)]
        paths[side] = out / f"train.{ext}"
        paths[side].write_bytes(b"".join(lines))
    return paths


@pytest.fixture(scope="session")
def corpus_2k(slice_2k) -> Corpus:
    return read_corpus(slice_2k["src"], slice_2k["tgt"], slice_2k["align"])


def golden_lines(path: Path) -> list[bytes]:
    """A golden file's lines, bytewise sorted (what `LC_ALL=C sort` gives)."""
    return sorted(gzip.decompress(path.read_bytes()).split(b"\n")[:-1])


def sorted_lines(data: bytes) -> list[bytes]:
    return sorted(data.split(b"\n")[:-1])
