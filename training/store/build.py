"""Build an example store from a read corpus: extraction kernels -> chunks of whole sentences.

Sentence blocks go through the nogil extraction kernels (training.moses.extract) on
worker threads; this thread writes their results in corpus order (training.store.examples)
and, when asked, Moses's `extract`/`extract.o` text (training.moses.text), so the store
is identical for any thread count. It must not parse arguments or read files itself.
"""

from __future__ import annotations

import datetime as _dt
import os
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from training.progress import progress as reporter

from training import __version__
from training.corpus.reading import DEFAULT_MAX_SENTENCE_LENGTH, Corpus
from training.moses.extract import DEFAULT_MAX_PHRASE_LENGTH, ExtractModel, extract_sentences, model_table
from training.moses.text import MosesTextRenderer
from training.store.examples import StoreWriter

DEFAULT_CHUNK_EXAMPLES = 1_000_000


def store_meta(corpus: Corpus, models: tuple[ExtractModel, ...], max_phrase_length: int,
               max_sentence_length: int, chunk_examples: int) -> dict:
    table = model_table(models)
    partners = {m.name: models[table[k, 2]].name for k, m in enumerate(models) if table[k, 2] >= 0}
    lengths = np.minimum(np.diff(corpus.src_offsets), np.diff(corpus.tgt_offsets))
    return {
        "models": [m.name for m in models],
        "label_columns": {col: list(m.classes) for m in models for col in m.columns()},
        "counts": {"sentences": corpus.n_sentences, "empty_sentences": int((lengths == 0).sum()),
                   "src_tokens": int(corpus.src_ids.size), "tgt_tokens": int(corpus.tgt_ids.size),
                   "alignment_points": int(corpus.align.shape[0]),
                   "src_vocab": len(corpus.src_vocab), "tgt_vocab": len(corpus.tgt_vocab)},
        "corpus": corpus.fingerprint,
        "settings": {"max_phrase_length": max_phrase_length, "max_sentence_length": max_sentence_length,
                     "chunk_examples": chunk_examples, "hier_phrase_partner": partners,
                     "semantics": "moses extract-main.cpp master 2025-02-03, E=target F=source"},
        "software": {"name": "moses-reorder", "version": __version__},
        "created_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


def build_store(corpus: Corpus, models: tuple[ExtractModel, ...], out: str | Path, *,
                max_phrase_length: int = DEFAULT_MAX_PHRASE_LENGTH,
                max_sentence_length: int = DEFAULT_MAX_SENTENCE_LENGTH,
                chunk_examples: int = DEFAULT_CHUNK_EXAMPLES, moses_format: bool = False,
                progress: bool = True, threads: int = 1) -> dict:
    """Extract every sentence of `corpus` into a new store at `out`; returns its metadata.

    Blocks of sentences go through the nogil kernels on `threads` worker threads; this
    thread writes their results in corpus order, so the store is the same for any count.
    """
    renderer = MosesTextRenderer(corpus, models) if moses_format else None
    meta = store_meta(corpus, models, max_phrase_length, max_sentence_length, chunk_examples)

    def work(first: int, stop: int):
        rows, labels = extract_sentences(corpus, models, first, stop, max_phrase_length)
        text = (renderer.extract_lines(rows), renderer.orientation_lines(rows, labels)) if renderer else ()
        return rows, labels, text

    # Blocks small enough that a chunk overshoots chunk_examples by little.
    block = int(np.clip(chunk_examples // 64, 16, 4096))
    starts = iter(range(0, corpus.n_sentences, block))
    with StoreWriter(out) as writer, ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        writer.write_corpus(corpus)
        text_files = ([open(writer.path("extract"), "wb"), open(writer.path("extract.o"), "wb")]
                      if renderer else [])
        try:
            pending_rows: list[np.ndarray] = []
            pending_labels: list[np.ndarray] = []
            pending = 0
            bar = reporter(total=corpus.n_sentences, unit="sent", desc="extract", enabled=progress)
            in_flight: deque = deque()

            def submit_next() -> None:
                first = next(starts, None)
                if first is not None:
                    stop = min(first + block, corpus.n_sentences)
                    in_flight.append((pool.submit(work, first, stop), stop - first))

            for _ in range(2 * max(1, threads)):
                submit_next()
            while in_flight:
                future, n_sentences = in_flight.popleft()
                rows, labels, text = future.result()
                submit_next()
                for fh, data in zip(text_files, text):
                    fh.write(data)
                if len(rows):
                    pending_rows.append(rows)
                    pending_labels.append(labels)
                    pending += len(rows)
                if pending and (pending >= chunk_examples or not in_flight):
                    writer.add_chunk(np.concatenate(pending_rows), np.concatenate(pending_labels))
                    pending_rows, pending_labels, pending = [], [], 0
                bar.update(n_sentences)
                bar.set_postfix(examples=writer.n_examples + pending, refresh=False)
            bar.close()
            for fh in text_files:
                fh.flush()
                os.fsync(fh.fileno())
        finally:
            for fh in text_files:
                fh.close()
        writer.commit(meta)
    meta["counts"]["examples"] = writer.n_examples
    meta["counts"]["chunks"] = len(writer.chunks)
    return meta
