"""How good a tuner's weights are on the n-best pool it tuned on (issue 16).

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

`--without FEATURE` also scores each --ini with that feature's weights at zero, and `--rank
FEATURE` measures how often the feature's tuned share of the model score orders two of a
sentence's hypotheses as their sentence BLEU does (PRO's own sample: 5,000 pairs a sentence
at least 0.05 apart): what a reordering model decides among the translations its decoder
weighed, which the classification study on gold phrase pairs does not see (issue 29):

    python3 benchmarks/tuner_pool.py WORK/runs/hybrid-svm-S6-dl12/pro1/mert \
        --ini WORK/runs/hybrid-svm-S6-dl12/pro1/tuned.ini --without LexicalReordering0 --rank LexicalReordering0

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
    if not all(total[2 * k] for k in range(NGRAM)):   # an order with no match: unsmoothed corpus BLEU is 0
        return 0.0, total[1] / total[2 * NGRAM]
    log_precision = sum(math.log(total[2 * k] / total[2 * k + 1]) for k in range(NGRAM)) / NGRAM
    hyp, ref = total[1], total[2 * NGRAM]
    return 100 * min(1.0, math.exp(1 - ref / hyp)) * math.exp(log_precision), hyp / ref


def sentence_bleu(stats: np.ndarray, smoothing: float = 1.0) -> np.ndarray:
    """Per hypothesis, Moses's smoothedSentenceBleu (mert/BleuScorer.cpp), the sentence BLEU
    PRO samples pairs by: every n-gram order's counts plus one, no smoothing of the brevity
    penalty. Rows of `stats` are the pool's sufficient statistics."""
    log_precision = sum(np.log(stats[:, 2 * k] + smoothing) - np.log(stats[:, 2 * k + 1] + smoothing)
                        for k in range(NGRAM)) / NGRAM
    brevity = np.minimum(0.0, 1 - stats[:, 2 * NGRAM] / stats[:, 1])
    return np.exp(log_precision + brevity)


def distinct_pool(feats: list[np.ndarray], stats: list[np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Each sentence's hypotheses once: the iterations' n-best lists repeat most of each other."""
    keep = [np.unique(np.hstack([f, st]), axis=0, return_index=True)[1] for f, st in zip(feats, stats)]
    return [f[k] for f, k in zip(feats, keep)], [st[k] for st, k in zip(stats, keep)]


def rank_agreement(weights: np.ndarray, feats: list[np.ndarray], stats: list[np.ndarray],
                   pairs: int = 5000, margin: float = 0.05, seed: int = 0) -> tuple[float, float, int]:
    """On a distinct pool (distinct_pool), of sampled hypothesis pairs whose sentence BLEU
    differs by more than `margin`: the share the weighted score orders as BLEU does, and the
    share where it ties (a feature blind to the pair)."""
    rng = np.random.default_rng(seed)
    agree = tie = total = 0
    for f, st in zip(feats, stats):
        if len(f) < 2:
            continue
        bleu, score = sentence_bleu(st), f @ weights
        a, b = rng.integers(0, len(f), size=(2, pairs))
        keep = np.abs(bleu[a] - bleu[b]) > margin
        a, b = a[keep], b[keep]
        gap = np.sign(score[a] - score[b])
        agree += int(np.sum(gap == np.sign(bleu[a] - bleu[b])))
        tie += int(np.sum(gap == 0))
        total += len(a)
    return agree / max(total, 1), tie / max(total, 1), total


def feature_mask(names: list[str], feature: str) -> np.ndarray:
    """Which of the pool's values (`LM0_0`, ...) belong to a feature (`LM0`)."""
    return np.array([n.rsplit("_", 1)[0] == feature for n in names])


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
    p.add_argument("--without", metavar="FEATURE",
                   help="also score each --ini with this feature's weights at zero (e.g. LexicalReordering0)")
    p.add_argument("--rank", metavar="FEATURE",
                   help="how often this feature's weighted share of each --ini's score orders hypothesis pairs as BLEU does")
    args = p.parse_args(argv)
    names, feats, stats = read_pool(args.mert_dir)
    for feature in filter(None, (args.without, args.rank)):
        if not feature_mask(names, feature).any():
            p.error(f"{feature}: not a feature of this pool ({', '.join(sorted({n.rsplit('_', 1)[0] for n in names}))})")
    print(f"{args.mert_dir}: {len(feats)} sentences, {sum(len(f) for f in feats):,} hypotheses, {len(names)} features")
    print("| weights | pool BLEU | length ratio |\n|---|---|---|")
    weights = {ini: dense_weights(ini, names) for ini in args.ini}
    for ini, w in weights.items():
        bleu, ratio = pool_bleu(w, feats, stats)
        print(f"| {ini} | {bleu:.2f} | {ratio:.3f} |")
        if args.without:
            bleu, ratio = pool_bleu(np.where(feature_mask(names, args.without), 0.0, w), feats, stats)
            print(f"| {ini} without {args.without} | {bleu:.2f} | {ratio:.3f} |")
    if args.rank:
        distinct = distinct_pool(feats, stats)
        print("\n| weights | score | pairs | orders as BLEU does | ties |\n|---|---|---|---|---|")
        for ini, w in weights.items():
            part = np.where(feature_mask(names, args.rank), w, 0.0)
            for label, v in (("whole model", w), (args.rank, part)):
                agree, tie, total = rank_agreement(v, *distinct)
                print(f"| {ini} | {label} | {total:,} | {100 * agree:.1f}% | {100 * tie:.1f}% |")
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
