"""Build an example store from a corpus, streaming: sentence ranges -> extraction tasks -> chunks.

From files (`build_store_from_files`, what `moses-reorder extract` runs) the corpus is
never read whole: `plan_corpus` cuts it into sentence ranges of a few MB, and each range
is one task of training.parallel (in-process, local processes or Dask) that reads,
validates and extracts its sentences with vocabularies of its own (`extract_range`).
This process takes the results in corpus order: it merges the range vocabularies into
the store's (first use in corpus order, so the ids are those of a whole-corpus read),
appends the sentence arrays, cuts the examples into chunks and writes Moses's text when
asked. Memory: the vocabularies, the tasks in flight and one chunk, whatever the corpus
size; the store is byte-identical for any jobs/scheduler and any range size, because
chunk boundaries depend only on the examples (a chunk ends at the first multiple of
`block` sentences where it holds at least chunk_examples).

`build_store(corpus, ...)` does the same for a corpus already in memory (tests, small
corpora), in this process. It must not parse arguments.
"""

from __future__ import annotations

import datetime as _dt
import os
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from training.progress import progress as reporter

from training import __version__
from training.corpus.reading import (DEFAULT_MAX_SENTENCE_LENGTH, Corpus, CorpusPlan, SentenceRange,
                                     check_max_sentence_length, plan_corpus, read_range)
from training.moses.extract import DEFAULT_MAX_PHRASE_LENGTH, ExtractModel, extract_sentences, model_table
from training.moses.text import MosesTextRenderer
from training.npyfile import NpyAppender
from training.parallel import DEFAULT_MEMORY, iter_tasks, jobs_that_pay, parse_memory, resolve_jobs
from training.store.examples import SENTENCE_ARRAYS, StoreWriter

DEFAULT_CHUNK_EXAMPLES = 1_000_000
# Source bytes that pay for a local worker (extraction ~0.55 s a MB of ja-en source, a
# spawned worker ~1.5 s of CPU to start): below 2 of them, one in-process job
# (parallel.jobs_that_pay); 1x ja-en (2.8 MB) runs in-process, 10x (28 MB) on every core.
WORKER_SOURCE_BYTES = 4 << 20


