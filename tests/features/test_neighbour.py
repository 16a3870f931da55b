"""The decoder's context (issue 48): the neighbour's boundary words, in training and serving.

The rules of training/features/neighbour.py, on a corpus written for them, and the property
that makes a context model servable: the gold neighbour an example is trained with is
exactly what the phrase pair that the reference places beside it gives as a neighbour
(`pair_boundary_words`), for every example of the real ja-en slice.
"""

from __future__ import annotations

import numpy as np
import pytest

from training.cli import main as cli_main
from training.features.hashing import hash_string
from training.features.neighbour import (BACKWARD, FORWARD, gold_neighbour_words, neighbour_keys,
                                         pair_boundary_words, with_neighbour_keys)
from training.features.batch import pair_slice
from training.store.examples import ExampleStore

H = {t: int(hash_string(t)) for t in ("<s>", "</s>", "<unaligned>", "a", "b", "c", "d", "A", "B", "C", "D", "E")}


@pytest.fixture(scope="module")
def rules_store(tmp_path_factory) -> ExampleStore:
    """One sentence: source a b c d, target A B C D E. Links: a-A, b-C, d-C (C aligned to
    two source words), c-E; B and D are unaligned. Its pairs: a-A, a-AB, abcd-ABCDE,
    bcd-BCDE, bcd-CDE, c-DE, c-E."""
    d = tmp_path_factory.mktemp("rules")
    (d / "s").write_text("a b c d\n", encoding="utf-8")
    (d / "t").write_text("A B C D E\n", encoding="utf-8")
    (d / "al").write_text("0-0 1-2 3-2 2-4\n", encoding="utf-8")
    out = d / "store"
    assert cli_main(["extract", "--src", str(d / "s"), "--tgt", str(d / "t"), "--align", str(d / "al"),
                     "--out", str(out), "--model", "hier-msd", "--quiet"]) == 0
    return ExampleStore.open(out)


def _examples(store: ExampleStore):
    chunk = next(store.iter_chunks())
    return chunk, {(int(a), int(b)): i for i, (a, b) in enumerate(zip(chunk.tgt_start, chunk.tgt_end))}


def test_gold_neighbour_rules(rules_store):
    chunk, at = _examples(rules_store)
    words = {d: gold_neighbour_words(rules_store, chunk.sentence, chunk.tgt_start, chunk.tgt_end, d)
             for d in (BACKWARD, FORWARD)}

    def gold(span, d):
        i = at[span]
        return int(words[d][0][i]), int(words[d][1][i])

    # The sentence edges: <s> before the first target word, </s> after the last, for both words.
    first = next(s for s in at if s[0] == 0)
    last = next(s for s in at if s[1] == 5)
    assert gold(first, BACKWARD) == (H["<s>"], H["<s>"])
    assert gold(last, FORWARD) == (H["</s>"], H["</s>"])
    # A word aligned to one source word: A (a) before the phrase starting at B.
    span_b = next(s for s in at if s[0] == 1)
    assert gold(span_b, BACKWARD) == (H["A"], H["a"])
    # C is aligned to b and d: the rightmost, d.
    span_d = next(s for s in at if s[0] == 3)
    assert gold(span_d, BACKWARD) == (H["C"], H["d"])
    # D is unaligned.
    span_e = next(s for s in at if s[0] == 4)
    assert gold(span_e, BACKWARD) == (H["D"], H["<unaligned>"])
    # Forward: the word after the phrase.
    span_a = next(s for s in at if s == (0, 1))
    assert gold(span_a, FORWARD) == (H["B"], H["<unaligned>"])


def test_pair_boundary_rules(rules_store):
    chunk, at = _examples(rules_store)
    tgt_b, src_b = pair_boundary_words(chunk.batch, BACKWARD)   # last target word of each pair
    tgt_f, src_f = pair_boundary_words(chunk.batch, FORWARD)    # first target word
    whole = at[(0, 5)]
    assert (int(tgt_b[whole]), int(src_b[whole])) == (H["E"], H["c"])
    assert (int(tgt_f[whole]), int(src_f[whole])) == (H["A"], H["a"])
    starts_with_c = at[(2, 5)]   # b c d -> C D E: C aligned to b and d
    assert (int(tgt_f[starts_with_c]), int(src_f[starts_with_c])) == (H["C"], H["d"])
    a_b = at[(0, 2)]   # a -> A B: B unaligned
    assert (int(tgt_b[a_b]), int(src_b[a_b])) == (H["B"], H["<unaligned>"])


