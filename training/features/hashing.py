"""Stable 64-bit hashing of tokens and feature keys.

A feature key must be identical in every process, on every machine and in every
language, so nothing here may depend on Python's salted `hash()`, on the platform's
byte order or on dictionary order. Tokens are hashed with FNV-1a 64 over their UTF-8
bytes; a feature key folds a template tag and token hashes together with `combine` and
ends with `finalize` (the splitmix64 finalizer). Test vectors in
tests/features/test_hashing.py pin the values: changing anything here invalidates
every weight file ever written, so bump the weight-file hash-scheme name if you must.
"""

from __future__ import annotations

from collections.abc import Sequence

import numba as nb
import numpy as np

HASH_SCHEME = "fnv1a64-combine-splitmix64/v1"

FNV_OFFSET = np.uint64(0xCBF29CE484222325)
FNV_PRIME = np.uint64(0x100000001B3)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S6 = np.uint64(6)
_S2 = np.uint64(2)
_S30 = np.uint64(30)
_S27 = np.uint64(27)
_S31 = np.uint64(31)


@nb.njit(nogil=True, cache=True, inline="always")
def combine(h: np.uint64, x: np.uint64) -> np.uint64:
    """Fold `x` into `h` (boost::hash_combine, 64-bit constants). Order matters."""
    return h ^ (x + _GOLDEN + (h << _S6) + (h >> _S2))


@nb.njit(nogil=True, cache=True, inline="always")
def finalize(h: np.uint64) -> np.uint64:
    """splitmix64 finalizer: spreads the combined value over all 64 bits."""
    h = (h ^ (h >> _S30)) * _M1
    h = (h ^ (h >> _S27)) * _M2
    return h ^ (h >> _S31)


@nb.njit(nogil=True, cache=True)
def fnv1a64(data: np.ndarray, start: int, end: int) -> np.uint64:
    """FNV-1a 64 of data[start:end] (a uint8 array)."""
    h = FNV_OFFSET
    for i in range(start, end):
        h = (h ^ np.uint64(data[i])) * FNV_PRIME
    return h


@nb.njit(nogil=True, cache=True)
def hash_token_blob(blob: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Hash every token of a byte blob: token t is blob[offsets[t]:offsets[t+1]].

    This is the serving path's only string work: one pass over the request's bytes.
    """
    n = offsets.shape[0] - 1
    out = np.empty(n, dtype=np.uint64)
    for t in range(n):
        out[t] = fnv1a64(blob, offsets[t], offsets[t + 1])
    return out


def encode_tokens(tokens: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """UTF-8 encode tokens into (blob uint8, offsets int64[len+1])."""
    encoded = [t.encode("utf-8") for t in tokens]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    if encoded:
        np.cumsum([len(b) for b in encoded], out=offsets[1:])
    blob = np.frombuffer(b"".join(encoded), dtype=np.uint8)
    return blob, offsets


def hash_tokens(tokens: Sequence[str]) -> np.ndarray:
    """Token hashes (uint64) for a list of strings, e.g. a vocabulary."""
    blob, offsets = encode_tokens(tokens)
    return hash_token_blob(blob, offsets)


def hash_string(text: str) -> np.uint64:
    """Hash of one string (template tags, test vectors)."""
    return hash_tokens([text])[0]
