"""Does a context model tell the reference's transitions from the wrong ones the decoder proposes?

Issue 48's trap: a context model trained on gold transitions can learn to read the
orientation off its neighbour's words, and then rate every transition it is shown as
plausible, the wrong ones too. Gold-event accuracy cannot see that, since it only ever shows
the model the reference's neighbour. This script shows it the others: for each phrase pair of
held-out sentences (or of a test set), up to --per-example wrong neighbours drawn from the
same sentence (training/features/transitions.py: disjoint source span, not a segmentation
of the gold neighbour; the orientation the two spans make), and counts how often a model
gives the gold transition the higher log-probability:

    log P(gold orientation | pair, gold neighbour)  >  log P(o' | pair, wrong neighbour)

which is what the decoder's reordering feature must do when two hypotheses differ in the
phrase before (or after) the same pair. A tie counts a half. Per system:
- the context model (its pair block plus the neighbour's block, as the decoder adds them);
- the same model's pair block alone (its context switched off: what the context adds);
- with --plain, a model without context (e.g. svm S6);
- with --table-model, Moses's table as the server serves it (`train --family lexical`).
A model without context scores a wrong neighbour by its orientation alone, so it can only
tell the two apart when the orientations differ; the context model can also tell two
neighbours of one orientation apart, which is the point of it, or be fooled by them.

    W=/work/mt/ja-en-kyoto
    python3 benchmarks/context_transitions.py --pairs $W/corpus/test \\
        --model $W/models/svm-S6-ctx/1/model.mrw --table-model $W/models/lexical-served/1/model.mrw

Prints a Markdown table per direction; --json writes the counts. It measures; it trains
nothing and asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
from scipy.special import log_softmax

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))      # this checkout's training/, whatever is installed
sys.path.insert(0, str(ROOT / "benchmarks"))

from disagreement import heldout_store                          # noqa: E402
from training.features.neighbour import (BACKWARD, FORWARD, gold_neighbour_words,  # noqa: E402
                                         pair_boundary_words)
from training.features.templates import extract_keys            # noqa: E402
from training.features.transitions import DISC, MONO, SWAP, wrong_neighbours  # noqa: E402
from training.modelfile.model import LoadedModel, load_model    # noqa: E402
from training.moses.types import MosesType, class_labels        # noqa: E402
from training.store.examples import ExampleStore                # noqa: E402

SENTENCES_PER_RANGE = 200          # whole sentences a read: bounded memory on any test set
ORIENTATIONS = {MONO: "mono", SWAP: "swap", DISC: "disc"}


def _count(own, gold_ctx, wrong_ctx, y, e_idx, c_idx, orient, counts) -> None:
    """counts[orientation of the wrong transition, same as gold?, (agree, tie, total)] += ..."""
    gold = log_softmax(own + gold_ctx, axis=1)[e_idx, y[e_idx]]
    wrong = log_softmax(own[e_idx] + wrong_ctx[c_idx], axis=1)[np.arange(e_idx.size), orient]
    same = (orient == y[e_idx]).astype(np.int64)
    for outcome, mask in ((0, gold > wrong), (1, gold == wrong), (2, slice(None))):
        np.add.at(counts, (orient[mask], same[mask], outcome), 1)


def _scores(model: LoadedModel, batch, direction: str) -> np.ndarray:
    """A model's per-class scores of `direction` before the softmax (a context model's pair
    block; a model without context: the log of its probabilities, which the softmax keeps)."""
    d, K = model.directions.index(direction), len(model.classes)
    if model.has_context:
        own, _ = model.scores(*extract_keys(batch, model.spec.pair_spec))
    else:
        own = np.log(np.maximum(model.predict_proba_keys(*extract_keys(batch, model.spec)), 1e-30))
    return np.ascontiguousarray(own[:, d * K:(d + 1) * K], dtype=np.float64)


def _neighbour_block(model: LoadedModel, tgt: np.ndarray, src: np.ndarray, direction: str) -> np.ndarray:
    d, K = model.directions.index(direction), len(model.classes)
    return np.ascontiguousarray(model.neighbour_scores(tgt, src, direction)[:, d * K:(d + 1) * K],
                                dtype=np.float64)


def transitions(store_path: Path, model_path: Path, plain_path: Path | None, table_path: Path | None,
                per_example: int, seed: int) -> dict:
    """The counts (JSON-ready) of each system and direction over the store's sentences."""
    model = load_model(model_path)
    if not model.has_context:
        raise SystemExit(f"--model {model_path} has no context (it was trained without neighbour features)")
    mtype = MosesType.parse(model.moses_type)
    if mtype.orientation != "msd":
        raise SystemExit(f"only msd types are measured (the model is {model.moses_type})")
    others = {name: load_model(p) for name, p in (("plain", plain_path), ("table", table_path)) if p is not None}
    for name, other in others.items():
        if other.moses_type != model.moses_type or other.has_context:
            raise SystemExit(f"--{name} must be a model of {model.moses_type} without context")
    store = ExampleStore.open(store_path)
    systems = ["context", "pair block alone", *others]
    counts = {d: {s: np.zeros((3, 2, 3), dtype=np.int64) for s in systems} for d in mtype.directions}
    for first in range(0, store.n_sentences, SENTENCES_PER_RANGE):
        lo = store.first_example_of(first)
        hi = store.first_example_of(first + SENTENCES_PER_RANGE)
        chunk = store.read_examples(lo, hi) if hi > lo else None
        if chunk is None:
            continue
        batch = chunk.batch
        for direction in mtype.directions:
            side = BACKWARD if direction == "backward" else FORWARD
            y = class_labels(store, mtype, direction, chunk.labels).astype(np.int64)
            e_idx, c_idx, orient = wrong_neighbours(chunk.sentence, chunk.src_start, chunk.src_end,
                                                    chunk.tgt_start, chunk.tgt_end, side, per_example,
                                                    seed + first)
            own = _scores(model, batch, direction)
            gold = _neighbour_block(model, *gold_neighbour_words(store, chunk.sentence, chunk.tgt_start,
                                                                 chunk.tgt_end, side), direction)
            wrong = _neighbour_block(model, *pair_boundary_words(batch, side), direction)
            zero = np.zeros_like(own)
            _count(own, gold, wrong, y, e_idx, c_idx, orient, counts[direction]["context"])
            _count(own, zero, zero, y, e_idx, c_idx, orient, counts[direction]["pair block alone"])
            for name, other in others.items():
                _count(_scores(other, batch, direction), zero, zero, y, e_idx, c_idx, orient,
                       counts[direction][name])
    return {"store": str(store_path), "model": str(model_path), "plain": str(plain_path or ""),
            "table": str(table_path or ""), "type": model.moses_type, "sentences": store.n_sentences,
            "examples": store.n_examples, "per_example": per_example, "seed": seed,
            "counts": {d: {s: c.tolist() for s, c in by.items()} for d, by in counts.items()}}


