"""benchmarks/tuner_pool.py: Moses's sentence BLEU, and what a feature decides on an n-best
pool written in mert-moses.pl's features.dat / scores.dat format (issue 29's diagnostic)."""

from __future__ import annotations

import importlib.util
import re
import sys

import numpy as np
import pytest

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))          # tuner_pool imports the study's ini reader
spec = importlib.util.spec_from_file_location("tuner_pool", ROOT / "benchmarks" / "tuner_pool.py")
tuner_pool = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tuner_pool)


def test_sentence_bleu_is_moses_smoothed_sentence_bleu():
    # the statistics and values of Moses's own unit test (mert/BleuScorerTest.cpp, sentence_level_bleu)
    stats = np.array([[6.0, 6.0, 4.0, 5.0, 2.0, 4.0, 1.0, 3.0, 7.0]])
    assert tuner_pool.sentence_bleu(stats)[0] == pytest.approx(0.5985, rel=1e-3)
    assert tuner_pool.sentence_bleu(stats, 0.5)[0] == pytest.approx(0.5624, rel=1e-3)


def stats_row(matches: int, length: int = 10) -> list[int]:
    """BLEU statistics of a `length`-word hypothesis against a `length`-word reference with
    `matches` matching n-grams of every order (as far as the order allows)."""
    row = []
    for n in range(1, 5):
        row += [min(matches, length - n + 1), length - n + 1]
    return row + [length]


@pytest.fixture
def pool(tmp_path):
    """Two iterations' 3-best lists of two sentences: F0 rises with BLEU, F1 falls with it,
    and iteration 2 repeats a hypothesis of iteration 1 (the pool holds it once)."""
    mert = tmp_path / "mert"
    mert.mkdir()
    quality = {0: [2, 5, 9], 1: [3, 7, 1]}
    for run, extra in ((1, None), (2, 9)):
        feats, scores = [], []
        for sentence, matches in quality.items():
            hyps = matches + ([extra] if extra is not None and sentence == 0 else [])
            feats.append(f"FEATURES_TXT_BEGIN_0 {sentence} {len(hyps)} 2 F0_0 F1_0")
            feats += [f"{m} {-m}" for m in hyps] + ["FEATURES_TXT_END_0"]
            scores.append(f"SCORES_TXT_BEGIN_0 {sentence} {len(hyps)} 9 BLEU")
            scores += [" ".join(map(str, stats_row(m))) for m in hyps] + ["SCORES_TXT_END_0"]
        (mert / f"run{run}.features.dat").write_text("\n".join(feats) + "\n")
        (mert / f"run{run}.scores.dat").write_text("\n".join(scores) + "\n")
    ini = tmp_path / "tuned.ini"
    ini.write_text("[weight]\nF0= 1\nF1= 0.5\n")
    return mert, ini


def test_a_feature_that_rises_with_bleu_orders_every_pair_as_bleu_does(pool, capsys):
    mert, ini = pool
    assert tuner_pool.main([str(mert), "--ini", str(ini), "--rank", "F0"]) == 0
    found = re.findall(r"^\| \S+ \| ([^|]+?) \| ([\d,]+) \| ([\d.]+)% \| ([\d.]+)% \|$", capsys.readouterr().out, re.M)
    rows = {label: (int(pairs.replace(",", "")), float(agree)) for label, pairs, agree, _ in found}
    assert set(rows) == {"whole model", "F0"}
    assert rows["F0"][1] == 100.0 and rows["whole model"][1] == 100.0   # F0 - 0.5 F0: still rising
    assert rows["F0"][0] > 0


def test_a_feature_that_falls_with_bleu_orders_none(pool, capsys):
    mert, ini = pool
    tuner_pool.main([str(mert), "--ini", str(ini), "--rank", "F1"])
    share = re.search(r"\| F1 \| [\d,]+ \| ([\d.]+)% \| ([\d.]+)% \|", capsys.readouterr().out)
    assert share and float(share.group(1)) == 0.0 and float(share.group(2)) == 0.0


def test_without_a_feature_the_pool_picks_by_the_rest(pool, capsys):
    mert, ini = pool
    tuner_pool.main([str(mert), "--ini", str(ini), "--without", "F0"])
    bleu = dict(re.findall(r"^\| \S+?( without F0)? \| ([\d.]+) \|", capsys.readouterr().out, re.M))
    # with F0 the pool picks each sentence's best hypothesis (9 and 7 matches), without it the
    # worst (2 and 1): BLEU falls
    assert float(bleu[" without F0"]) < float(bleu[""])


def test_an_unknown_feature_is_named_with_the_pool_s_features(pool, capsys):
    mert, ini = pool
    with pytest.raises(SystemExit) as stop:
        tuner_pool.main([str(mert), "--ini", str(ini), "--rank", "LexicalReordering0"])
    assert stop.value.code == 2
    assert "LexicalReordering0: not a feature of this pool (F0, F1)" in capsys.readouterr().err
