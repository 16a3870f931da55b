"""The wrong transitions a context model is shown (training/features/transitions.py, issue 48).

Its rules on a sentence written for them, and on every sentence of the real embedded ja-en
slice against a reference written out in Python: every candidate the rules allow, and no
other, can be drawn; each example gets min(candidates, per_example) distinct ones; the seed
repeats a draw. Then benchmarks/context_transitions.py on models trained on that slice.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from training.cli import main as cli_main
from training.features.neighbour import BACKWARD, FORWARD
from training.features.transitions import DISC, MONO, SWAP, wrong_neighbours
from training.store.examples import ExampleStore

ROOT = Path(__file__).resolve().parents[2]


def _candidates(chunk, e: int, forward: bool) -> dict[int, int]:
    """The rules, written out: candidate -> orientation."""
    out = {}
    same = np.flatnonzero(chunk.sentence == chunk.sentence[e])
    for c in range(int(same[0]), int(same[-1]) + 1):
        if not (chunk.src_end[c] <= chunk.src_start[e] or chunk.src_start[c] >= chunk.src_end[e]):
            continue
        if (chunk.tgt_start[c] == chunk.tgt_end[e]) if forward else (chunk.tgt_end[c] == chunk.tgt_start[e]):
            continue            # the reference could place it there: a segmentation of the gold neighbour
        first, second = (e, c) if forward else (c, e)
        if chunk.src_end[first] == chunk.src_start[second]:
            out[c] = MONO
        elif chunk.src_end[second] == chunk.src_start[first]:
            out[c] = SWAP
        else:
            out[c] = DISC
    return out


def _draw(chunk, direction, per_example, seed=0):
    return wrong_neighbours(chunk.sentence, chunk.src_start, chunk.src_end, chunk.tgt_start, chunk.tgt_end,
                            direction, per_example, seed)


@pytest.fixture(scope="module")
def monotone_store(tmp_path_factory) -> ExampleStore:
    """One sentence, a b c -> A B C, aligned monotonically: its pairs are the six spans."""
    d = tmp_path_factory.mktemp("mono")
    (d / "s").write_text("a b c\n", encoding="utf-8")
    (d / "t").write_text("A B C\n", encoding="utf-8")
    (d / "al").write_text("0-0 1-1 2-2\n", encoding="utf-8")
    assert cli_main(["extract", "--src", str(d / "s"), "--tgt", str(d / "t"), "--align", str(d / "al"),
                     "--out", str(d / "store"), "--model", "hier-msd", "--quiet"]) == 0
    return ExampleStore.open(d / "store")


def test_rules_on_a_monotone_sentence(monotone_store):
    chunk = next(monotone_store.iter_chunks())
    span = {(int(a), int(b)): i for i, (a, b) in enumerate(zip(chunk.src_start, chunk.src_end))}
    assert set(span) == {(0, 1), (1, 2), (2, 3), (0, 2), (1, 3), (0, 3)}
    e, c, o = _draw(chunk, BACKWARD, 10)
    drawn = {(int(a), int(b)): int(k) for a, b, k in zip(e, c, o)}
    # Before c (2-3): a b and b are the gold neighbour's segmentations (they end where c starts
    # in the target), so nothing is wrong before it; a alone is wrong and discontinuous.
    assert {cand: k for (ex, cand), k in drawn.items() if ex == span[(2, 3)]} == {span[(0, 1)]: DISC}
    # Before a (0-1): b c, c and b, each after it in the source. b c and b touch it: swap.
    assert {cand: k for (ex, cand), k in drawn.items() if ex == span[(0, 1)]} == {
        span[(1, 3)]: SWAP, span[(1, 2)]: SWAP, span[(2, 3)]: DISC}
    # Forward, after a: b c and b start where a ends in the target too (gold), c does not.
    e, c, o = _draw(chunk, FORWARD, 10)
    drawn = {(int(a), int(b)): int(k) for a, b, k in zip(e, c, o)}
    assert {cand: k for (ex, cand), k in drawn.items() if ex == span[(0, 1)]} == {span[(2, 3)]: DISC}
    # The whole sentence overlaps every other pair: no candidate at all.
    assert not any(ex == span[(0, 3)] for ex, _ in drawn)


@pytest.fixture(scope="module")
def slice_store(embedded_dir, tmp_path_factory) -> ExampleStore:
    """The first 100 sentences of the embedded ja-en slice."""
    d = tmp_path_factory.mktemp("slice")
    for s in ("ja", "en", "align"):
        (d / f"train.{s}").write_bytes(b"".join((embedded_dir / f"train.{s}").read_bytes()
                                                .splitlines(keepends=True)[:100]))
    assert cli_main(["extract", "--src", str(d / "train.ja"), "--tgt", str(d / "train.en"),
                     "--align", str(d / "train.align"), "--out", str(d / "store"), "--model", "hier-msd",
                     "--quiet"]) == 0
    return ExampleStore.open(d / "store")


@pytest.mark.parametrize("direction", [BACKWARD, FORWARD])
def test_draws_follow_the_rules_on_the_real_slice(slice_store, direction):
    chunk = slice_store.read_examples(0, slice_store.n_examples)
    per_example = 3
    e, c, o = _draw(chunk, direction, per_example, seed=7)
    assert np.array_equal(np.stack(_draw(chunk, direction, per_example, seed=7)), np.stack((e, c, o)))
    assert not np.array_equal(_draw(chunk, direction, per_example, seed=8)[1], c)   # the seed draws
    by_example: dict[int, list[int]] = {}
    for ex, cand, k in zip(e.tolist(), c.tolist(), o.tolist()):
        by_example.setdefault(ex, []).append((cand, k))
    for ex in range(len(chunk.sentence)):
        allowed = _candidates(chunk, ex, direction == FORWARD)
        got = by_example.get(ex, [])
        assert all(allowed.get(cand) == k for cand, k in got)
        assert len(set(got)) == len(got) == min(per_example, len(allowed))
    assert {MONO, SWAP, DISC} <= set(o.tolist())


def test_bad_arguments_are_refused(monotone_store):
    chunk = next(monotone_store.iter_chunks())
    with pytest.raises(ValueError, match="per_example"):
        _draw(chunk, BACKWARD, 0)
    with pytest.raises(ValueError, match="direction"):
        _draw(chunk, 5, 2)


def test_benchmark_counts_every_drawn_transition(embedded_dir, tmp_path):
    """The script on real models of the slice: each system is counted on the same transitions,
    and a model without context ties exactly when the orientations are the same."""
    d = tmp_path
    lines = {s: (embedded_dir / f"train.{s}").read_bytes().splitlines(keepends=True) for s in ("ja", "en", "align")}
    for s, ls in lines.items():
        (d / f"train.{s}").write_bytes(b"".join(ls[:1500]))
        (d / f"held.{s}").write_bytes(b"".join(ls[1500:1700]))
    assert cli_main(["extract", "--src", str(d / "train.ja"), "--tgt", str(d / "train.en"), "--align",
                     str(d / "train.align"), "--out", str(d / "store"), "--model", "hier-msd", "--quiet"]) == 0
    for name, args in (("ctx", ["--family", "svm", "--features", "S6,neighbour"]),
                       ("lex", ["--family", "lexical"])):
        assert cli_main(["train", *args, "--type", "hier-msd-bidirectional-fe", "--store", str(d / "store"),
                         "--out", str(d / f"{name}.mrw"), "--heldout-fraction", "0", "--quiet"]) == 0
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "context_transitions.py"), "--pairs",
                          str(d / "held"), "--model", str(d / "ctx.mrw"), "--table-model", str(d / "lex.mrw"),
                          "--per-example", "4", "--json", str(d / "t.json")], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    report = json.loads((d / "t.json").read_text())
    assert report["sentences"] == 200
    for direction, by in report["counts"].items():
        totals = {s: np.array(c)[..., 2] for s, c in by.items()}
        assert totals["context"].sum() > 1000
        for s in ("pair block alone", "table"):
            assert np.array_equal(totals[s], totals["context"])
            same = np.array(by[s])[:, 1]        # wrong orientation = gold's: always a tie without context
            assert np.array_equal(same[:, 1], same[:, 2]) and same[:, 0].sum() == 0
    assert "| context |" in run.stdout and "| table |" in run.stdout