def test_gold_neighbour_is_what_the_neighbouring_pair_gives(store_2k):
    """Training sees the word before (after) the phrase and its source word; the decoder
    sees the last (first) target word of the option placed before (after) it. For every
    example of the 2,000-line ja-en slice with an extracted phrase pair ending just before it
    (starting just after it) in its sentence, the two agree: consistency puts every link of
    that target word inside the neighbouring pair."""
    checked = {BACKWARD: 0, FORWARD: 0}
    for chunk in store_2k.iter_chunks():
        gold = {d: gold_neighbour_words(store_2k, chunk.sentence, chunk.tgt_start, chunk.tgt_end, d)
                for d in (BACKWARD, FORWARD)}
        own = {d: pair_boundary_words(chunk.batch, d) for d in (BACKWARD, FORWARD)}
        # (sentence, target end) -> an example ending there; (sentence, target start) -> one starting there
        ends = {(int(s), int(e)): i for i, (s, e) in enumerate(zip(chunk.sentence, chunk.tgt_end))}
        starts = {(int(s), int(b)): i for i, (s, b) in enumerate(zip(chunk.sentence, chunk.tgt_start))}
        for i, (s, b, e) in enumerate(zip(chunk.sentence, chunk.tgt_start, chunk.tgt_end)):
            before = ends.get((int(s), int(b)))
            if before is not None:
                assert (gold[BACKWARD][0][i], gold[BACKWARD][1][i]) == (own[BACKWARD][0][before], own[BACKWARD][1][before])
                checked[BACKWARD] += 1
            after = starts.get((int(s), int(e)))
            if after is not None:
                assert (gold[FORWARD][0][i], gold[FORWARD][1][i]) == (own[FORWARD][0][after], own[FORWARD][1][after])
                checked[FORWARD] += 1
    assert checked[BACKWARD] > 10_000 and checked[FORWARD] > 10_000


def test_neighbour_keys_differ_by_direction_and_merge_into_sorted_rows():
    tgt = np.array([H["A"], H["A"]], dtype=np.uint64)
    src = np.array([H["a"], H["<unaligned>"]], dtype=np.uint64)
    back, fwd = neighbour_keys(tgt, src, BACKWARD), neighbour_keys(tgt, src, FORWARD)
    assert back.shape == (2, 3) and not set(back.ravel()) & set(fwd.ravel())
    assert back[0, 0] == back[1, 0] and back[0, 1] != back[1, 1]   # the target word's key is shared
    indptr = np.array([0, 2, 2], dtype=np.int64)
    keys = np.array([5, np.iinfo(np.uint64).max - 1], dtype=np.uint64)
    extra = np.array([[7, 5, 1], [3, 3, 9]], dtype=np.uint64)   # a duplicate of a pair key, and of itself
    ptr, merged = with_neighbour_keys(indptr, keys, extra)
    rows = [merged[ptr[p]:ptr[p + 1]].tolist() for p in range(2)]
    assert rows == [[1, 5, 7, int(keys[1])], [3, 9]]


def test_pair_boundary_words_slice_like_the_whole(store_2k):
    chunk = next(store_2k.iter_chunks())
    whole = pair_boundary_words(chunk.batch, BACKWARD)
    part = pair_boundary_words(pair_slice(chunk.batch, 100, 300), BACKWARD)
    assert np.array_equal(part[0], whole[0][100:300]) and np.array_equal(part[1], whole[1][100:300])


def test_features_command_builds_a_matrix_for_each_direction(store_2k, capsys):
    """`moses-reorder features --features S1,neighbour` (the stage benchmarks/translation.py
    runs before training) caches one matrix a direction, the ones `train` reads; with
    --direction, only that one."""
    from training.features.matrix import build_matrix

    spec, threshold = "S1,neighbour", 7
    assert cli_main(["features", "--store", str(store_2k.path), "--features", spec, "--threshold",
                     str(threshold)]) == 0
    err = capsys.readouterr().err
    assert "(backward)" in err and "(forward)" in err
    built = {d: build_matrix(store_2k, spec, threshold, direction=d) for d in ("backward", "forward")}
    assert built["backward"].path != built["forward"].path
    for d, fm in built.items():
        fresh = build_matrix(store_2k, spec, threshold, direction=d, cache=False)
        assert np.array_equal(fm.keys, fresh.keys) and (fm.X != fresh.X).nnz == 0, d
    caches = sorted(p.name for p in (store_2k.path / "features").iterdir())
    assert cli_main(["features", "--store", str(store_2k.path), "--features", "S1,neighbour", "--threshold", "8",
                     "--direction", "forward", "--quiet"]) == 0
    added = sorted(set(p.name for p in (store_2k.path / "features").iterdir()) - set(caches))
    assert len(added) == 1, added
