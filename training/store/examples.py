"""The example store: extracted phrase pairs and their labels as columnar .npy files.

Layout (docs/internals.md is the contract):

    STORE/store.json              format, counts, models, label_columns, chunks, corpus, settings
    STORE/vocab.src.txt, vocab.tgt.txt      one token per line, id = line number
    STORE/sentences/*.npy         src_ids, src_offsets, tgt_ids, tgt_offsets, align [m,2], align_offsets
    STORE/chunk-NNNNN/*.npy       sentence, src_start, src_end, tgt_start, tgt_end, labels [n, L]

Every array is opened with `np.load(mmap_mode="r")`, and chunks hold whole sentences,
so 10^8 examples stream chunk by chunk without being loaded at once and a held-out
split by sentence never cuts a chunk's sentence in two. A store is built in a temporary
sibling directory and renamed into place at the end, so a failed run leaves nothing.
This module stores and serves examples; it must not decide labels (training.moses.extract
does) or compute features (the features modules do, from the PairBatch it yields).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numba as nb
import numpy as np

from training.atomic import fsync_directory, make_parents, remove_made
from training.features.batch import PairBatch
from training.errors import InputError
from training.features.hashing import hash_tokens
from training.jitcache import readonly

FORMAT = "moses-reorder-store"
VERSION = 1
SENTENCE_ARRAYS = ("src_ids", "src_offsets", "tgt_ids", "tgt_offsets", "align", "align_offsets")
CHUNK_ARRAYS = ("sentence", "src_start", "src_end", "tgt_start", "tgt_end", "labels")


def _save(path: Path, array: np.ndarray) -> None:
    with open(path, "wb") as fh:
        np.save(fh, np.ascontiguousarray(array), allow_pickle=False)
        fh.flush()
        os.fsync(fh.fileno())


def _write_text(path: Path, text: str) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())


class StoreWriter:
    """Builds a store in a temporary sibling of `out`; `commit()` renames it into place.

    Use as a context manager: leaving the block with an exception removes the
    temporary directory, so nothing is left in `out`.
    """

    def __init__(self, out: str | os.PathLike):
        self.out = Path(out)
        if self.out.exists():
            raise InputError("output already exists; choose a new --out or remove it", self.out)
        parent = self.out.parent if str(self.out.parent) else Path(".")
        self.made = make_parents(self.out)   # removed again unless the store is committed
        self.tmp = Path(tempfile.mkdtemp(prefix=f".{self.out.name}.tmp-", dir=parent))
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(self.tmp, 0o777 & ~umask)  # mkdtemp makes it private; a store is an ordinary directory
        self.chunks: list[dict] = []
        self.n_examples = 0

    def __enter__(self) -> "StoreWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if self.tmp.exists():
            shutil.rmtree(self.tmp, ignore_errors=True)
        if not self.out.exists():
            remove_made(self.made)

    def path(self, name: str) -> Path:
        return self.tmp / name

    def write_vocab(self, src_vocab: list[str], tgt_vocab: list[str]) -> None:
        """vocab.{src,tgt}.txt; the sentence arrays are appended under path("sentences") by the builder."""
        for side, vocab in (("src", src_vocab), ("tgt", tgt_vocab)):
            with open(self.tmp / f"vocab.{side}.txt", "w", encoding="utf-8", newline="\n") as fh:
                for first in range(0, len(vocab), 65536):
                    fh.write("".join(t + "\n" for t in vocab[first:first + 65536]))
                fh.flush()
                os.fsync(fh.fileno())

    def add_chunk(self, rows: np.ndarray, labels: np.ndarray) -> None:
        """rows = (sentence, src_start, src_end, tgt_start, tgt_end) as from training.moses.extract."""
        name = f"chunk-{len(self.chunks):05d}"
        directory = self.tmp / name
        directory.mkdir()
        _save(directory / "sentence.npy", rows[:, 0].astype(np.int32))
        for j, column in enumerate(("src_start", "src_end", "tgt_start", "tgt_end"), start=1):
            _save(directory / f"{column}.npy", rows[:, j].astype(np.int16))
        _save(directory / "labels.npy", labels.astype(np.int8))
        n = int(rows.shape[0])
        self.chunks.append({"name": name, "examples": n, "first_example": self.n_examples,
                            "first_sentence": int(rows[0, 0]), "last_sentence": int(rows[-1, 0])})
        self.n_examples += n

    def commit(self, meta: dict) -> Path:
        meta = {"format": FORMAT, "version": VERSION, **meta,
                "counts": {**meta.get("counts", {}), "examples": self.n_examples, "chunks": len(self.chunks)},
                "chunks": self.chunks}
        _write_text(self.tmp / "store.json", json.dumps(meta, indent=2, ensure_ascii=False) + "\n")
        for directory in [self.tmp, *[p for p in self.tmp.iterdir() if p.is_dir()]]:
            fsync_directory(directory)
        os.rename(self.tmp, self.out)
        fsync_directory(self.out.parent if str(self.out.parent) else Path("."))
        return self.out


@dataclass(frozen=True)
class StoreChunk:
    """One chunk's examples (after an optional sentence mask) and their PairBatch.

    `examples` are the global example indices (rows of load_labels and of any feature
    matrix built over the whole store).
    """

    sentence: np.ndarray   # int32, global sentence index
    src_start: np.ndarray  # int16
    src_end: np.ndarray    # int16, exclusive
    tgt_start: np.ndarray  # int16
    tgt_end: np.ndarray    # int16, exclusive
    labels: np.ndarray     # int8 [n, n_label_columns]
    batch: PairBatch
    examples: np.ndarray   # int64, global example indices


@nb.njit(nogil=True, cache=True)
def _phrase_parts(pair_sentence, src_start, src_end, tgt_start, tgt_end, sent_first, tgt_ids, tgt_offsets,
                  align, align_offsets, tgt_hashes):
    """Target-phrase token hashes and phrase-relative alignment of each pair (CSR).

    Points are sorted by (source, target) within a pair: the order of Moses's
    AlignmentInfo, so a training batch looks exactly like a serving batch.
    """
    n = pair_sentence.shape[0]
    tgt_off = np.zeros(n + 1, dtype=np.int64)
    al_off = np.zeros(n + 1, dtype=np.int64)
    for i in range(n):
        s = sent_first[pair_sentence[i]]
        tgt_off[i + 1] = tgt_off[i] + tgt_end[i] - tgt_start[i]
        count = 0
        for p in range(align_offsets[s], align_offsets[s + 1]):
            if (src_start[i] <= align[p, 0] < src_end[i]) and (tgt_start[i] <= align[p, 1] < tgt_end[i]):
                count += 1
        al_off[i + 1] = al_off[i] + count
    tgt_tokens = np.empty(tgt_off[n], dtype=np.uint64)
    al_src = np.empty(al_off[n], dtype=np.int16)
    al_tgt = np.empty(al_off[n], dtype=np.int16)
    for i in range(n):
        s = sent_first[pair_sentence[i]]
        base = tgt_offsets[s]
        for j in range(tgt_end[i] - tgt_start[i]):
            tgt_tokens[tgt_off[i] + j] = tgt_hashes[tgt_ids[base + tgt_start[i] + j]]
        k = al_off[i]
        for p in range(align_offsets[s], align_offsets[s + 1]):
            if (src_start[i] <= align[p, 0] < src_end[i]) and (tgt_start[i] <= align[p, 1] < tgt_end[i]):
                a = align[p, 0] - src_start[i]
                b = align[p, 1] - tgt_start[i]
                j = k
                while j > al_off[i] and (al_src[j - 1] > a or (al_src[j - 1] == a and al_tgt[j - 1] > b)):
                    al_src[j] = al_src[j - 1]
                    al_tgt[j] = al_tgt[j - 1]
                    j -= 1
                al_src[j] = a
                al_tgt[j] = b
                k += 1
    return tgt_tokens, tgt_off, al_src, al_tgt, al_off


class ExampleStore:
    """Read side of a store: memory-mapped arrays, streamed by chunk."""

    def __init__(self, path: Path, meta: dict):
        self.path = path
        self.meta = meta

    @classmethod
    def open(cls, path: str | os.PathLike) -> "ExampleStore":
        path = Path(path)
        meta_path = path / "store.json"
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise InputError("not an example store (no store.json); make one with `moses-reorder extract`",
                             path) from None
        except (OSError, ValueError) as exc:
            raise InputError(f"unreadable store metadata: {exc}", meta_path) from None
        if meta.get("format") != FORMAT:
            raise InputError(f"not a {FORMAT} (format {meta.get('format')!r})", meta_path)
        if meta.get("version") != VERSION:
            raise InputError(f"store version {meta.get('version')!r}; this software reads version {VERSION}",
                             meta_path)
        return cls(path, meta)

    # -- metadata -------------------------------------------------------------------
    @property
    def n_examples(self) -> int:
        return int(self.meta["counts"]["examples"])

    @property
    def n_sentences(self) -> int:
        return int(self.meta["counts"]["sentences"])

    @property
    def label_columns(self) -> dict[str, tuple[str, ...]]:
        return {name: tuple(classes) for name, classes in self.meta["label_columns"].items()}

    @property
    def models(self) -> tuple[str, ...]:
        return tuple(self.meta["models"])

    def _vocab(self, side: str) -> list[str]:
        # newline="": a token may hold '\r' or any character but '\n', ' ' and '\t'.
        with open(self.path / f"vocab.{side}.txt", encoding="utf-8", newline="") as fh:
            return fh.read().split("\n")[:-1]

    @cached_property
    def src_vocab(self) -> list[str]:
        return self._vocab("src")

    @cached_property
    def tgt_vocab(self) -> list[str]:
        return self._vocab("tgt")

    @cached_property
    def src_hashes(self) -> np.ndarray:
        return hash_tokens(self.src_vocab)

    @cached_property
    def tgt_hashes(self) -> np.ndarray:
        return hash_tokens(self.tgt_vocab)

    # -- arrays ---------------------------------------------------------------------
    def _load(self, *parts: str) -> np.ndarray:
        return np.asarray(np.load(self.path.joinpath(*parts), mmap_mode="r", allow_pickle=False))

    @cached_property
    def sentences(self) -> dict[str, np.ndarray]:
        """Sentence arrays (memory-mapped): token ids, alignment, CSR offsets."""
        return {name: self._load("sentences", f"{name}.npy") for name in SENTENCE_ARRAYS}

    def column_index(self, column: str) -> int:
        names = list(self.label_columns)
        if column not in names:
            raise InputError(f"store has no label column {column!r}; it has {', '.join(names)} "
                             f"(extract with the matching --model)", self.path)
        return names.index(column)

    def _chunk_array(self, chunk: dict, name: str) -> np.ndarray:
        return self._load(chunk["name"], f"{name}.npy")

    def corpus_view(self):
        """The store's sentences as a training.corpus.reading.Corpus (memory-mapped arrays)."""
        from training.corpus.reading import Corpus

        s = self.sentences
        return Corpus(self.src_vocab, self.tgt_vocab, s["src_ids"], s["src_offsets"], s["tgt_ids"],
                      s["tgt_offsets"], s["align"], s["align_offsets"], self.meta.get("corpus", {}))

    def example_rows(self) -> np.ndarray:
        """(sentence, src_start, src_end, tgt_start, tgt_end) of every example, int32 [n, 5]."""
        out = np.empty((self.n_examples, 5), dtype=np.int32)
        for chunk in self.meta["chunks"]:
            first = chunk["first_example"]
            for j, name in enumerate(CHUNK_ARRAYS[:5]):
                out[first:first + chunk["examples"], j] = self._chunk_array(chunk, name)
        return out

    def load_labels(self, column: str) -> np.ndarray:
        """One label column (extraction coding) for all examples, int8 [n_examples]."""
        j = self.column_index(column)
        out = np.empty(self.n_examples, dtype=np.int8)
        for chunk in self.meta["chunks"]:
            first = chunk["first_example"]
            out[first:first + chunk["examples"]] = self._chunk_array(chunk, "labels")[:, j]
        return out

    def sentence_of_examples(self) -> np.ndarray:
        """Global sentence index of every example, int32 [n_examples]."""
        out = np.empty(self.n_examples, dtype=np.int32)
        for chunk in self.meta["chunks"]:
            first = chunk["first_example"]
            out[first:first + chunk["examples"]] = self._chunk_array(chunk, "sentence")
        return out

    def chunk_arrays(self, k: int) -> dict[str, np.ndarray]:
        """Chunk k's arrays (CHUNK_ARRAYS, memory-mapped) and its metadata entry under "meta"."""
        chunk = self.meta["chunks"][k]
        return {"meta": chunk, **{name: self._chunk_array(chunk, name) for name in CHUNK_ARRAYS}}

    def _check_mask(self, sentence_mask: np.ndarray | None) -> np.ndarray | None:
        if sentence_mask is None:
            return None
        sentence_mask = np.asarray(sentence_mask, dtype=bool)
        if sentence_mask.shape != (self.n_sentences,):
            raise InputError(f"sentence_mask must have shape ({self.n_sentences},), got {sentence_mask.shape}")
        return sentence_mask

    def _chunk_of(self, arrays: dict, examples: np.ndarray, sentence_mask: np.ndarray | None
                  ) -> StoreChunk | None:
        """The StoreChunk of some examples' arrays, only the masked sentences' (None if none)."""
        if sentence_mask is not None:
            keep = sentence_mask[arrays["sentence"]]
            if not keep.any():
                return None
            if not keep.all():
                arrays = {name: a[keep] for name, a in arrays.items()}
                examples = examples[keep]
        arrays = {name: np.ascontiguousarray(a) for name, a in arrays.items()}
        return StoreChunk(**arrays, batch=self.batch(arrays["sentence"], arrays["src_start"],
                                                    arrays["src_end"], arrays["tgt_start"],
                                                    arrays["tgt_end"]), examples=examples)

    def iter_chunks(self, sentence_mask: np.ndarray | None = None,
                    chunks: range | None = None) -> Iterator[StoreChunk]:
        """Chunks in order (only those numbered in `chunks` if given); with a bool mask over
        sentences only their examples (empty chunks skipped)."""
        sentence_mask = self._check_mask(sentence_mask)
        all_chunks = self.meta["chunks"]
        for chunk in (all_chunks if chunks is None else [all_chunks[k] for k in chunks]):
            arrays = {name: self._chunk_array(chunk, name) for name in CHUNK_ARRAYS}
            examples = np.arange(chunk["first_example"], chunk["first_example"] + chunk["examples"])
            found = self._chunk_of(arrays, examples, sentence_mask)
            if found is not None:
                yield found

    def first_example_of(self, sentence: int) -> int:
        """Index of the first example of `sentence` or of a later one (n_examples if none)."""
        for chunk in self.meta["chunks"]:
            if chunk["examples"] and chunk["last_sentence"] >= sentence:
                sent = self._chunk_array(chunk, "sentence")
                return int(chunk["first_example"] + np.searchsorted(sent, sentence))
        return self.n_examples

    def read_examples(self, first: int, stop: int, sentence_mask: np.ndarray | None = None
                      ) -> StoreChunk | None:
        """Examples first..stop-1 (any range, across store chunks) as one StoreChunk; with a
        mask only the masked sentences' examples (None when that leaves none). What a
        sharded stage's task reads: a range of rows, not a whole store chunk."""
        sentence_mask = self._check_mask(sentence_mask)
        first, stop = max(0, int(first)), min(self.n_examples, int(stop))
        parts = []
        for chunk in self.meta["chunks"]:
            a = chunk["first_example"]
            lo, hi = max(first, a), min(stop, a + chunk["examples"])
            if lo < hi:
                parts.append({name: self._chunk_array(chunk, name)[lo - a:hi - a] for name in CHUNK_ARRAYS})
        if not parts:
            return None
        arrays = {name: np.concatenate([p[name] for p in parts]) for name in CHUNK_ARRAYS}
        return self._chunk_of(arrays, np.arange(first, stop, dtype=np.int64), sentence_mask)

    def batch(self, sentence, src_start, src_end, tgt_start, tgt_end) -> PairBatch:
        """The PairBatch of some examples: their sentences' source hashes, target phrases, alignment."""
        s = self.sentences
        sents, pair_sentence = np.unique(sentence, return_inverse=True)
        src_len = s["src_offsets"][sents + 1] - s["src_offsets"][sents]
        src_offsets = np.zeros(len(sents) + 1, dtype=np.int64)
        np.cumsum(src_len, out=src_offsets[1:])
        starts = np.repeat(s["src_offsets"][sents] - src_offsets[:-1], src_len) + np.arange(src_offsets[-1])
        src_tokens = self.src_hashes[s["src_ids"][starts]]
        # read-only views: chunks are mapped and merged ranges are in memory; one signature
        spans = [readonly(a) for a in (src_start, src_end, tgt_start, tgt_end, s["tgt_ids"], s["tgt_offsets"],
                                       s["align"], s["align_offsets"])]
        tgt_tokens, tgt_offsets, al_src, al_tgt, al_offsets = _phrase_parts(
            pair_sentence.astype(np.int64), *spans[:4], sents.astype(np.int64), *spans[4:], self.tgt_hashes)
        return PairBatch(src_tokens=src_tokens, src_offsets=src_offsets,
                         pair_sentence=pair_sentence.astype(np.int32),
                         src_start=src_start.astype(np.int32), src_end=src_end.astype(np.int32),
                         tgt_tokens=tgt_tokens, tgt_offsets=tgt_offsets,
                         align_src=al_src, align_tgt=al_tgt, align_offsets=al_offsets)
