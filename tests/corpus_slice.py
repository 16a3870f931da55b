"""The first N sentence pairs of a corpus as a corpus of its own (many tests train on one)."""

from __future__ import annotations

from pathlib import Path

SUFFIXES = ("ja", "en", "align")


def write_corpus_slice(corpus: Path, n: int, out: Path, stem: str = "train") -> dict[str, Path]:
    """Copy the first `n` lines of corpus/train.{ja,en,align} to out/<stem>.{ja,en,align}.

    Returns the written paths by suffix. Bytes are copied as they are, so the slice is
    byte-identical to the head of the corpus (the golden files depend on that).
    """
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for suffix in SUFFIXES:
        with open(corpus / f"train.{suffix}", "rb") as fh:
            head = b"".join(line for _, line in zip(range(n), fh))
        paths[suffix] = out / f"{stem}.{suffix}"
        paths[suffix].write_bytes(head)
    return paths
