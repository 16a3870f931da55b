"""Which decoder-context features carry a context model's weight (issue 48 step 5).

    python benchmarks/context_weights.py --model CTX.mrw --plain PLAIN.mrw --src train.ja --tgt train.en [--top 12]

A weight file keeps hashed keys only, so the corpus's words are hashed again through
training/features/neighbour.py (the one implementation of the context features) and looked
up: for each side (prev: the backward neighbour, next: the forward one) and template (the
target word, its source word), how many keys the model kept, their share of the context
weight, and the words whose weights move the score most (the spread between the largest and
smallest class weight, times how often the word occurs). The context keys are the model's
keys that the model without context (`--plain`, trained on the same store) does not have;
what the word templates do not account for is the conjunction template (target & source).
What it must not do: change or retrain anything.
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from training.features.hashing import hash_tokens  # noqa: E402
from training.features.keytable import KeyIndex  # noqa: E402
from training.features.neighbour import BACKWARD, FORWARD, neighbour_keys  # noqa: E402
from training.modelfile.model import load_model  # noqa: E402

SPECIAL = ("<s>", "</s>", "<unaligned>")


def vocabulary(path: Path) -> collections.Counter:
    """Word counts of a tokenized text file, streamed a line at a time."""
    counts: collections.Counter = collections.Counter()
    with open(path, encoding="utf-8") as f:
        for line in f:
            counts.update(line.split())
    for token in SPECIAL:
        counts.setdefault(token, 0)
    return counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, required=True, help="the context model's weight file")
    ap.add_argument("--plain", type=Path, required=True, help="the same model without context")
    ap.add_argument("--src", type=Path, required=True, help="the training source text")
    ap.add_argument("--tgt", type=Path, required=True, help="the training target text")
    ap.add_argument("--top", type=int, default=12, help="words listed per side and template")
    args = ap.parse_args()
    model = load_model(args.model, warm_up=False)
    plain = load_model(args.plain, warm_up=False)
    keys, weights = model.keys, np.asarray(model.weights)
    rows_of = KeyIndex(keys).lookup
    k = len(model.classes)
    context = KeyIndex(plain.keys).lookup(keys) < 0
    # the weight a key can move: its spread over the classes of the direction it scores
    spread = {d: weights[:, i * k:(i + 1) * k].max(axis=1) - weights[:, i * k:(i + 1) * k].min(axis=1)
              for i, d in enumerate((BACKWARD, FORWARD))}
    total = {d: float(spread[d][context].sum()) for d in spread}
    print(f"{args.model}: {len(keys):,} keys, {int(context.sum()):,} of them context keys "
          f"(not in {args.plain.name}'s {len(plain.keys):,})")
    print("\n| side | template | words in the corpus | keys in the model | share of the side's context weight |")
    print("|---|---|---|---|---|")
    vocabularies = []  # (template, its key column, words, their counts, their hashes), read once
    for template, column, path in (("target word", 0, args.tgt), ("source word", 1, args.src)):
        counts = vocabulary(path)
        words = list(counts)
        vocabularies.append((template, column, words, np.array([counts[w] for w in words]), hash_tokens(words)))
    tops = []
    for side, direction in (("prev", BACKWARD), ("next", FORWARD)):
        accounted = 0.0
        for template, column, words, counts, hashes in vocabularies:
            other = np.zeros_like(hashes)
            rows = rows_of(neighbour_keys(hashes if column == 0 else other,
                                          hashes if column == 1 else other, direction)[:, column])
            found = rows >= 0
            mass = float(spread[direction][rows[found]].sum())
            accounted += mass
            print(f"| {side} | {template} | {len(words):,} | {int(found.sum()):,} | "
                  f"{100 * mass / total[direction]:.1f}% |")
            influence = np.where(found, spread[direction][rows] * counts, 0.0)
            best = np.argsort(-influence)[:args.top]
            tops.append((side, template, [(words[i], float(spread[direction][rows[i]])) for i in best if found[i]]))
            special = [(w, float(spread[direction][rows[i]])) for i, w in enumerate(words)
                       if w in SPECIAL and found[i]]
            tops.append((side, f"{template}, the edge and unaligned tokens", special))
        print(f"| {side} | target & source (the rest) | | | {100 * (1 - accounted / total[direction]):.1f}% |")
    for side, template, best in tops:
        listed = ", ".join(f"{w} ({s:.2f})" for w, s in best)
        print(f"\n{side}, {template} (spread in brackets; words by spread x count): {listed}")


if __name__ == "__main__":
    main()