def range_bytes_for(memory: int, jobs: int) -> int:
    """Source bytes per extraction task: 256 KB per job at the default 4G, between 64 KB and
    1 MB. Small ranges keep peak memory flat (measured: 241/277/285 MB at 1x/10x/32x ja-en
    with 256 KB, 272/351/390 MB with 1 MB) and cost nothing in time."""
    return int(np.clip(memory // (16384 * max(1, jobs)), 1 << 16, 1 << 20))


def _size(path) -> int:
    try:
        return os.path.getsize(path)
    except OSError:  # plan_corpus says what is wrong with it
        return 0


def chunk_block(chunk_examples: int) -> int:
    """Chunks end at multiples of this many sentences."""
    return int(np.clip(chunk_examples // 64, 16, 4096))


@dataclass(frozen=True)
class ExtractTask:
    """One sentence range of a planned corpus and the extraction settings (pickles small)."""

    plan: CorpusPlan
    span: SentenceRange
    models: tuple[ExtractModel, ...]
    max_phrase_length: int
    max_sentence_length: int
    moses_format: bool


@dataclass
class RangeResult:
    """What a range contributes: its sentences (ids in `src_vocab`/`tgt_vocab` numbering when
    those are given, else already the store's), its examples and its Moses text."""

    first: int
    stop: int
    src_vocab: list[str] | None
    tgt_vocab: list[str] | None
    src_ids: np.ndarray
    src_lengths: np.ndarray
    tgt_ids: np.ndarray
    tgt_lengths: np.ndarray
    align: np.ndarray
    align_lengths: np.ndarray
    rows: np.ndarray     # int32 [n, 5]: global sentence, src_start, src_end, tgt_start, tgt_end
    labels: np.ndarray   # int8 [n, 2 * models]
    text: tuple[bytes, ...]


def _result(corpus: Corpus, first: int, stop: int, offset: int, models, max_phrase_length: int,
            renderer: MosesTextRenderer | None, own_vocab: bool) -> RangeResult:
    """Extract sentences [first, stop) of `corpus`; `offset` turns its sentence numbers into the store's."""
    rows, labels = extract_sentences(corpus, models, first, stop, max_phrase_length)
    text = (renderer.extract_lines(rows), renderer.orientation_lines(rows, labels)) if renderer else ()
    rows[:, 0] += offset
    c = corpus
    src, tgt, al = c.src_offsets, c.tgt_offsets, c.align_offsets
    return RangeResult(offset + first, offset + stop, c.src_vocab if own_vocab else None,
                       c.tgt_vocab if own_vocab else None,
                       c.src_ids[src[first]:src[stop]], np.diff(src[first:stop + 1]),
                       c.tgt_ids[tgt[first]:tgt[stop]], np.diff(tgt[first:stop + 1]),
                       c.align[al[first]:al[stop]], np.diff(al[first:stop + 1]), rows, labels, text)


def extract_range(task: ExtractTask) -> RangeResult:
    """The extraction task: read, validate and extract one sentence range (runs anywhere
    the corpus files are visible at the same paths)."""
    corpus = read_range(task.plan, task.span, task.max_sentence_length)
    renderer = MosesTextRenderer(corpus, task.models) if task.moses_format else None
    return _result(corpus, 0, corpus.n_sentences, task.span.first, task.models, task.max_phrase_length,
                   renderer, own_vocab=True)


class _Vocab:
    """The store's vocabulary of one side, merged from range vocabularies in corpus order."""

    def __init__(self):
        self.ids: dict[str, int] = {}

    def remap(self, local: list[str]) -> np.ndarray:
        ids = self.ids
        for token in local:
            ids.setdefault(token, len(ids))
        return np.fromiter(map(ids.__getitem__, local), dtype=np.int32, count=len(local))


class _Assembler:
    """The writing side: sentence arrays appended, examples cut into chunks, text written."""

    def __init__(self, writer: StoreWriter, chunk_examples: int, moses_format: bool):
        self.writer, self.chunk_examples, self.block = writer, chunk_examples, chunk_block(chunk_examples)
        sentences = writer.path("sentences")
        sentences.mkdir()
        tails = {"align": (2,)}
        dtypes = {"src_ids": np.int32, "tgt_ids": np.int32, "align": np.int16}
        self.arrays = {name: NpyAppender(sentences / f"{name}.npy", dtypes.get(name, np.int64), tails.get(name, ()))
                       for name in SENTENCE_ARRAYS}
        for name in ("src_offsets", "tgt_offsets", "align_offsets"):
            self.arrays[name].append(np.zeros(1, dtype=np.int64))
        self.totals = {"src_offsets": 0, "tgt_offsets": 0, "align_offsets": 0}
        self.vocab = {"src": _Vocab(), "tgt": _Vocab()}
        self.text_files = ([open(writer.path("extract"), "wb"), open(writer.path("extract.o"), "wb")]
                           if moses_format else [])
        self.pending: list[tuple[np.ndarray, np.ndarray]] = []
        self.n_pending = 0
        self.counts = {"sentences": 0, "empty_sentences": 0, "src_tokens": 0, "tgt_tokens": 0,
                       "alignment_points": 0}

    def add(self, r: RangeResult) -> None:
        src_ids, tgt_ids = r.src_ids, r.tgt_ids
        if r.src_vocab is not None:
            src_ids = self.vocab["src"].remap(r.src_vocab)[src_ids]
            tgt_ids = self.vocab["tgt"].remap(r.tgt_vocab)[tgt_ids]
        a = self.arrays
        a["src_ids"].append(src_ids)
        a["tgt_ids"].append(tgt_ids)
        a["align"].append(r.align)
        for name, lengths in (("src_offsets", r.src_lengths), ("tgt_offsets", r.tgt_lengths),
                              ("align_offsets", r.align_lengths)):
            a[name].append(self.totals[name] + np.cumsum(lengths))
            self.totals[name] += int(lengths.sum())
        c = self.counts
        c["sentences"] += r.stop - r.first
        c["empty_sentences"] += int((np.minimum(r.src_lengths, r.tgt_lengths) == 0).sum())
        c["src_tokens"] += int(src_ids.size)
        c["tgt_tokens"] += int(tgt_ids.size)
        c["alignment_points"] += int(r.align.shape[0])
        for fh, data in zip(self.text_files, r.text):
            fh.write(data)
        if len(r.rows):
            self.pending.append((r.rows, r.labels))
            self.n_pending += len(r.rows)
        self._cut(done=r.stop)

    def _sentence_of_pending(self, k: int) -> int:
        for rows, _ in self.pending:
            if k < len(rows):
                return int(rows[k, 0])
            k -= len(rows)
        raise IndexError(k)

    def _cut(self, done: int, last: bool = False) -> None:
        """Write every chunk that ends at or before sentence `done` (all if `last`). The
        pending ranges are joined only to cut a chunk (joining them at every range that
        arrives until the chunk's boundary sentence is done was quadratic)."""
        while self.n_pending and (last or self.n_pending >= self.chunk_examples):
            whole = last and self.n_pending < self.chunk_examples
            if not whole:
                boundary = (self._sentence_of_pending(self.chunk_examples - 1) // self.block + 1) * self.block
                if boundary > done and not last:
                    return
            rows = np.concatenate([p[0] for p in self.pending])
            labels = np.concatenate([p[1] for p in self.pending])
            end = len(rows) if whole else int(np.searchsorted(rows[:, 0], boundary))
            self.writer.add_chunk(rows[:end], labels[:end])
            self.pending = [(rows[end:], labels[end:])] if end < len(rows) else []
            self.n_pending = len(rows) - end

    def finish(self, corpus_vocab: tuple[list[str], list[str]] | None = None) -> dict:
        self._cut(done=self.counts["sentences"], last=True)
        for fh in self.text_files:
            fh.flush()
            os.fsync(fh.fileno())
            fh.close()
        for appender in self.arrays.values():
            appender.finish()
        vocabs = corpus_vocab or tuple(list(self.vocab[side].ids) for side in ("src", "tgt"))
        self.writer.write_vocab(*vocabs)
        return {**self.counts, "src_vocab": len(vocabs[0]), "tgt_vocab": len(vocabs[1])}

    def close(self) -> None:
        for fh in self.text_files:
            fh.close()
        for appender in self.arrays.values():
            appender.close()


def store_meta(counts: dict, fingerprint: dict, models: tuple[ExtractModel, ...], max_phrase_length: int,
               max_sentence_length: int, chunk_examples: int) -> dict:
    table = model_table(models)
    partners = {m.name: models[table[k, 2]].name for k, m in enumerate(models) if table[k, 2] >= 0}
    return {
        "models": [m.name for m in models],
        "label_columns": {col: list(m.classes) for m in models for col in m.columns()},
        "counts": counts,
        "corpus": fingerprint,
        "settings": {"max_phrase_length": max_phrase_length, "max_sentence_length": max_sentence_length,
                     "chunk_examples": chunk_examples, "hier_phrase_partner": partners,
                     "semantics": "moses extract-main.cpp master 2025-02-03, E=target F=source"},
        "software": {"name": "moses-reorder", "version": __version__},
        "created_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


def _assemble(results, n_sentences: int, out, meta_of, chunk_examples: int, moses_format: bool,
              progress: bool, corpus_vocab=None) -> dict:
    with StoreWriter(out) as writer:
        assembler = _Assembler(writer, chunk_examples, moses_format)
        try:
            bar = reporter(total=n_sentences, unit="sent", desc="extract", enabled=progress)
            for result in results:
                assembler.add(result)
                bar.update(result.stop - result.first)
                bar.set_postfix(examples=writer.n_examples + assembler.n_pending, refresh=False)
            bar.close()
            counts = assembler.finish(corpus_vocab)
        finally:
            assembler.close()
        meta = meta_of(counts)
        writer.commit(meta)
    meta["counts"]["examples"] = writer.n_examples
    meta["counts"]["chunks"] = len(writer.chunks)
    return meta


def build_store_from_files(src, tgt, align, models: tuple[ExtractModel, ...], out: str | Path, *,
                           max_phrase_length: int = DEFAULT_MAX_PHRASE_LENGTH,
                           max_sentence_length: int = DEFAULT_MAX_SENTENCE_LENGTH,
                           chunk_examples: int = DEFAULT_CHUNK_EXAMPLES, moses_format: bool = False,
                           progress: bool = True, jobs: int | None = 1, scheduler: str | None = None,
                           memory: str | int = DEFAULT_MEMORY, range_bytes: int | None = None) -> dict:
    """Extract a corpus from its files into a new store at `out`, streaming (module doc);
    returns the store's metadata. The store is the same for any jobs, scheduler, range size."""
    check_max_sentence_length(max_sentence_length)
    jobs = jobs_that_pay(resolve_jobs(jobs), _size(src), WORKER_SOURCE_BYTES, scheduler)
    plan = plan_corpus(src, tgt, align, range_bytes=range_bytes or range_bytes_for(parse_memory(memory), jobs))
    files = replace(plan, ranges=())  # a task carries its own range only
    tasks = [ExtractTask(files, span, tuple(models), max_phrase_length, max_sentence_length, moses_format)
             for span in plan.ranges]
    return _assemble(iter_tasks(extract_range, tasks, jobs=jobs, scheduler=scheduler), plan.n_sentences, out,
                     lambda counts: store_meta(counts, plan.fingerprint, models, max_phrase_length,
                                               max_sentence_length, chunk_examples),
                     chunk_examples, moses_format, progress)


def build_store(corpus: Corpus, models: tuple[ExtractModel, ...], out: str | Path, *,
                max_phrase_length: int = DEFAULT_MAX_PHRASE_LENGTH,
                max_sentence_length: int = DEFAULT_MAX_SENTENCE_LENGTH,
                chunk_examples: int = DEFAULT_CHUNK_EXAMPLES, moses_format: bool = False,
                progress: bool = True) -> dict:
    """Extract every sentence of an in-memory `corpus` into a new store at `out`, in this
    process; the same store as build_store_from_files on the corpus's files."""
    renderer = MosesTextRenderer(corpus, models) if moses_format else None
    block = chunk_block(chunk_examples)
    results = (_result(corpus, first, min(first + block, corpus.n_sentences), 0, models, max_phrase_length,
                       renderer, own_vocab=False)
               for first in range(0, corpus.n_sentences, block))
    return _assemble(results, corpus.n_sentences, out,
                     lambda counts: store_meta(counts, corpus.fingerprint, models, max_phrase_length,
                                               max_sentence_length, chunk_examples),
                     chunk_examples, moses_format, progress, corpus_vocab=(corpus.src_vocab, corpus.tgt_vocab))
