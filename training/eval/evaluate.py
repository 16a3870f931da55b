"""Evaluate one weight file on the held-out sentences of an example store.

The model scores the held-out phrase pairs exactly as the server would (PairBatch ->
LoadedModel.predict_proba), each direction's block is compared with the store's labels,
and every number is reported overall and split by whether the phrase pair (its
identity key) occurs in the training sentences: the lexical table only knows seen
pairs, classifiers generalise to unseen ones, so the split is where families differ.
The report carries the model's signature (family, features, hyper-parameters, corpus
fingerprint, versions), like sacrebleu's, so a number can be reproduced.

It must not train: it reads a model and a store and returns a JSON-ready dict.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from training import __version__
from training.errors import InputError
from training.features.batch import pair_slice
from training.features.matrix import (MERGE_GROUPS_PER_JOB, SUB_BATCH_PAIRS, count_range, direction_index,
                                      merge_partitions, partition_groups)
from training.features.neighbour import gold_neighbour_words
from training.features.rowchunks import ArrayReader
from training.features.templates import pair_keys
from training.eval.metrics import add_totals, slice_totals, summary_of_totals
from training.modelfile.model import LoadedModel, load_model
from training.moses.types import MosesType, class_labels
from training.npyfile import NpyAppender
from training.eval.split import heldout_sentences
from training.store.examples import ExampleStore


RANGE_BYTES_PER_EXAMPLE = 4096  # a task's budget per example (batch, keys, scores): sets the range size
# Ranges are whole multiples of MIN_RANGE_EXAMPLES, the block whose metric floats are summed
# as one (score_range), which must divide SUB_BATCH_PAIRS.
MIN_RANGE_EXAMPLES, MAX_RANGE_EXAMPLES = 4096, 1 << 20
# Store examples that pay for a local worker (scanning pair keys ~1 us an example, scoring
# the held-out tenth more; a spawned worker ~1.5 s of CPU to start): below 2 of them, one
# in-process job (parallel.jobs_that_pay).
WORKER_EXAMPLES = 2_000_000


def model_heldout_fraction(model: LoadedModel, default: float = 0.1) -> float:
    """The held-out fraction the model was trained with (so eval never tests on training)."""
    training = model.metadata.get("training") or {}
    value = training.get("heldout_fraction")
    return float(value) if value is not None else default


def signature(model: LoadedModel, heldout_fraction: float) -> dict[str, Any]:
    """What made the numbers, in a fixed order (sacrebleu-style)."""
    meta = model.metadata
    params = meta.get("hyperparameters") or {}
    hp = ",".join(f"{k}={v}" for k, v in sorted(params.items())
                  if k not in ("verbose", "n_classes") and v is not None)
    selection = (meta.get("training") or {}).get("selection") or {}
    return {
        "family": meta["family"], "type": meta["moses_type"], "features": meta["features"],
        "threshold": meta["threshold"], "select": selection.get("rule"), "hp": hp or None,
        "link": meta["link"], "corpus": (meta.get("corpus_fingerprint") or "")[:12] or None,
        "heldout": heldout_fraction, "model-version": meta.get("software_version"),
        "eval-version": __version__,
    }


def sentence_digests(store: ExampleStore, sentences: np.ndarray) -> set[bytes]:
    """A digest of each given sentence pair's tokens (source and target), comparable across
    stores: tokens are compared by their stable hashes, not by store-local ids."""
    s = store.sentences
    src, tgt = store.src_hashes, store.tgt_hashes
    out = set()
    for i in np.asarray(sentences, dtype=np.int64).tolist():
        h = hashlib.blake2b(digest_size=16)
        h.update(src[s["src_ids"][s["src_offsets"][i]:s["src_offsets"][i + 1]]].tobytes())
        h.update(b"|")
        h.update(tgt[s["tgt_ids"][s["tgt_offsets"][i]:s["tgt_offsets"][i + 1]]].tobytes())
        out.add(h.digest())
    return out


def training_overlap(model: LoadedModel, store: ExampleStore, heldout: np.ndarray, fraction: float
                     ) -> dict[str, Any]:
    """Are the evaluated sentences really held out from the model's training?

    The model records its training store and held-out fraction. If that store is at hand,
    the evaluated sentences are compared with its training sentences (fit and calibration)
    token for token; otherwise, with the same corpus (fingerprint), the two held-out
    fractions tell; with another corpus nothing can be told. Returns held_out (True,
    False or None = unknown), overlap_sentences and a warning (None when held out)."""
    training = model.metadata.get("training") or {}
    trained_fraction = training.get("heldout_fraction")
    n_eval = int(heldout.sum())
    store_corpus = (store.meta.get("corpus") or {}).get("sha256", "")
    model_corpus = model.metadata.get("corpus_fingerprint") or ""
    overlap = None
    train_store = None
    if training.get("store") and trained_fraction is not None:
        try:
            train_store = ExampleStore.open(training["store"])
        except (InputError, OSError):
            train_store = None
    if train_store is not None and (train_store.meta.get("corpus") or {}).get("sha256", "") == model_corpus:
        trained = np.flatnonzero(~heldout_sentences(train_store.n_sentences, float(trained_fraction)))
        overlap = len(sentence_digests(store, np.flatnonzero(heldout)) & sentence_digests(train_store, trained))
    elif store_corpus and store_corpus == model_corpus and trained_fraction is not None:
        trained = ~heldout_sentences(store.n_sentences, float(trained_fraction))
        overlap = int(np.count_nonzero(heldout & trained))
    if overlap is None:
        return {"held_out": None, "overlap_sentences": None, "warning": (
            f"the store's corpus ({store_corpus[:12] or 'unknown'}) is not the one the model was trained on "
            f"({model_corpus[:12] or 'unknown'}) and the model's training store is not at hand, so eval cannot "
            "tell whether the evaluated sentences were among the model's training sentences: if the corpora "
            "overlap, these figures are not held out")}
    if overlap:
        cause = (f" (--heldout-fraction {fraction:g} is larger than the {float(trained_fraction):g} the model "
                 "was trained with)" if store_corpus == model_corpus and fraction > float(trained_fraction) else "")
        return {"held_out": False, "overlap_sentences": overlap, "warning": (
            f"{overlap:,} of the {n_eval:,} evaluated sentences were training sentences of the model{cause}: "
            "these figures are not held out")}
    return {"held_out": True, "overlap_sentences": 0, "warning": None}


def seen_heldout_pairs(store: ExampleStore, heldout: np.ndarray, out_path: str | os.PathLike,
                       runner=None, range_examples: int = MAX_RANGE_EXAMPLES, min_groups: int = 1) -> int:
    """Write to `out_path` (.npy) the sorted pair keys of the held-out sentences that also
    occur in the training ones; returns how many.

    No key set that grows with the store is held: both parts are counted as the feature
    stage counts its keys (features/matrix.py count_range with the "pair" template, which
    is templates.pair_keys), a task a range of `range_examples` examples, each range's
    distinct keys spilled sorted and cut into hash partitions. Then each group of
    consecutive partitions holding at most `range_examples` held-out entries
    (matrix.partition_groups; at least about `min_groups` groups) is a task: its held-out
    keys merged, the training spills' slices of the same partitions looked up in them
    one slice at a time, the seen ones returned and appended to the file in partition
    order, which is key order. So a task holds about one range's worth of keys, and the
    range size is set by --memory. Tasks run on `runner` (a training.parallel
    TaskRunner; None: in this process, one after the other)."""
    run = runner.iter if runner is not None else map
    path = str(Path(store.path).resolve())
    # Held-out sentences are the tail: training examples come before the first held-out one.
    first = store.first_example_of(int(np.argmax(heldout))) if heldout.any() else store.n_examples

    def ranges(lo: int, hi: int) -> list[tuple[int, int]]:
        return [(a, min(a + range_examples, hi)) for a in range(lo, hi, range_examples)]

    with tempfile.TemporaryDirectory(prefix="seen-") as tmp:
        heldout_path, train_path = str(Path(tmp) / "heldout.npy"), str(Path(tmp) / "train.npy")
        np.save(heldout_path, heldout)
        np.save(train_path, ~heldout)
        tasks = [(path, "pair", lo, hi, heldout_path, str(Path(tmp) / f"heldout-{i:05d}"))
                 for i, (lo, hi) in enumerate(ranges(first, store.n_examples))]
        n_heldout = len(tasks)
        tasks += [(path, "pair", lo, hi, train_path, str(Path(tmp) / f"train-{i:05d}"))
                  for i, (lo, hi) in enumerate(ranges(0, first))]
        spills = list(run(count_range, tasks))
        heldout_spills, train_spills = spills[:n_heldout], spills[n_heldout:]
        groups = partition_groups(heldout_spills, range_examples, min_groups)
        out = NpyAppender(Path(out_path), np.uint64)
        try:
            for seen in run(seen_in_partitions, [(heldout_spills, train_spills, lo, hi) for lo, hi in groups]):
                out.append(seen)
            out.finish()
        except BaseException:
            out.close()
            raise
    return out.count


def seen_in_partitions(task: tuple) -> np.ndarray:
    """Task: the sorted keys of partitions lo..hi-1 that are in a held-out spill and in a
    training spill (the held-out keys merged, each training spill's slice looked up in them)."""
    heldout_spills, train_spills, lo, hi = task
    keys = merge_partitions((heldout_spills, lo, hi, 0, None))[0]
    if keys.shape[0] == 0:
        return keys
    seen = np.zeros(keys.shape[0], dtype=bool)
    for prefix, bounds in train_spills:
        a, b = int(bounds[lo]), int(bounds[hi])
        if b > a:
            train = np.load(prefix + ".keys.npy", mmap_mode="r")[a:b]
            pos = np.minimum(np.searchsorted(keys, train), keys.shape[0] - 1)
            seen[pos[keys[pos] == train]] = True
    return keys[seen]


def in_sorted_file(keys: np.ndarray, sorted_keys: np.ndarray, block: int) -> np.ndarray:
    """Which of `keys` occur in `sorted_keys` (ascending, unique; a memory-mapped array is
    read `block` keys at a time with pread, features/rowchunks.py, so only one block of
    it is ever resident). `keys` is sorted in place."""
    found = np.zeros(keys.shape[0], dtype=bool)
    n = sorted_keys.shape[0]
    if n == 0 or keys.shape[0] == 0:
        return found
    order = np.argsort(keys)
    keys.sort()  # in place: keys[order]
    queries = keys
    reader = ArrayReader(sorted_keys)
    try:
        for a in range(0, n, block):
            part = reader.read([(a, min(a + block, n))])
            i, j = np.searchsorted(queries, part[0], "left"), np.searchsorted(queries, part[-1], "right")
            if i == j:
                continue
            q = queries[i:j]
            pos = np.searchsorted(part, q)  # q lies within [part[0], part[-1]]: pos < len(part)
            found[order[i:j][part[pos] == q]] = True
    finally:
        reader.close()
    return found


_MODEL: dict[str, LoadedModel] = {}  # a worker keeps the model it scored with last


def score_range(task: tuple) -> list[dict[str, dict[str, dict]]] | None:
    """Task: the metric totals (metrics.slice_totals) of the held-out examples lo..hi-1,
    per direction and slice (all / seen / unseen), one set per `block` examples from lo,
    scored a sub-batch at a time as the server scores them; None when the range holds no
    held-out example. Ranges start on block boundaries, so the caller adds the same
    blocks' floats in the same order whatever the range size (--jobs, --memory)."""
    model_path, store_path, lo, hi, heldout_path, seen_path, block = task
    model = _MODEL.get(model_path)
    if model is None:
        _MODEL.clear()
        model = _MODEL[model_path] = load_model(model_path, warm_up=False)  # scored right below
    store = ExampleStore.open(store_path)
    chunk = store.read_examples(lo, hi, np.load(heldout_path, mmap_mode="r"))
    if chunk is None:
        return None
    mtype = MosesType.parse(model.moses_type)
    K = len(mtype.classes)
    labels = {d: class_labels(store, mtype, d, chunk.labels).astype(np.int64) for d in mtype.directions}
    blocks: list[dict[str, dict[str, dict]]] = []
    n = chunk.batch.n_pairs
    keys = np.empty(n, dtype=np.uint64)
    for a in range(0, n, SUB_BATCH_PAIRS):
        keys[a:a + SUB_BATCH_PAIRS] = pair_keys(pair_slice(chunk.batch, a, min(a + SUB_BATCH_PAIRS, n)))
    seen_all = in_sorted_file(keys, np.load(seen_path, mmap_mode="r"), min(SUB_BATCH_PAIRS, hi - lo))
    del keys
    for a in range(0, n, SUB_BATCH_PAIRS):
        b = min(a + SUB_BATCH_PAIRS, n)
        probs = example_probabilities(model, store, chunk, a, b)
        for c in range(a, b, block):  # block divides SUB_BATCH_PAIRS: no block spans two sub-batches
            e = min(c + block, b)
            seen = seen_all[c:e]
            totals = {d: {} for d in mtype.directions}
            for d, direction in enumerate(mtype.directions):
                y, p = labels[direction][c:e], probs[c - a:e - a, d * K:(d + 1) * K]
                for name, mask in (("all", slice(None)), ("seen", seen), ("unseen", ~seen)):
                    totals[direction][name] = slice_totals(y[mask], p[mask], K)
            blocks.append(totals)
    return blocks


def example_probabilities(model: LoadedModel, store: ExampleStore, chunk, a: int, b: int) -> np.ndarray:
    """The model's probabilities [b - a x outputs] for examples a..b-1 of a store chunk: a
    model with context scores each next to the neighbour the reference gives it (the
    gold neighbour, training/features/neighbour.py), as it was trained."""
    batch = pair_slice(chunk.batch, a, b)
    if not model.has_context:
        return model.predict_proba(batch)
    return model.predict_proba_next_to(batch, {
        direction: gold_neighbour_words(store, chunk.sentence[a:b], chunk.tgt_start[a:b], chunk.tgt_end[a:b],
                                        direction_index(direction))
        for direction in model.directions})


def evaluate(model_path: str | os.PathLike, store_dir: str | os.PathLike,
             heldout_fraction: float | None = None, model: LoadedModel | None = None, *,
             jobs: int | None = None, scheduler: str | None = None,
             memory: int | str | None = None) -> dict[str, Any]:
    """The full report as a JSON-ready dict (see training/report.py for its text form).

    The held-out examples are scored as tasks over example ranges (training/parallel.py:
    `jobs` local processes or a Dask `scheduler`; the same report for any), each a
    sub-batch at a time; only the metric totals come back, so memory does not grow with
    the held-out set. The seen/unseen split is found with spilled key sets
    (seen_heldout_pairs), so it does not grow with the store either. `memory` sizes the
    ranges, and with them the spills' merge groups and lookup blocks."""
    from training import defaults
    from training.parallel import jobs_that_pay, parse_memory, resolve_jobs, task_runner

    # No serving warm-up: it would compile the request parser, which evaluation never uses.
    model = model or load_model(model_path, warm_up=False)
    store = ExampleStore.open(store_dir)
    fraction = model_heldout_fraction(model) if heldout_fraction is None else heldout_fraction
    mtype = MosesType.parse(model.moses_type)
    heldout = heldout_sentences(store.n_sentences, fraction)
    if not heldout.any():
        raise InputError(f"held-out fraction {fraction} leaves no held-out sentence", store_dir)
    jobs = jobs_that_pay(resolve_jobs(jobs), store.n_examples, WORKER_EXAMPLES, scheduler)
    share = parse_memory(memory if memory is not None else defaults.MEMORY) // jobs
    # Ranges are whole blocks of MIN_RANGE_EXAMPLES: the blocks' floats are added in one order
    # for any range size, so the report is the same for any --jobs and --memory.
    block = MIN_RANGE_EXAMPLES
    if SUB_BATCH_PAIRS % block:
        raise ValueError(f"MIN_RANGE_EXAMPLES {block} must divide SUB_BATCH_PAIRS {SUB_BATCH_PAIRS}")
    size = max(block, min(MAX_RANGE_EXAMPLES, share // RANGE_BYTES_PER_EXAMPLE) // block * block)
    # Held-out sentences are the tail: ranges start at the first held-out example.
    first = store.first_example_of(int(np.argmax(heldout)))
    with tempfile.TemporaryDirectory(prefix="eval-") as tmp, task_runner(jobs=jobs, scheduler=scheduler) as runner:
        np.save(Path(tmp) / "heldout.npy", heldout)
        seen_heldout_pairs(store, heldout, Path(tmp) / "seen.npy", runner=runner, range_examples=size,
                           min_groups=MERGE_GROUPS_PER_JOB * jobs if jobs > 1 or scheduler else 1)
        tasks = [(str(Path(model_path).resolve()), str(Path(store.path).resolve()), lo,
                  min(lo + size, store.n_examples), str(Path(tmp) / "heldout.npy"), str(Path(tmp) / "seen.npy"), block)
                 for lo in range(first, store.n_examples, size)]
        parts = [t for t in runner.run(score_range, tasks) if t is not None]
    if not parts:
        raise InputError("the held-out sentences hold no examples", store.path)
    totals = {d: {name: None for name in ("all", "seen", "unseen")} for d in mtype.directions}
    for part in parts:
        for blk in part:
            for d in mtype.directions:
                for name in totals[d]:
                    totals[d][name] = add_totals(totals[d][name], blk[d][name])
    first_direction = totals[mtype.directions[0]]
    n_heldout = int(first_direction["all"]["confusion"].sum())
    n_seen = int(first_direction["seen"]["confusion"].sum())
    store_corpus = (store.meta.get("corpus") or {}).get("sha256", "")
    report: dict[str, Any] = {
        "model": str(Path(model_path)),
        "store": str(Path(store_dir)),
        "signature": signature(model, fraction),
        "same_corpus": bool(store_corpus) and store_corpus == model.metadata.get("corpus_fingerprint"),
        **training_overlap(model, store, heldout, fraction),
        "split": {
            "heldout_fraction": fraction,
            "heldout_sentences": int(heldout.sum()),
            "heldout_examples": n_heldout,
            "seen_examples": n_seen,
            "description": (f"last {fraction * 100:g}% of sentences ({int(heldout.sum()):,} of {store.n_sentences:,}), "
                            f"{n_heldout:,} phrase pairs, {n_seen / max(n_heldout, 1):.1%} seen in training"),
        },
        "directions": {d: {name: summary_of_totals(t, mtype.classes) for name, t in totals[d].items()}
                       for d in mtype.directions},
    }
    return report
