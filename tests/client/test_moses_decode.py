"""ExternalReordering inside a real Moses decode: type spellings, the identity with
Moses's own LexicalReordering, and the service failing or restarting mid-decode.

A small self-contained system: the first 300 ja-en training pairs; our extractor writes
Moses's `extract` text, from which the test writes a phrase table (relative frequencies,
most frequent alignment); a 3-gram LM by Moses's lmplz (without an LM, blocks that
swap places often tie exactly, and float rounding, not the model, picks among them); `moses-reorder lexical` writes each type's reordering
table and `moses-reorder train --family lexical` the model of the same table, served by
`moses-reorder serve` on loopback. Translations of the first 40 source sentences must be
identical with LexicalReordering(table) and ExternalReordering(served model), whatever
the spelling of `type=`.

Moses2 too, when MOSES_DIR/bin/moses2 has ExternalReordering (install.sh installs both):
the same identity with Moses2's own LexicalReordering (on `-fe` types: Moses2 reads no
other table; no default-scores: Moses2 has none, so its table gets one prior row per
unknown word instead), -threads 2 identical to -threads 1, and the schema check.

Needs a Moses build with ExternalReordering installed (moses_ff/install.sh): set
MOSES_DIR to the Moses tree (built in place, bjam's default) or its install prefix: the
directory holding bin/moses and bin/lmplz. Without it the test is skipped. The whole-test-set versions are benchmarks/moses_identity.py and
benchmarks/moses_failover.py.
"""

from __future__ import annotations

import gzip
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest

from corpus_slice import write_corpus_slice

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from moses_failover import Watched  # noqa: E402
from moses_system import (System, compare, complete_table, decode, external_line,  # noqa: E402
                          lexical_line, n_scores, served_prior)
from reordering_replay import (distortion, expected_values, feature_values, phrase_table_alignments,  # noqa: E402
                               phrase_table_rows, read_moses_nbest, read_segmented_best, segmentations,
                               served_blocks)
from server.local import LocalServer  # noqa: E402


def _decoder(name: str) -> Path | None:
    """MOSES_DIR/bin/NAME when it is a decoder with ExternalReordering built in."""
    base = os.environ.get("MOSES_DIR")
    path = Path(base) / "bin" / name if base else None
    return path if path and path.is_file() and b"ExternalReordering" in path.read_bytes() else None


MOSES, MOSES2 = _decoder("moses"), _decoder("moses2")
BIN = next((d.parent for d in (MOSES, MOSES2) if d and (d.parent / "lmplz").is_file()), None)
pytestmark = pytest.mark.skipif(
    BIN is None, reason="needs a Moses build with ExternalReordering (moses_ff/install.sh): "
                        "set MOSES_DIR to the Moses directory holding bin/moses or bin/moses2, and bin/lmplz")
# CI builds moses2 and the tuners first (moses_ff/build-moses.sh --ci), and the moses decoder
# only on a machine fast enough to build and test it within CI's time (.ci/run, MOSES_V1_FAST).
# This reason names no MOSES_DIR on purpose, so that tests/conftest.py lets it stay a skip
# under CI=true.
needs_moses = pytest.mark.skipif(
    MOSES is None, reason="needs bin/moses with ExternalReordering: this Moses build has moses2 only "
                          "(moses_ff/build-moses.sh --ci, what CI builds; without --ci it builds both)")
needs_moses2 = pytest.mark.skipif(
    MOSES2 is None, reason="needs a Moses build whose moses2 has ExternalReordering (moses_ff/install.sh "
                           "installs it, then rebuild): set MOSES_DIR to the Moses directory holding bin/moses2")
MODEL = "hier-msd-bidirectional-fe"
TYPES = ("wbe-msd-bidirectional-fe", "hier-msd-bidirectional-fe", "wbe-mslr-backward-f",
         "wbe-monotonicity-forward-fe", "hier-mslr-bidirectional-f")
N_SENTENCES = 40


def cli(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "training.cli", *args, "--quiet"], cwd=ROOT, check=True)


def write_phrase_table(extract: Path, out: Path) -> None:
    """Moses's phrase-table text from `extract` lines: p(e|f), p(f|e) and the pair's most
    frequent alignment (4th field, which ExternalReordering sends)."""
    pairs: Counter = Counter()
    aligns: dict[tuple[str, str], Counter] = defaultdict(Counter)
    f_count: Counter = Counter()
    e_count: Counter = Counter()
    for line in extract.read_text(encoding="utf-8").splitlines():
        f, e, a = line.split(" ||| ")
        pairs[f, e] += 1
        aligns[f, e][a] += 1
        f_count[f] += 1
        e_count[e] += 1
    with gzip.open(out, "wt", encoding="utf-8") as fh:
        for (f, e), c in sorted(pairs.items()):
            a = aligns[f, e].most_common(1)[0][0]
            fh.write(f"{f} ||| {e} ||| {c / f_count[f]:.6g} 0.5 {c / e_count[e]:.6g} 0.5 ||| {a}\n")


