"""The lexicalized reordering table: Moses's relative frequencies, from the example store.

`count_pairs` groups the store's examples by phrase pair (or by source phrase for `f`
types) and counts orientation classes per direction, vectorized (numba keys, np.unique,
np.bincount); `probabilities` applies Moses's constant smoothing; `write_table` writes
Moses's reordering-table text, which Moses itself loads. The lexical model family
reuses `count_pairs` and `pair_keys` for the served table, so a table and a served
lexical model can never disagree about what "the same phrase pair" is.

Moses semantics (lexical-reordering/score.cpp, reordering_classes.cpp), each a QUIRK
kept for compatibility (docs/moses-quirks.md):
- p_k = (c_k + s) / sum_j (c_j + s) with the same constant s for every class, including
  classes folded together (msd's disc = dleft + dright + other gets one s, not three).
- Values print like C++ `ostream << double` defaults: `%g`, 6 significant digits.
- Columns: msd mono swap disc; mslr mono swap dleft dright; monotonicity mono nonmono;
  leftright right left; bidirectional = backward block then forward block.
- `f` tables: Moses's scorer sends the `f |||` key to stdout instead of the file (since
  2015), so its own f tables come out keyless and unusable. We write the key (`f ||| p..`),
  which is what the decoder looks up for an `-f` type. Deliberate difference.
- `--SmoothWithCounts` (a smoothing value ending in `u`) is not implemented: refused.
It must not extract, train or serve; it reads a store and writes one table.
"""

from __future__ import annotations

import gzip
import os
from dataclasses import dataclass
from pathlib import Path

import numba as nb
import numpy as np

from training.features import templates as features
from training.atomic import atomic_writer
from training.features.batch import PairBatch
from training.errors import InputError
from training.features.hashing import combine, finalize, hash_string
from training.moses.text import MosesTextRenderer, unique_rows
from training.moses.types import MosesType, class_labels

DEFAULT_SMOOTHING = 0.5
# Source-phrase keys (f tables) live apart from feature keys.
_F_SEED = hash_string("lexical-source-phrase/v1")


@nb.njit(nogil=True, cache=True)
def _phrase_key(seed, src_tokens, s0, s1, tgt_tokens, t0, t1, with_target):
    """Stable 64-bit identity of a phrase pair (or source phrase) from its token hashes."""
    h = combine(seed, np.uint64(s1 - s0))
    for i in range(s0, s1):
        h = combine(h, src_tokens[i])
    if with_target:
        h = combine(h, np.uint64(t1 - t0))
        for j in range(t0, t1):
            h = combine(h, tgt_tokens[j])
    return finalize(h)


@nb.njit(nogil=True, cache=True)
def _batch_keys(seed, src_tokens, src_offsets, pair_sentence, src_start, src_end, tgt_tokens, tgt_offsets,
                with_target):
    n = pair_sentence.shape[0]
    out = np.empty(n, dtype=np.uint64)
    for i in range(n):
        base = src_offsets[pair_sentence[i]]
        out[i] = _phrase_key(seed, src_tokens, base + src_start[i], base + src_end[i],
                             tgt_tokens, tgt_offsets[i], tgt_offsets[i + 1], with_target)
    return out


@nb.njit(nogil=True, cache=True)
def _first_mismatch(rows, representative_row, src_ids, src_offsets, tgt_ids, tgt_offsets, with_target):
    """Index of the first example whose tokens differ from its group's representative, or -1."""
    for i in range(rows.shape[0]):
        r = representative_row[i]
        a = rows[i]
        b = rows[r]
        if a[2] - a[1] != b[2] - b[1] or (with_target and a[4] - a[3] != b[4] - b[3]):
            return i
        for j in range(a[2] - a[1]):
            if src_ids[src_offsets[a[0]] + a[1] + j] != src_ids[src_offsets[b[0]] + b[1] + j]:
                return i
        if with_target:
            for j in range(a[4] - a[3]):
                if tgt_ids[tgt_offsets[a[0]] + a[3] + j] != tgt_ids[tgt_offsets[b[0]] + b[3] + j]:
                    return i
    return -1


def pair_keys(batch: PairBatch, with_target: bool = True) -> np.ndarray:
    """uint64 identity of every pair of a batch (`with_target=False`: of its source phrase).

    With the target this is `features.pair_keys`, the project's one phrase-pair
    identity, so a served lexical model keyed by it finds the training counts.
    """
    if with_target:
        return features.pair_keys(batch)
    return _batch_keys(_F_SEED, batch.src_tokens, batch.src_offsets, batch.pair_sentence, batch.src_start,
                       batch.src_end, batch.tgt_tokens, batch.tgt_offsets, False)


