"""The library's entry points: what the CLI calls and what a Python user imports.

Each stage of the data flow has one function here; the CLI (training/commands/) only
parses arguments and calls them, so both take the same defaults (training/defaults.py)
and write the same files.

    extract_store   aligned corpus -> example store (Moses's orientation classes)
    lexical_table   store -> Moses's lexicalized reordering table
    feature_matrix  store -> cached feature matrix
    train_model     store -> one weight file for one Moses type
    evaluate        weight file + store -> held-out report
    run_experiment  families x feature sets -> one table
    run_pipeline    the main job: all of the above, models published for `serve`
"""

from __future__ import annotations

import os
from typing import Any

from training import defaults
from training.api.pipeline import run_pipeline
from training.api.train import train_model
from training.eval.evaluate import evaluate
from training.eval.studies import run_experiment

__all__ = ["extract_store", "lexical_table", "feature_matrix", "train_model", "evaluate", "run_experiment",
           "run_pipeline"]


def extract_store(src: str | os.PathLike, tgt: str | os.PathLike, align: str | os.PathLike,
                  out: str | os.PathLike, *, models: list[str] | None = None,
                  max_phrase_length: int = defaults.MAX_PHRASE_LENGTH,
                  max_sentence_length: int = defaults.MAX_SENTENCE_LENGTH,
                  chunk_examples: int = defaults.CHUNK_EXAMPLES, moses_format: bool = False,
                  progress: bool = False, jobs: int | None = defaults.JOBS, scheduler: str | None = None,
                  memory: str | int = defaults.MEMORY) -> dict[str, Any]:
    """Read, validate and extract a corpus into a new store, streaming it in sentence ranges
    (`jobs` local processes, or the Dask cluster at `scheduler`); returns the store's metadata."""
    from training.moses.extract import parse_models
    from training.moses.text import check_moses_expressible
    from training.store.build import build_store_from_files

    parsed = parse_models(models or list(defaults.EXTRACT_MODELS))
    if moses_format:
        check_moses_expressible(parsed)
    return build_store_from_files(src, tgt, align, parsed, out, max_phrase_length=max_phrase_length,
                                  max_sentence_length=max_sentence_length, chunk_examples=chunk_examples,
                                  moses_format=moses_format, progress=progress, jobs=jobs,
                                  scheduler=scheduler, memory=memory)


def lexical_table(store_dir: str | os.PathLike, moses_type: str, out: str | os.PathLike, *,
                  smoothing: float = defaults.SMOOTHING, jobs: int | None = defaults.JOBS,
                  scheduler: str | None = None, memory: str | int = defaults.MEMORY):
    """Moses's relative-frequency table of `moses_type` from a store, with bounded memory
    (`jobs` local processes, or the Dask cluster at `scheduler`); returns its TableSummary."""
    from training.errors import UsageError
    from training.moses.table import build_table
    from training.moses.types import MosesType
    from training.store.examples import ExampleStore

    mtype = MosesType.parse(moses_type)
    if mtype.collapse:
        raise UsageError(f"type {moses_type}: collapseff is a decoder setting; the table is the same "
                         "as for allff, give the type without it")
    return build_table(ExampleStore.open(store_dir), mtype, out, smoothing=smoothing, jobs=jobs,
                       scheduler=scheduler, memory=memory)


def feature_matrix(store_dir: str | os.PathLike, features: str, *, threshold: int = defaults.THRESHOLD,
                   heldout_fraction: float = 0.0, progress: bool = False, jobs: int | None = defaults.JOBS,
                   scheduler: str | None = None, memory: int | str | None = defaults.MEMORY,
                   direction: str | None = None):
    """Build (or reuse) the cached feature matrix; vocabulary counted without the held-out tail.

    direction: backward or forward, for a spec with neighbour features, whose rows hold that
    direction's neighbour (one matrix a direction); ignored otherwise."""
    from training.eval.split import heldout_sentences
    from training.features.matrix import build_matrix
    from training.store.examples import ExampleStore

    store = ExampleStore.open(store_dir)
    mask = ~heldout_sentences(store.n_sentences, heldout_fraction) if heldout_fraction else None
    return build_matrix(store, features, threshold, mask, cache=True, progress=progress, jobs=jobs,
                        scheduler=scheduler, memory=memory, direction=direction)
