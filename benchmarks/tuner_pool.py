"""How good a tuner's weights are on the n-best pool it tuned on (issue 16, 2026-11-27).

mert-moses.pl keeps every iteration's n-best lists as runN.features.dat / runN.scores.dat
(BLEU sufficient statistics per hypothesis) in its working directory. Picking each dev
sentence's model-best hypothesis from the whole pool under a weight vector gives a corpus
BLEU that needs no decoding: weights that score lower on the very pool they were fitted to
were not fitted to BLEU. That is how batch-MIRA's failure on ja-en was told apart from a
weak reordering model: on Lexical's batch-MIRA pool its tuned weights score 31.7, MERT's
36.0, PRO's 35.7, and kbmira started from MERT's weights falls to 30.9 (25.7 after one
epoch), with output 1.09x the reference length (svm S6: 20.7 against 34.9, 1.27x).

    python3 benchmarks/tuner_pool.py WORK/runs/lexical-dl12/mira1/mert \\
        --ini WORK/runs/lexical-dl12/mert1/tuned.ini --ini WORK/runs/lexical-dl12/mira1/tuned.ini \\
        --kbmira /work/moses/inst/bin/kbmira --kbmira-from WORK/runs/lexical-dl12/mert1/tuned.ini

It measures; it asserts nothing. The working directories are not in the record
(benchmarks/translation-runs keeps tuned weights and outputs), so it runs where the study ran.
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from translation import read_ini   # the study's moses.ini reader (this script's directory is on sys.path)

NGRAM = 4


def iterations(mert_dir: Path) -> list[tuple[Path, Path]]:
    """(runN.features.dat, runN.scores.dat) in iteration order."""
    features = sorted(mert_dir.glob("run*.features.dat"), key=lambda p: int(p.name[3:].split(".")[0]))
    return [(f, f.with_name(f.name.replace("features", "scores"))) for f in features]


def read_pool(mert_dir: Path) -> tuple[list[str], list[np.ndarray], list[np.ndarray]]:
    """Feature names, and per dev sentence the features and BLEU statistics of every hypothesis of every iteration."""
    runs = iterations(mert_dir)
    if not runs:
        raise SystemExit(f"{mert_dir}: no run*.features.dat (a mert-moses.pl working directory?)")
    names: list[str] = []
    feats: dict[int, list[list[float]]] = {}
    stats: dict[int, list[list[float]]] = {}
    for features, scores in runs:
        for path, store in ((features, feats), (scores, stats)):
            sentence = -1
            for line in open(path, encoding="utf-8"):
                if line.startswith(("FEATURES_TXT_BEGIN", "SCORES_TXT_BEGIN")):
                    head = line.split()
                    sentence = int(head[1])
                    if store is feats and not names:
                        names = head[4:]
                    continue
                if not line.startswith(("FEATURES_TXT_END", "SCORES_TXT_END")):
                    store.setdefault(sentence, []).append([float(x) for x in line.split()])
    order = sorted(feats)
    return names, [np.array(feats[s])[:, :len(names)] for s in order], [np.array(stats[s]) for s in order]


def dense_weights(ini: Path, names: list[str]) -> np.ndarray:
    """A moses.ini's [weight] section in the order of the pool's feature names (`LM0_0`, ...)."""
    values = {}
    for line in read_ini(ini).get("weight", []):
        name, rest = line.split("=", 1)
        values.update((f"{name.strip()}_{i}", float(v)) for i, v in enumerate(rest.split()))
    missing = [n for n in names if n not in values]
    if missing:
        raise SystemExit(f"{ini}: no weight for {', '.join(missing)}")
    return np.array([values[n] for n in names])


def pool_bleu(weights: np.ndarray, feats: list[np.ndarray], stats: list[np.ndarray]) -> tuple[float, float]:
    """Corpus BLEU (%) and length ratio of each sentence's model-best hypothesis in the pool."""
    total = sum(s[int(np.argmax(f @ weights))] for f, s in zip(feats, stats))
    log_precision = sum(math.log(total[2 * k] / total[2 * k + 1]) for k in range(NGRAM)) / NGRAM
    hyp, ref = total[1], total[2 * NGRAM]
    return 100 * min(1.0, math.exp(1 - ref / hyp)) * math.exp(log_precision), hyp / ref


def kbmira(binary: str, mert_dir: Path, names: list[str], start: np.ndarray, epochs: int) -> np.ndarray:
    """Moses's kbmira on the whole pool from `start`, as mert-moses.pl runs it (fixed seed)."""
    with tempfile.TemporaryDirectory() as tmp:
        init, out = Path(tmp) / "init.dense", Path(tmp) / "out"
        # kbmira's dense-init names repeat a feature's name for each of its values
        init.write_text("".join(f"{n.rsplit('_', 1)[0]}= {float(w)!r}\n" for n, w in zip(names, start)))
        cmd = [binary, "--dense-init", str(init), "-o", str(out), "-r", "1", "-J", str(epochs)]
        for features, scores in iterations(mert_dir):
            cmd += ["--ffile", str(features), "--scfile", str(scores)]
        subprocess.run(cmd, check=True, capture_output=True)
        weights = dict(line.split() for line in out.read_text().splitlines() if line.startswith("F"))
    return np.array([float(weights[f"F{i}"]) for i in range(len(names))])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("mert_dir", type=Path, help="a mert-moses.pl working directory")
    p.add_argument("--ini", type=Path, action="append", default=[], help="a tuned moses.ini to score (repeatable)")
    p.add_argument("--kbmira", help="Moses's kbmira binary: also score kbmira's weights fitted on the pool")
    p.add_argument("--kbmira-from", type=Path, help="moses.ini whose weights kbmira starts from")
    p.add_argument("--epochs", default="1,5,60", help="kbmira epochs to try (default 1,5,60; 60 is kbmira's)")
    args = p.parse_args(argv)
    names, feats, stats = read_pool(args.mert_dir)
    print(f"{args.mert_dir}: {len(feats)} sentences, {sum(len(f) for f in feats):,} hypotheses, {len(names)} features")
    print("| weights | pool BLEU | length ratio |\n|---|---|---|")
    for ini in args.ini:
        bleu, ratio = pool_bleu(dense_weights(ini, names), feats, stats)
        print(f"| {ini} | {bleu:.2f} | {ratio:.3f} |")
    if args.kbmira:
        if args.kbmira_from is None:
            p.error("--kbmira needs --kbmira-from")
        start = dense_weights(args.kbmira_from, names)
        for epochs in (int(e) for e in args.epochs.split(",")):
            bleu, ratio = pool_bleu(kbmira(args.kbmira, args.mert_dir, names, start, epochs), feats, stats)
            print(f"| kbmira {epochs} epoch(s) from {args.kbmira_from} | {bleu:.2f} | {ratio:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
