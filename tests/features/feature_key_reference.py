"""The feature-key scheme in plain Python, written from its description, for the tests to check against.

Independent of training/features/hashing.py and training/features/templates.py on purpose: if either
changes a key, the tests that compare against this module fail.
"""

from __future__ import annotations

MASK = (1 << 64) - 1


def fnv(text: str) -> int:
    """FNV-1a 64 of the UTF-8 bytes."""
    h = 0xCBF29CE484222325
    for byte in text.encode("utf-8"):
        h = ((h ^ byte) * 0x100000001B3) & MASK
    return h


def combine(h: int, x: int) -> int:
    return (h ^ ((x + 0x9E3779B97F4A7C15 + ((h << 6) & MASK) + (h >> 2)) & MASK)) & MASK


def finalize(h: int) -> int:
    h = ((h ^ (h >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    h = ((h ^ (h >> 27)) * 0x94D049BB133111EB) & MASK
    return h ^ (h >> 31)


def tag(name: str) -> int:
    return fnv("feature-template/v1/" + name)


def key(name: str, *tokens: str) -> int:
    """A base feature: template tag folded with the token hashes."""
    h = tag(name)
    for t in tokens:
        h = combine(h, fnv(t))
    return finalize(h)


def anova2(a: int, b: int) -> int:
    """The ANOVA d=2 feature of two distinct base keys (unordered)."""
    lo, hi = sorted((a, b))
    return finalize(combine(combine(tag("anova2"), lo), hi))
