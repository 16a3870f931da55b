"""Make the scale benchmark's corpus: ja-en copied N times, its vocabulary growing as real text's does.

Copy 0 is the 50k ja-en pairs as they are. Every further copy k renames, on each side,
a seeded share of the rare word types (seen at most --rare-count times in ja-en) to a
new spelling `word~k` that no other copy uses, so every copy brings new types as more
text does (the rare tail grows, the frequent words stay), while the sentences, their
lengths and alignments, and so the number of extracted examples per copy, stay those of
ja-en. The rule is a pure function of (seed, copy, side, word): anyone rebuilds the same
bytes. The corpus is written to --out (keep it out of the repository) as the usual
train.ja, train.en, train.align; the script prints sentence pairs, bytes, vocabulary
sizes per side and the number of examples `moses-reorder extract` will make (copies x
the examples of ja-en, extracted once here for the count).

    python benchmarks/make_corpus.py --copies 32 --out /work/scale/ja-en-32x   # 1.6M pairs, ~51M examples
    python benchmarks/make_corpus.py --copies 10 --out /work/scale/ja-en-10x   # 500k pairs, ~16M examples

Roughly 15 s per 10 copies; 32 copies are 200 MB of text.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "ja-en"
SIDES = ("ja", "en")


def renamed(word: str, copy: int, side: str, seed: int, share: float) -> bool:
    """Whether copy `copy` renames this rare type: a seeded hash below `share`."""
    digest = hashlib.blake2b(f"{seed}\t{copy}\t{side}\t{word}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") < share * 2.0 ** 64


def make_corpus(data: Path, out: Path, copies: int, *, rare_count: int = 5, share: float = 1 / 3,
                seed: int = 0) -> dict:
    lines = {side: (data / f"train.{side}").read_text(encoding="utf-8").split("\n")[:-1] for side in SIDES}
    align = (data / "train.align").read_bytes()
    rare = {}
    for side in SIDES:
        counts = Counter(t for line in lines[side] for t in line.split(" ") if t)
        rare[side] = sorted(w for w, c in counts.items() if c <= rare_count)
    out.mkdir(parents=True, exist_ok=True)
    vocab = {side: set() for side in SIDES}
    for side in SIDES:
        path = out / f"train.{side}"
        tmp = path.with_suffix(path.suffix + ".tmp")
        with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
            for copy in range(copies):
                mapping = {w: f"{w}~{copy}" for w in rare[side]
                           if copy and renamed(w, copy, side, seed, share)}
                text = "".join(" ".join(mapping.get(t, t) for t in line.split(" ")) + "\n"
                               for line in lines[side]) if mapping else "".join(l + "\n" for l in lines[side])
                vocab[side].update(t for line in text.split("\n") for t in line.split(" ") if t)
                fh.write(text)
        os.replace(tmp, path)
    tmp = out / "train.align.tmp"
    with open(tmp, "wb") as fh:
        for _ in range(copies):
            fh.write(align)
    os.replace(tmp, out / "train.align")
    return {"copies": copies, "sentence_pairs": copies * len(lines["ja"]),
            "bytes": {f"train.{s}": (out / f"train.{s}").stat().st_size for s in (*SIDES, "align")},
            "vocab": {s: len(vocab[s]) for s in SIDES},
            "vocab_ja_en": {s: len({t for line in lines[s] for t in line.split(" ") if t}) for s in SIDES},
            "rule": {"rare_count": rare_count, "share": share, "seed": seed}}


def examples_per_copy(data: Path, model: str) -> int:
    """Examples `moses-reorder extract --model M` makes from ja-en (each copy makes as many)."""
    sys.path.insert(0, str(ROOT))
    from training.api import extract_store

    with tempfile.TemporaryDirectory() as work:
        meta = extract_store(data / "train.ja", data / "train.en", data / "train.align", Path(work) / "s",
                             models=[model], jobs=1)
    return int(meta["counts"]["examples"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copies", type=int, default=32, help="copies of ja-en (default 32: 1.6M pairs)")
    parser.add_argument("--out", type=Path, required=True, help="directory for train.{ja,en,align}")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the ja-en directory")
    parser.add_argument("--rare-count", type=int, default=5, help="a type seen at most this often is rare")
    parser.add_argument("--share", type=float, default=1 / 3, help="share of rare types each copy renames")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", default="wbe-msd", help="extraction model for the example count")
    args = parser.parse_args()
    info = make_corpus(args.data, args.out, args.copies, rare_count=args.rare_count, share=args.share,
                       seed=args.seed)
    per_copy = examples_per_copy(args.data, args.model)
    info["examples"] = {"model": args.model, "per_copy": per_copy, "total": per_copy * args.copies}
    print(json.dumps(info, indent=2))


if __name__ == "__main__":
    main()