@pytest.fixture(scope="module")
def system(ja_en_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    work = tmp_path_factory.mktemp("moses")
    corpus = write_corpus_slice(ja_en_dir, 300, work / "corpus")
    store = work / "store"
    cli("extract", "--src", str(corpus["ja"]), "--tgt", str(corpus["en"]), "--align", str(corpus["align"]),
        "--out", str(store), "--model", "wbe-mslr", "--model", "hier-mslr", "--moses-format")
    write_phrase_table(store / "extract", work / "phrase-table.gz")
    for moses_type in TYPES:
        cli("lexical", "--store", str(store), "--type", moses_type, "--out", str(work / f"{moses_type}.gz"))
        cli("train", "--family", "lexical", "--type", moses_type, "--store", str(store), "--heldout-fraction", "0",
            "--out", str(work / "repo" / moses_type / "1" / "model.mrw"))
    # a classifier, whose scores are not the table's: the table beside it must stay its own block
    cli("train", "--family", "svm", "--features", "S6", "--type", MODEL, "--store", str(store),
        "--heldout-fraction", "0", "--threshold", "1", "--out", str(work / "repo" / "svm-S6" / "1" / "model.mrw"))
    src = work / "test.ja"
    src.write_text("".join(corpus["ja"].read_text(encoding="utf-8").splitlines(True)[:N_SENTENCES]), encoding="utf-8")
    lm = work / "lm.arpa"
    with open(corpus["en"], "rb") as text, open(lm, "wb") as out:
        subprocess.run([str(BIN / "lmplz"), "-o", "3", "--discount_fallback", "-S", "5%", "-T", str(work)],
                       stdin=text, stdout=out, stderr=subprocess.DEVNULL, check=True)
    return work, System(work / "phrase-table.gz", lm=lm, lm_order=3), src


def ini(system_: System, path: Path, line: str, n: int) -> Path:
    return system_.ini(path, line, n)


@pytest.fixture(scope="module")
def server(system):
    work = system[0]
    with LocalServer(work / "repo", log=work / "serve.log") as s:
        yield s


@needs_moses
@pytest.mark.parametrize("lexical_type, spelled, model", [
    ("wbe-msd-bidirectional-fe", "msd-bidirectional-fe", "wbe-msd-bidirectional-fe"),  # Moses's regression test
    ("hier-msd-bidirectional-fe", "fe-bidirectional-msd-hier-allff", "hier-msd-bidirectional-fe"),
    ("hier-msd-bidirectional-fe-collapseff", "hier-collapseff-msd-bidirectional-fe", "hier-msd-bidirectional-fe"),
    ("wbe-mslr-backward-f", "mslr-unidirectional-f", "wbe-mslr-backward-f"),
    ("wbe-monotonicity-forward-fe", "forward-monotonicity-fe", "wbe-monotonicity-forward-fe"),
    ("hier-mslr-bidirectional-f", "hier-mslr-bidirectional-f-allff", "hier-mslr-bidirectional-f"),
])
def test_served_table_translates_exactly_like_moses_lexical_reordering(system, server, lexical_type, spelled, model):
    work, sys_, src = system
    n = n_scores(lexical_type)
    # An option missing from the table (an unknown word) gets default-scores from Moses
    # and the class prior from the lexical family: make them the same. (With collapseff
    # Moses reads default-scores past its end, so none there; these sentences have no
    # unknown words.)
    defaults = None if "collapseff" in lexical_type else ",".join(
        f"{p:.9g}" for p in served_prior(server.address, model))
    lex = decode(MOSES, ini(sys_, work / f"lex-{spelled}.ini",
                            lexical_line(lexical_type, work / f"{model}.gz", defaults), n), src)
    ext = decode(MOSES, ini(sys_, work / f"ext-{spelled}.ini",
                            external_line(spelled, server.address, model, defaults), n), src)
    assert lex.returncode == 0, lex.stderr[-2000:]
    assert ext.returncode == 0, ext.stderr[-2000:]
    assert len(lex.lines) == N_SENTENCES
    assert compare(lex.lines, ext.lines) == []
    assert f"model {model} version 1" in ext.stderr


@needs_moses
def test_a_served_model_of_another_schema_is_refused(system, server):
    work, sys_, src = system
    run = decode(MOSES, ini(sys_, work / "wrong.ini",
                            external_line("phrase-msd-bidirectional-fe", server.address, "wbe-msd-bidirectional-fe"), 6), src)
    assert run.returncode != 0
    assert "needs a phrase-msd-bidirectional-fe model" in run.stderr
    assert "is wbe-msd-bidirectional-fe" in run.stderr


@needs_moses
def test_moses_refuses_the_table_in_the_feature_which_only_moses2_reads(system, server):
    work, sys_, src = system
    line = external_line(MODEL, server.address, "svm-S6", n=12, extra=f"path={work / f'{MODEL}.gz'}")
    run = decode(MOSES, ini(sys_, work / "path-v1.ini", line, 12), src)
    assert run.returncode != 0
    assert "path= (the table beside the model in one feature) is Moses2's only" in run.stderr


# No collapseff case: Moses2's LexicalReordering keeps only num-features (2) values of a
# table row and then reads row[offset + orientation] past them (moses2/FF/LexicalReordering,
# EvaluateAfterTablePruning and LRState::CopyScores), so it has nothing exact to compare
# with; ExternalReordering reads the full served row there, as Moses's LexicalReordering does.
@needs_moses2
@pytest.mark.parametrize("lexical_type, spelled, model", [
    ("wbe-msd-bidirectional-fe", "msd-bidirectional-fe", "wbe-msd-bidirectional-fe"),
    ("hier-msd-bidirectional-fe", "fe-bidirectional-msd-hier-allff", "hier-msd-bidirectional-fe"),
    ("wbe-monotonicity-forward-fe", "forward-monotonicity-fe", "wbe-monotonicity-forward-fe"),
])
def test_moses2_served_table_translates_exactly_like_moses2_lexical_reordering(system, server, lexical_type,
                                                                               spelled, model):
    work, sys_, src = system
    n = n_scores(lexical_type)
    table = work / f"{model}.moses2.gz"
    if not table.is_file():
        complete_table(work / f"{model}.gz", table, src.read_text(encoding="utf-8").splitlines(),
                       sys_.phrase_table, served_prior(server.address, model))
    lex = decode(MOSES2, ini(sys_, work / f"lex2-{spelled}.ini", lexical_line(lexical_type, table), n), src)
    ext = decode(MOSES2, ini(sys_, work / f"ext2-{spelled}.ini", external_line(spelled, server.address, model), n),
                 src)
    assert lex.returncode == 0, lex.stderr[-2000:]
    assert ext.returncode == 0, ext.stderr[-2000:]
    assert len(lex.lines) == N_SENTENCES
    assert compare(lex.lines, ext.lines) == []
    assert f"model {model} version 1" in ext.stderr
    assert f": {N_SENTENCES} Score RPCs for {N_SENTENCES} sentences" in ext.stderr


def best_scores(nbest: Path) -> list[tuple[str, list[float], float]]:
    """Each sentence's best translation in a Moses n-best list (its first line; moses2 can
    write more than N): its words, every feature score in the order written, its total."""
    rows: dict[str, tuple[str, list[float], float]] = {}
    for line in nbest.read_text(encoding="utf-8").splitlines():
        fields = line.split(" ||| ")
        scores = [float(t) for t in fields[2].split() if not t.endswith("=")]
        rows.setdefault(fields[0], (fields[1].strip(), scores, float(fields[3])))
    return list(rows.values())


@needs_moses2
def test_moses2_table_beside_the_model_in_one_feature_scores_like_two_features(system, server):
    """path= puts Moses's table in the ExternalReordering feature as its first block of
    scores: the same translations and feature scores as LexicalReordering beside
    ExternalReordering, with one reordering state (issue 29: the second state cost 1.4x)."""
    work, sys_, src = system
    table = work / f"{MODEL}.moses2.gz"
    if not table.is_file():
        complete_table(work / f"{MODEL}.gz", table, src.read_text(encoding="utf-8").splitlines(),
                       sys_.phrase_table, served_prior(server.address, MODEL))
    w_table, w_model = [0.3, 0.1, 0.2, 0.25, 0.05, 0.15], [0.2, 0.3, 0.1, 0.05, 0.25, 0.1]

    def run(name: str, lines: str, weights: dict[str, list[float]]) -> list[tuple[str, list[float], float]]:
        nbest = work / f"{name}.nbest"
        out = decode(MOSES2, sys_.ini(work / f"{name}.ini", lines, 12, weights), src,
                     flags=("-n-best-list", str(nbest), "1"))
        assert out.returncode == 0, out.stderr[-2000:]
        return best_scores(nbest)

    two = run("beside-two", lexical_line(MODEL, table) + "\n" +
              external_line(MODEL, server.address, "svm-S6", name="ExternalReordering0"),
              {"LexicalReordering0": w_table, "ExternalReordering0": w_model})
    fused_line = external_line(MODEL, server.address, "svm-S6", name="ExternalReordering0", n=12,
                               extra=f"path={table}")
    one = run("beside-one", fused_line, {"ExternalReordering0": w_table + w_model})
    assert len(two) == N_SENTENCES
    assert [t for t, _, _ in one] == [t for t, _, _ in two]
    for (_, a, total_a), (_, b, total_b) in zip(one, two):
        assert a == pytest.approx(b, rel=1e-5, abs=1e-5)
        assert total_a == pytest.approx(total_b, rel=1e-5, abs=1e-5)
    # the blocks are the table's then the model's: weights swapped, other scores
    swapped = run("beside-swapped", fused_line, {"ExternalReordering0": w_model + w_table})
    assert [s for _, s, _ in swapped] != [s for _, s, _ in one]
    # num-features must count both blocks
    wrong = decode(MOSES2, sys_.ini(work / "beside-wrong.ini", fused_line.replace("num-features=12", "num-features=6"),
                                    6, {"ExternalReordering0": w_table}), src)
    assert wrong.returncode != 0
    assert "has 6 scores, twice that with the table of path=, but num-features=6" in wrong.stderr


@needs_moses2
def test_moses2_two_threads_translate_like_one(system, server):
    work, sys_, src = system
    model = "hier-msd-bidirectional-fe"
    path = ini(sys_, work / "ext2-threads.ini", external_line(model, server.address, model), 6)
    many = src.read_text(encoding="utf-8") * 3
    (work / "test3.ja").write_text(many, encoding="utf-8")
    one = decode(MOSES2, path, work / "test3.ja", threads=1)
    two = decode(MOSES2, path, work / "test3.ja", threads=2)
    assert one.returncode == 0 and two.returncode == 0, two.stderr[-2000:]
    assert len(one.lines) == 3 * N_SENTENCES
    assert compare(one.lines, two.lines) == []


@needs_moses2
def test_moses2_refuses_a_served_model_of_another_schema_and_a_missing_server_but_shows_weights(system, server):
    work, sys_, src = system
    wrong = decode(MOSES2, ini(sys_, work / "wrong2.ini",
                               external_line("phrase-msd-bidirectional-fe", server.address, "wbe-msd-bidirectional-fe"),
                               6), src)
    assert wrong.returncode != 0
    assert "needs a phrase-msd-bidirectional-fe model" in wrong.stderr
    assert "is wbe-msd-bidirectional-fe" in wrong.stderr
    nobody, model = "127.0.0.1:1", "hier-msd-bidirectional-fe"
    missing = decode(MOSES2, ini(sys_, work / "missing2.ini",
                                 external_line(model, nobody, model, extra="timeout-ms=1000"), 6), src)
    assert missing.returncode != 0
    assert f"cannot load model '{model}' from {nobody}" in missing.stderr
    # mert-moses.pl runs `-show-weights`, for which moses2 loads every feature: no server needed.
    weights = decode(MOSES2, work / "missing2.ini", src, flags=("-show-weights",))
    assert weights.returncode == 0, weights.stderr[-2000:]
    assert "LexicalReordering0= 0.3 0.3 0.3 0.3 0.3 0.3" in weights.lines



@pytest.fixture(scope="module")
def long_input(system, server):
    """The 40 sentences 15 times (600 sentences, a few seconds of decoding), so the server
    can fail while Moses is half way; and the output with nothing failing."""
    work, sys_, src = system
    long_src = work / "long.ja"
    long_src.write_text(src.read_text(encoding="utf-8") * 15, encoding="utf-8")
    ref = decode(MOSES, ini(sys_, work / "ref.ini", external_line(MODEL, server.address, MODEL), 6), long_src,
                 flags=("-s", "200"))
    assert ref.returncode == 0, ref.stderr[-2000:]
    return long_src, ref.lines


def scored_after(run: Watched) -> int:
    return sum(1 for t, line in zip(run.stderr_at, run.stderr) if t > run.acted_at and " translation options in one RPC" in line)


@needs_moses
def test_killing_one_of_two_replicas_loses_no_sentence(system, long_input):
    work, sys_, _ = system
    long_src, reference = long_input
    with LocalServer(work / "repo") as a, LocalServer(work / "repo") as b:
        path = ini(sys_, work / "replicas.ini",
                   external_line(MODEL, f"{a.address},{b.address}", MODEL, extra="on-error=default"), 6)
        run = Watched(MOSES, path, long_src, 100, lambda: a.stop(signal.SIGKILL), ("-s", "200"))
        code = run.wait(300)
    assert run.acted_at is not None and scored_after(run) > 100, "the replica died too late to test anything"
    assert code == 0, "\n".join(run.stderr[-20:])
    assert not [line for line in run.stderr if "default scores" in line]
    assert run.out == reference


@needs_moses
def test_restarting_the_only_server_with_on_error_fail_stops_naming_the_server(system, long_input):
    work, sys_, _ = system
    long_src, _ = long_input
    timeout_ms = 1500
    server = LocalServer(work / "repo").start()
    try:
        path = ini(sys_, work / "fail.ini", external_line(MODEL, server.address, MODEL,
                                                         extra=f"on-error=fail timeout-ms={timeout_ms}"), 6)
        run = Watched(MOSES, path, long_src, 100, lambda: server.stop(signal.SIGKILL), ("-s", "200"))
        code = run.wait(300)
        exited = time.monotonic()
    finally:
        server.stop()
    assert code != 0
    errors = [line for line in run.stderr if "on-error=default would use default scores" in line]
    assert errors and server.address in errors[0], "\n".join(run.stderr[-20:])
    # The failing RPC gives up within its deadline (plus the decode of one sentence).
    assert exited - run.acted_at < timeout_ms / 1000 + 3


@needs_moses
def test_restarting_the_only_server_with_on_error_default_counts_the_failed_sentences(system, long_input):
    work, sys_, _ = system
    long_src, reference = long_input
    server = LocalServer(work / "repo").start()

    def restart() -> None:
        server.stop(signal.SIGKILL)
        threading.Timer(1.5, server.start).start()
    try:
        path = ini(sys_, work / "default.ini", external_line(MODEL, server.address, MODEL,
                                                            extra="on-error=default timeout-ms=300"), 6)
        run = Watched(MOSES, path, long_src, 100, restart, ("-s", "200"))
        code = run.wait(300)
    finally:
        time.sleep(2)
        server.stop()
    assert code == 0, "\n".join(run.stderr[-20:])
    assert len(run.out) == len(reference)
    failed = [int(line.split("sentence ")[1].split()[0]) for line in run.stderr if " scored with default scores (" in line]
    summary = [line for line in run.stderr if "sentences were scored with default scores because" in line]
    assert failed and summary and summary[0].split(": ")[1].startswith(f"{len(failed)} of {len(reference)} ")
    assert scored_after(run) > 0, "the restarted server was never used again"
    # Every sentence scored by the server is translated as with no failure.
    assert [i for i in compare(reference, run.out) if i not in failed] == []


# --------------------------------------------------------------------------- tuning
TUNE_SENTENCES = 15


def _mertdir(tmp_path: Path) -> Path:
    """Moses's tuning tools beside this project's MegaM stand-in as megam_i686.opt, which
    mert-moses.pl's PRO runs (it would download MegaM otherwise, which fails offline)."""
    d = tmp_path / "mertdir"
    d.mkdir()
    for tool in ("extractor", "mert", "pro", "kbmira", "evaluator"):   # mert-moses.pl wants all five
        (d / tool).symlink_to(BIN / tool)
    megam = d / "megam_i686.opt"
    megam.write_text(f"#!/bin/sh\nPYTHONPATH={ROOT} exec {sys.executable} -m training.moses.megam \"$@\"\n")
    megam.chmod(0o755)
    return d


def _tuned_weights(ini_path: Path) -> list[float]:
    lines = ini_path.read_text(encoding="utf-8").splitlines()
    line = next(l for l in lines if l.startswith("LexicalReordering0="))
    return [float(w) for w in line.split("=", 1)[1].split()]


@pytest.mark.parametrize("tuner", ["mert", "pro"])
def test_mert_moses_tunes_the_served_model_with_mert_and_pro(system, server, tuner, tmp_path):
    """mert-moses.pl, unchanged, tunes a system whose reordering feature is ExternalReordering
    (svm S6 served, 6 scores): two iterations of MERT, or of PRO with moses-reorder-megam as
    MegaM, on 15 sentences, with moses2 where it is built (CI builds it alone). Each iteration
    decodes the dev set through the server (-show-weights needs none), and the tuned
    moses.ini carries the feature's own weights, moved off their start."""
    work, sys_, src = system
    if not (BIN / "mert").is_file():
        pytest.skip("MOSES_DIR has no bin/mert (build Moses's mert//programs for the tuning tests)")
    scripts = next((p for p in (BIN.parent / "scripts", BIN.parent.parent / "scripts")
                    if (p / "training" / "mert-moses.pl").is_file()), None)
    assert scripts is not None, f"no scripts/training/mert-moses.pl beside {BIN}"
    decoder = MOSES2 or MOSES   # moses2 where it is built: CI builds it alone
    dev_src, dev_ref = tmp_path / "dev.ja", tmp_path / "dev.en"
    dev_src.write_text("".join(src.read_text(encoding="utf-8").splitlines(True)[:TUNE_SENTENCES]), encoding="utf-8")
    refs = (work / "corpus" / "train.en").read_text(encoding="utf-8").splitlines(True)[:TUNE_SENTENCES]
    dev_ref.write_text("".join(refs), encoding="utf-8")
    start = ini(sys_, tmp_path / "start.ini", external_line(MODEL, server.address, "svm-S6"), 6)
    method = ["--pairwise-ranked"] if tuner == "pro" else []
    run = subprocess.run(["perl", str(scripts / "training" / "mert-moses.pl"), str(dev_src), str(dev_ref),
                          str(decoder), str(start), "--mertdir", str(_mertdir(tmp_path)),
                          "--working-dir", str(tmp_path / "mert"), "--no-filter-phrase-table", "--nbest", "20",
                          "--maximum-iterations", "2", "--decoder-flags", "-threads 1", *method],
                         cwd=tmp_path, capture_output=True, text=True, timeout=1200)
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    tuned = _tuned_weights(tmp_path / "mert" / "moses.ini")
    assert len(tuned) == 6 and tuned != [0.3] * 6
    if tuner == "pro":  # the stand-in optimised: PRO's pairs went through it
        assert (tmp_path / "mert" / "run1.pro.data").is_file()
    assert "ExternalReordering" in (tmp_path / "mert" / "moses.ini").read_text(encoding="utf-8")


# --------------------------------------------------------------------------- decoder context (issue 48)
CONTEXT_TYPES = ("wbe-msd-bidirectional-fe", "hier-msd-bidirectional-fe")


@pytest.fixture(scope="module")
def context_server(system):
    """svm S6,neighbour, a model with decoder context, of each CONTEXT_TYPES type (served as
    `ctx-<type>`), trained for real on the system's store, behind its own server."""
    work = system[0]
    repo = work / "ctx-repo"
    for moses_type in CONTEXT_TYPES:
        cli("train", "--family", "svm", "--features", "S6,neighbour", "--type", moses_type, "--store",
            str(work / "store"), "--heldout-fraction", "0", "--threshold", "1",
            "--out", str(repo / f"ctx-{moses_type}" / "1" / "model.mrw"))
    with LocalServer(repo, log=work / "ctx-serve.log") as s:
        yield s


DECODERS = [pytest.param("moses", marks=needs_moses), pytest.param("moses2", marks=needs_moses2)]


def _binary(decoder: str) -> Path:
    return MOSES if decoder == "moses" else MOSES2


@pytest.mark.parametrize("decoder", DECODERS)
@pytest.mark.parametrize("moses_type", CONTEXT_TYPES)
def test_a_context_models_scores_are_its_blocks_combined_along_each_hypothesis(system, context_server, decoder,
                                                                               moses_type, tmp_path):
    """Decoding with a context model, every hypothesis's six reordering values are what its
    phrase sequence gives with the served blocks: backward, each phrase's own block next to
    the previous phrase's neighbour block (the boundary for the first), forward, next to the
    following phrase's, at Moses's orientations (reordering_replay, written independently of
    the C++). Moses: all 20 of each n-best list, which also holds hypotheses recombination
    merged (a merge of hypotheses with different context words would give them values of
    another history); Moses2, which writes no segmentation in n-best lists: the best."""
    work, sys_, src = system
    binary = _binary(decoder)
    model = f"ctx-{moses_type}"
    path = ini(sys_, tmp_path / "ctx.ini", external_line(moses_type, context_server.address, model), 6)
    nbest = tmp_path / "ctx.nbest"
    flags = (("-n-best-list", str(nbest), "20", "-include-segmentation-in-n-best", "-print-alignment-info-in-n-best")
             if decoder == "moses" else ("-n-best-list", str(nbest), "1", "-report-segmentation"))
    run = decode(binary, path, src, flags=flags)
    assert run.returncode == 0, run.stderr[-2000:]
    assert f"model {model} version 1 (svm, {moses_type}, with decoder context) pinned for this run" in run.stderr
    sources = [line.split() for line in src.read_text(encoding="utf-8").splitlines()]
    if decoder == "moses":
        hypotheses = read_moses_nbest(nbest, "LexicalReordering0")
    else:
        assert f": {N_SENTENCES} Score RPCs for {N_SENTENCES} sentences" in run.stderr
        hypotheses = read_segmented_best(run.lines, nbest, "LexicalReordering0",
                                         phrase_table_alignments(sys_.phrase_table), sources)
    assert {h.sentence for h in hypotheses} == set(range(N_SENTENCES))
    kind = "hier" if moses_type.startswith("hier") else "phrase"
    wrong, blind = [], 0
    for sentence in range(N_SENTENCES):
        group = [h for h in hypotheses if h.sentence == sentence]
        phrases = list(dict.fromkeys(p for h in group for p in h.phrases))
        row = {p: i for i, p in enumerate(phrases)}
        own, neighbour, boundary = served_blocks(context_server.address, model, sources[sentence], phrases)
        for h in group:
            rows = [row[p] for p in h.phrases]
            blocks = (own[rows], neighbour[rows], boundary)
            want = expected_values(kind, h.phrases, len(sources[sentence]), *blocks)
            if not np.allclose(h.values, want, rtol=2e-5, atol=2e-5):
                wrong.append((sentence, " ".join(h.words), h.values.tolist(), want.tolist()))
            alone = expected_values(kind, h.phrases, len(sources[sentence]), *blocks, context=False)
            blind += not np.allclose(h.values, alone, rtol=2e-5, atol=2e-5)
    assert wrong == []
    # the check sees a decoder that drops the neighbour blocks
    assert blind > len(hypotheses) / 2, f"only {blind} of {len(hypotheses)} hypotheses change without context"
    if decoder == "moses":
        assert len(hypotheses) > 10 * N_SENTENCES


@needs_moses2
@pytest.mark.parametrize("moses_type", CONTEXT_TYPES)
def test_moses2_n_best_entries_of_a_context_model_carry_their_own_histories_values(system, context_server,
                                                                                 moses_type, tmp_path):
    """Moses2 merges hypotheses whose states hash alike (it never calls the states'
    operator==), and the entries of an n-best list below the best are the merged ones: a
    merge of two hypotheses whose last phrases differ in context words (the backward state's
    hash without the neighbour block, before ab715d7) gives an entry the values of another
    history. Moses2 writes no segmentation in n-best lists, so each of the 20 entries is
    matched with the segmentations of its words that give its translation-model,
    phrase-penalty and distortion values (reordering_replay.segmentations), and its
    reordering values must be what one of them gives with the served blocks."""
    _, sys_, src = system
    model = f"ctx-{moses_type}"
    path = ini(sys_, tmp_path / "ctx.ini", external_line(moses_type, context_server.address, model), 6)
    nbest = tmp_path / "ctx.nbest"
    run = decode(MOSES2, path, src, flags=("-n-best-list", str(nbest), "20"))
    assert run.returncode == 0, run.stderr[-2000:]
    sources = [line.split() for line in src.read_text(encoding="utf-8").splitlines()]
    rows = phrase_table_rows(sys_.phrase_table)
    kind = "hier" if moses_type.startswith("hier") else "phrase"
    by_sentence: dict[int, list[tuple[list[str], str]]] = defaultdict(list)
    for line in nbest.read_text(encoding="utf-8").splitlines():
        fields = line.split(" ||| ")
        by_sentence[int(fields[0])].append((fields[1].split(), fields[2]))
    assert set(by_sentence) == set(range(N_SENTENCES))
    entries = sum(len(e) for e in by_sentence.values())
    unmatched, wrong, pinned, blind = [], [], 0, 0
    for sentence, group in by_sentence.items():
        source = sources[sentence]
        matched = []
        for words, scores in group:
            tm, penalty = feature_values(scores, "TranslationModel0"), feature_values(scores, "PhrasePenalty0")[0]
            jumps = feature_values(scores, "Distortion0")[0]
            candidates = [seg for seg, sums in segmentations(source, words, rows)
                          if len(seg) == round(penalty) and distortion(seg) == jumps
                          and np.allclose(sums, tm, rtol=1e-4, atol=2e-3)]
            if not candidates:
                unmatched.append((sentence, " ".join(words)))
            pinned += len(candidates) == 1
            matched.append((words, feature_values(scores, "LexicalReordering0"), candidates))
        phrases = list(dict.fromkeys(p for _, _, cands in matched for seg in cands for p in seg))
        row = {p: i for i, p in enumerate(phrases)}
        own, neighbour, boundary = served_blocks(context_server.address, model, source, phrases)
        for words, values, candidates in matched:
            def replay(seg, context=True):
                rows_ = [row[p] for p in seg]
                return expected_values(kind, seg, len(source), own[rows_], neighbour[rows_], boundary, context=context)
            if candidates and not any(np.allclose(values, replay(seg), rtol=2e-5, atol=2e-5) for seg in candidates):
                wrong.append((sentence, " ".join(words), values.tolist()))
            blind += bool(candidates) and not any(np.allclose(values, replay(seg, False), rtol=2e-5, atol=2e-5)
                                                  for seg in candidates)
    assert unmatched == []
    assert wrong == []
    assert entries > 10 * N_SENTENCES
    assert pinned > entries / 2, f"only {pinned} of {entries} entries have one segmentation that fits"
    # the check sees a decoder that drops the neighbour blocks
    assert blind > entries / 2, f"only {blind} of {entries} entries change without context"


@pytest.mark.parametrize("decoder", DECODERS)
def test_a_context_model_with_two_threads_translates_like_one(system, context_server, decoder):
    work, sys_, src = system
    binary = _binary(decoder)
    moses_type = "hier-msd-bidirectional-fe"
    path = ini(sys_, work / f"ctx-threads-{decoder}.ini",
               external_line(moses_type, context_server.address, f"ctx-{moses_type}"), 6)
    many = work / "test3.ja"
    many.write_text(src.read_text(encoding="utf-8") * 3, encoding="utf-8")
    one = decode(binary, path, many, threads=1)
    two = decode(binary, path, many, threads=2)
    assert one.returncode == 0 and two.returncode == 0, two.stderr[-2000:]
    assert len(one.lines) == 3 * N_SENTENCES
    assert compare(one.lines, two.lines) == []


# Every kind, orientation set, direction and collapse of Moses's types (-fe: these models are
# conditioned on both sides; collapseff spelled on the line, the model of its full type).
FALLBACK_TYPES = ("wbe-mslr-bidirectional-fe", "wbe-monotonicity-forward-fe", "hier-msd-backward-fe",
                  "hier-mslr-bidirectional-fe", "hier-msd-bidirectional-fe-collapseff")


@pytest.fixture(scope="module")
def refusing_server(system):
    """nb-map S1 with and without neighbour features (`ctx-<type>`, `plain-<type>`) for each
    FALLBACK_TYPES type, behind a server that refuses every sentence (--max-pairs 1)."""
    work = system[0]
    repo = work / "refusing-repo"
    for spelled in FALLBACK_TYPES:
        moses_type = spelled.replace("-collapseff", "")
        for name, features in ((f"ctx-{moses_type}", "S1,neighbour"), (f"plain-{moses_type}", "S1")):
            out = repo / name / "1" / "model.mrw"
            if not out.is_file():
                cli("train", "--family", "nb-map", "--features", features, "--type", moses_type, "--store",
                    str(work / "store"), "--heldout-fraction", "0", "--threshold", "1", "--out", str(out))
    with LocalServer(repo, log=work / "refusing-serve.log", max_pairs=1) as s:
        yield s


@needs_moses
@pytest.mark.parametrize("spelled", FALLBACK_TYPES)
def test_with_every_rpc_failing_a_context_model_decodes_exactly_as_moses_own_states(system, refusing_server, spelled,
                                                                                     tmp_path):
    """Under on-error=default every option of a refused sentence gets the default-scores row,
    which the context states read as Moses's LRState reads a row. So a context model, whose
    hypotheses carry this feature's states, and a model without context, whose hypotheses
    carry Moses's own, must give the same n-best lists, values and all: the context states'
    orientations, hashes and recombination are Moses's, type by type."""
    work, sys_, src = system
    moses_type = spelled.replace("-collapseff", "")
    n = n_scores(spelled)
    defaults = ",".join(f"{0.05 + 0.9 * (i + 1) / (n + 1):.3f}" for i in range(n))
    runs = {}
    for name in ("ctx", "plain"):
        nbest = tmp_path / f"{name}.nbest"
        line = external_line(spelled, refusing_server.address, f"{name}-{moses_type}", defaults,
                             extra="on-error=default")
        run = decode(MOSES, ini(sys_, tmp_path / f"{name}.ini", line, n), src, flags=("-n-best-list", str(nbest), "20"))
        assert run.returncode == 0, run.stderr[-2000:]
        assert f"{N_SENTENCES} of {N_SENTENCES} sentences were scored with default scores" in run.stderr
        runs[name] = (run.lines, nbest.read_text(encoding="utf-8"))
    assert compare(runs["ctx"][0], runs["plain"][0]) == []
    assert runs["ctx"][1] == runs["plain"][1]
    assert len(runs["ctx"][1].splitlines()) > 10 * N_SENTENCES