@dataclass(frozen=True)
class PairCounts:
    """Orientation counts per phrase pair (fe) or source phrase (f)."""

    moses_type: MosesType
    keys: np.ndarray             # uint64 [U], sorted: pair_keys() of each pair
    representative: np.ndarray   # int64 [U], a store example of the pair (its first)
    pair_of_example: np.ndarray  # int64 [n_examples] -> index into keys
    counts: np.ndarray           # float64 [U, n_directions, n_classes]


def count_pairs(store, moses_type: MosesType) -> PairCounts:
    """Count the type's orientation classes per phrase pair and direction, vectorized."""
    with_target = moses_type.language == "fe"
    for vocab, hashes in ((store.src_vocab, store.src_hashes), (store.tgt_vocab, store.tgt_hashes)):
        if np.unique(hashes).size != len(vocab):
            raise InputError("two vocabulary entries share a 64-bit token hash; cannot key phrases",
                             store.path)
    keys = np.empty(store.n_examples, dtype=np.uint64)
    for chunk in store.iter_chunks():
        keys[chunk.examples] = pair_keys(chunk.batch, with_target)
    rows = store.example_rows()
    s = store.sentences
    unique, representative, inverse = np.unique(keys, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1).astype(np.int64)
    bad = _first_mismatch(rows, representative[inverse].astype(np.int64), s["src_ids"], s["src_offsets"],
                          s["tgt_ids"], s["tgt_offsets"], with_target)
    if bad >= 0:
        raise InputError(f"64-bit phrase key collision at example {bad}; cannot build the table",
                         store.path)
    n_classes = len(moses_type.classes)
    counts = np.empty((unique.size, len(moses_type.directions), n_classes), dtype=np.float64)
    for d, direction in enumerate(moses_type.directions):
        labels = class_labels(store, moses_type, direction).astype(np.int64)
        counts[:, d, :] = np.bincount(inverse * n_classes + labels,
                                      minlength=unique.size * n_classes).reshape(unique.size, n_classes)
    return PairCounts(moses_type, unique, representative.astype(np.int64), inverse, counts)


def probabilities(counts: np.ndarray, smoothing: float = DEFAULT_SMOOTHING) -> np.ndarray:
    """Moses's p_k = (c_k + s) / sum_j (c_j + s) per direction; [U, D*K] in Moses's column order."""
    if not smoothing >= 0:
        raise InputError(f"--smoothing must be a non-negative number, got {smoothing}")
    scores = counts + smoothing
    total = scores.sum(axis=2, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = scores / total
    return p.reshape(counts.shape[0], -1)


def format_moses_double(value: float) -> str:
    """C++ `std::ostream << double` with default flags: printf %g, precision 6."""
    return "%g" % value


def table_bytes(store, pair_counts: PairCounts, probs: np.ndarray) -> bytes:
    """Moses's reordering-table text, rows sorted bytewise (Moses's own row order)."""
    if probs.shape[0] == 0:
        return b""
    combos, tail_index = unique_rows(probs)
    tails = [" ".join(format_moses_double(v) for v in row) for row in combos.tolist()]
    rows = store.example_rows()[pair_counts.representative]
    renderer = MosesTextRenderer(store.corpus_view())
    text = renderer.tailed_lines(rows, tails, tail_index, with_target=pair_counts.moses_type.language == "fe")
    lines = text.split(b"\n")[:-1]
    lines.sort()
    return b"\n".join(lines) + b"\n"


def write_table_file(path: str | os.PathLike, data: bytes) -> None:
    """Write atomically (training.atomic), gzip-compressed when the name ends in .gz."""
    path = Path(path)
    if not (path.parent if str(path.parent) else Path(".")).is_dir():
        raise InputError("directory does not exist", path.parent)
    with atomic_writer(path) as raw:
        if path.name.endswith(".gz"):
            with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6) as gz:
                gz.write(data)
        else:
            raw.write(data)


def build_table(store, moses_type: MosesType, out: str | os.PathLike,
                smoothing: float = DEFAULT_SMOOTHING) -> PairCounts:
    """Count, smooth and write one reordering table; returns the counts."""
    pair_counts = count_pairs(store, moses_type)
    write_table_file(out, table_bytes(store, pair_counts, probabilities(pair_counts.counts, smoothing)))
    return pair_counts