def _rate(c: np.ndarray) -> str:
    agree, tie, total = c.sum(axis=tuple(range(c.ndim - 1)))
    return f"{100 * (agree + 0.5 * tie) / total:.1f}%" if total else ""


def markdown(report: dict) -> str:
    out = []
    for direction, by in report["counts"].items():
        first = np.array(next(iter(by.values())))
        out += [f"{direction}: {int(first[..., 2].sum()):,} wrong transitions "
                f"(of which orientation mono / swap / disc: "
                + " / ".join(f"{int(first[o, :, 2].sum()):,}" for o in ORIENTATIONS) + ")", "",
                "| system | gold ranked above the wrong one | wrong one's orientation = gold's | "
                + " | ".join(f"wrong one {name}" for name in ORIENTATIONS.values()) + " |",
                "|---|---:|---:|" + "---:|" * len(ORIENTATIONS)]
        for system, c in by.items():
            c = np.array(c)
            out.append(f"| {system} | {_rate(c)} | {_rate(c[:, 1])} | "
                       + " | ".join(_rate(c[o]) for o in ORIENTATIONS) + " |")
        out.append("")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=Path, metavar="PREFIX", required=True,
                    help="the sentences: PREFIX.{ja,en,align} (e.g. a test set with its gold alignment)")
    ap.add_argument("--model", type=Path, required=True, help="the context model's weight file")
    ap.add_argument("--plain", type=Path, help="a model without context to compare (e.g. svm S6)")
    ap.add_argument("--table-model", type=Path, help="`train --family lexical` on the same training store")
    ap.add_argument("--per-example", type=int, default=8, help="wrong neighbours drawn per pair (default 8)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, help="write the counts here")
    args = ap.parse_args()

    extract_model = MosesType.parse(load_model(args.model).moses_type).extract_model
    with tempfile.TemporaryDirectory(prefix="transitions-") as tmp:
        store = heldout_store(Path(), 0, extract_model, Path(tmp), args.pairs)
        report = transitions(store, args.model, args.plain, args.table_model, args.per_example, args.seed)
    report["pairs"] = str(args.pairs)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(f"{report['sentences']:,} sentence pairs, {report['examples']:,} phrase pairs; type {report['type']}; "
          f"{report['per_example']} wrong neighbours drawn per pair (seed {report['seed']})\n")
    print(markdown(report))


if __name__ == "__main__":
    main()
