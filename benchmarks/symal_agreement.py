"""Check training.corpus.symmetrize against Moses's own `symal` binary on real eflomal output.

Not a test (it needs a symal you built from a Moses checkout, which CI does not have);
it prints, per symmetrization, how many sentences differ (expected: 0). Build symal
from mosesdecoder's symal/ directory (cmd.c with gcc, symal.cpp with g++, link both),
then:

    python benchmarks/symal_agreement.py --symal /path/to/symal --pairs 5000

symal reads giza2bal's format: per sentence a count, the target words, `#`, for each
target word its single source link (1-based, 0 = none), then the source words, `#`, for
each source word its single target link. eflomal's forward output gives each target
word one link and its reverse output each source word, so they fill those two slots.
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from training.corpus.align import read_parallel, run_eflomal
from training.corpus.pharaoh import parse_links
from training.corpus.symmetrize import symmetrize

ROOT = Path(__file__).resolve().parents[1]
JA_EN = ROOT.parent / "shared" / "data" / "ja-en"

SYMAL_FLAGS = {
    "intersection": ["-a=i"],
    "union": ["-a=u"],
    "grow": ["-a=g", "-d=no", "-f=no", "-b=no"],
    "grow-diag": ["-a=g", "-d=yes", "-f=no", "-b=no"],
    "grow-final": ["-a=g", "-d=no", "-f=yes", "-b=no"],
    "grow-final-and": ["-a=g", "-d=no", "-f=yes", "-b=yes"],
    "grow-diag-final": ["-a=g", "-d=yes", "-f=yes", "-b=no"],
    "grow-diag-final-and": ["-a=g", "-d=yes", "-f=yes", "-b=yes"],
}


def one_link_per_word(links, offsets, lengths, side):
    """Per sentence, for each word on `side`, its 1-based partner (0 = unlinked)."""
    rows = []
    for k in range(lengths.shape[0]):
        partner = np.zeros(lengths[k], dtype=np.int64)
        sent = links[offsets[k]:offsets[k + 1]]
        partner[sent[:, side]] = sent[:, 1 - side] + 1
        rows.append(partner)
    return rows


def bal_text(src_len, tgt_len, fwd, fwd_off, rev, rev_off) -> str:
    b = one_link_per_word(fwd, fwd_off, tgt_len, 1)  # target word -> source
    a = one_link_per_word(rev, rev_off, src_len, 0)  # source word -> target
    out = []
    for k in range(src_len.shape[0]):
        out.append("1")
        out.append(f"{tgt_len[k]} {' '.join(['t'] * tgt_len[k])} # {' '.join(map(str, b[k]))}")
        out.append(f"{src_len[k]} {' '.join(['s'] * src_len[k])} # {' '.join(map(str, a[k]))}")
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--symal", required=True, help="Moses's symal binary")
    parser.add_argument("--pairs", type=int, default=5000, help="first N ja-en training pairs")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for ext in ("ja", "en"):
            lines = (JA_EN / f"train.{ext}").read_bytes().split(b"\n")[: args.pairs]
            (tmp / f"train.{ext}").write_bytes(b"\n".join(lines) + b"\n")
        source, target = read_parallel(tmp / "train.ja", tmp / "train.en")
        (fwd, fwd_off), (rev, rev_off) = run_eflomal(source, target)
        (tmp / "in.bal").write_text(bal_text(source.lengths, target.lengths, fwd, fwd_off, rev, rev_off))
        print(f"{args.pairs} ja-en pairs, eflomal forward {fwd.shape[0]} links, reverse {rev.shape[0]}")
        print("| symmetrization | links (ours) | sentences differing from symal |")
        print("|---|---:|---:|")
        for method, flags in SYMAL_FLAGS.items():
            result = subprocess.run([args.symal, *flags, f"-i={tmp / 'in.bal'}"], capture_output=True, check=True)
            theirs, their_off = parse_links(result.stdout, "symal output")
            ours, our_off = symmetrize(source.lengths, target.lengths, rev, rev_off, fwd, fwd_off, method)
            differing = sum(
                set(map(tuple, ours[our_off[k]:our_off[k + 1]].tolist()))
                != set(map(tuple, theirs[their_off[k]:their_off[k + 1]].tolist()))
                for k in range(args.pairs)
            )
            print(f"| {method} | {ours.shape[0]} | {differing} |")


if __name__ == "__main__":
    main()
