"""Tuned translation quality: the SVM paper's Table 8 with MERT, PRO and batch-MIRA, on ja-en
(Tanaka) and on ja-en-kyoto (Wikipedia).

What it does (issue 16), every step resumable from the state it left under --work:

1. corpus: train.* minus its last --heldout (5,000) pairs is the training slice (phrase
   table, LM, every reordering model); those 5,000 pairs are a second, larger test set.
2. one phrase-based system the standard way: Moses's train-model.perl steps 4-9 on the
   given alignment (hier-msd-bidirectional-fe table), a 5-gram KenLM (lmplz +
   build_binary) on the target side, tables filtered for dev, test and the held-out set
   (filter-model-given-input.pl).
3. reordering models for the ExternalReordering systems, trained with this project's CLI
   on the training slice (`--heldout-fraction 0`), published into WORK/models and
   served by `python3 -m training.cli serve` (started and stopped by this script).
4. tuning runs (mert-moses.pl: MERT, PRO = --pairwise-ranked with the project's
   MegaM-compatible optimizer as MERTDIR/megam_i686.opt, batch-MIRA) in the issue's
   order of priority (`plan`: every system at distortion limit 12, where ja-en's word
   order needs it; the systems at the ini's limit 6 only by `--only`), --jobs of them at
   a time (one core each, `-threads 1`), then the test decode with the tuned weights (and
   the held-out decode for Lexical, the best External, the probe and no RM); a tuning run
   cut short is continued with mert-moses.pl --continue.
5. one Markdown table (WORK/table.md and stdout): test BLEU and chrF (sacrebleu,
   tokenize none + force: the references are tokenized, as multi-bleu), mean and spread
   over runs, paired bootstrap against Lexical with the same tuner on the pooled outputs
   (sacrebleu's paired-bs, 1000 resamples), decode seconds per sentence.

    python3 benchmarks/translation.py --moses /work/moses/inst --work /work/mt/ja-en --jobs 2
    python3 benchmarks/translation.py --moses /work/moses/inst --work /work/mt/ja-en --table   # table only

6. the record (benchmarks/translation-runs/, committed): every finished run's tuned
   weights, decodes and timings. A new machine or work directory rebuilds the system and
   restores the finished runs from it, so only unfinished runs are tuned again.

A corpus shipped without train.align and with dev and test sets of whole articles (ja-en-kyoto,
issue 29; train.{ja,en}.xz are read as they are) takes another road: train, dev and test are
aligned together with `moses-reorder align` (dev/test links serve only the classification
study), nothing is held out of train, every system step is measured (wall, CPU, peak memory),
and the plan is `articles_plan` at a distortion limit of its own (--limit, --tuner,
--best-system, --dev-lines, --decoder):

    python3 benchmarks/translation.py --moses INST --corpus ../shared/data/ja-en-kyoto --system-only
    python3 benchmarks/translation.py --moses INST --corpus ../shared/data/ja-en-kyoto --train-models svm-S6-ctx
    python3 benchmarks/translation.py --moses INST --corpus ../shared/data/ja-en-kyoto --decode-probe 100:6,12,20
    python3 benchmarks/translation.py --moses INST --corpus ../shared/data/ja-en-kyoto --classify
    python3 benchmarks/translation.py --moses INST --corpus ../shared/data/ja-en-kyoto --limit L --jobs 2
    python3 benchmarks/translation.py --moses INST --corpus ../shared/data/ja-en-kyoto --extra-test DIR

Two cheaper looks at what a reordering model does in the decoder (issue 48), for runs already
tuned: `--cross-decode A@B:pro1+pro2+pro3` decodes the test set with system A under B's tuned
weights (svm S6,neighbour under svm S6's: the context alone, untuned), and `--dev-pools
B:pro1+pro2+pro3` decodes the tuning set's 100-best lists with B's weights and counts how often
its reordering feature orders their hypotheses as sentence BLEU does (`A@B:pro1` for A's model
under B's weights: the pool of a model no run has tuned):

    python3 benchmarks/translation.py --moses INST --cross-decode svm-S6-ctx-dl12@svm-S6-dl12:pro1+pro2+pro3
    python3 benchmarks/translation.py --moses INST --dev-pools lexical-dl12:pro1,svm-S6-dl12:pro1
    python3 benchmarks/translation.py --moses INST --dev-pools svm-S6-ctx-dl12@svm-S6-dl12:pro1

Run from the repository root (its `training`/`server` packages are the ones used).
The Moses build (with ExternalReordering installed by moses_ff/install.sh) and the work
files stay outside the repository; only the record is kept in it. It measures; it
asserts nothing.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))      # this checkout's server/ and training/, whatever is installed

import numpy as np  # noqa: E402

from training.corpus.pharaoh import parse_links  # noqa: E402
from training.moses.distortion import longest_jumps  # noqa: E402
DEFAULT_CORPUS = REPO.parent / "shared" / "data" / "ja-en"
WORK_ROOT = Path("/work/mt")
DEFAULT_RECORD = REPO / "benchmarks" / "translation-runs"
MOSES_TYPE = "hier-msd-bidirectional-fe"
SRC, TGT = "ja", "en"
LM_ORDER = 5
#: train-model.perl's steps from an existing alignment, each run and measured on its own.
TM_STEPS = {4: "lexical translation table", 5: "extract", 6: "score phrases", 7: "lexical-reordering-score",
            8: "generation tables", 9: "moses.ini"}
NBEST = 100


# --------------------------------------------------------------------------- systems

@dataclass(frozen=True)
class System:
    name: str
    label: str
    kind: str                      # none | lexical | external
    family: str = ""
    features: str = ""
    params: tuple[str, ...] = ()   # --param NAME=VALUE for `train`
    sparse: bool = False           # Moses's sparse reordering features on the reordering line
    base: str = ""                 # external model name a +sparse (or other variant) system reuses
    distortion_limit: int = 0      # 0: the ini's (6, train-model.perl's default)
    with_lexical: bool = False     # the External feature beside Moses's LexicalReordering, not instead
    baseline: str = "lexical"      # the system its BLEU difference and paired bootstrap are against


def model_name(system: System) -> str:
    """The served model a system decodes with: variants (a limit, +sparse, beside the table) share their base's."""
    return system.base or system.name


# The issue's systems, at the ini's distortion limit (Moses's default 6).
AT_DEFAULT_LIMIT = [
    System("none", "no reordering model (distortion only)", "none"),
    System("lexical", "LexicalReordering (Moses table)", "lexical"),
    System("svm-S6", "External svm S6", "external", "svm", "S6"),
    System("dual-mlr-S6", "External dual-mlr S6", "external", "dual-mlr", "S6"),
    System("nb-bayes-S9", "External nb-bayes S9", "external", "nb-bayes", "S9"),
    System("hybrid-S6", "External hybrid (maxent S6,pair base on all examples)", "external", "hybrid",
           "S6,pair", ("rare_max=1000000000",)),
    System("svm-S7", "External svm S7", "external", "svm", "S7"),
    System("lexical+sparse", "LexicalReordering + sparse reordering features", "lexical", sparse=True),
    System("svm-S6+sparse", "External svm S6 + sparse reordering features", "external", "svm", "S6",
           sparse=True, base="svm-S6"),
]
#: ja-en's word order needs a longer limit (training.moses.distortion; RESULTS, Translation: +6.7
#: BLEU for Lexical), so every system is also measured at 12, and the plan's open runs go there first.
LIMIT = 12


def at_limit(system: System, limit: int = LIMIT) -> System:
    """The same system with only [distortion-limit] changed; Lexical at the limit is compared
    with Lexical at the default (what the limit buys), every other system with Lexical at the limit."""
    baseline = system.baseline if system.name == system.baseline else f"{system.baseline}-dl{limit}"
    return replace(system, name=f"{system.name}-dl{limit}", label=f"{system.label}, distortion limit {limit}",
                   base=model_name(system) if system.kind == "external" else "",
                   distortion_limit=limit, baseline=baseline)


def beside_name(limit: int, model: str = "svm-S6") -> str:
    """The probe: the classifier's six scores beside the table's."""
    return f"{model}+lexical-dl{limit}"


BESIDE = beside_name(LIMIT)
#: Models of the classification study on a corpus with its own test articles (issue 29, step 2),
#: in the order they are trained (cheap and most likely first); each is compared with
#: LEXICAL_SERVED, Moses's table as the `lexical` family (what ExternalReordering would serve).
#: Issue 29 step 5: on Kyoto's decodable pairs the table's log-loss is level with svm S6's or
#: better on pairs seen 100+ times, and the SVM's lead is on rare ones; the hybrid's Dirichlet
#: backoff keeps the table's counts where they are many and the SVM's scores where they are few.
HYBRID_SVM = System("hybrid-svm-S6", "External hybrid (svm S6,pair base on all examples)", "external", "hybrid",
                    "S6,pair", ('base="svm"', "rare_max=1000000000"))
#: The hybrid's base there is the SVM: a maxent base (ja-en's hybrid-S6) costs about 9x the SVM's
#: CPU at ja-en's 1.46M examples (290 against ~32 s, S6), hours at Kyoto's 44.7M.
#: Issue 48: svm S6 conditioned on the phrase the decoder places next to each pair (its
#: boundary words; training/features/neighbour.py), served as context blocks.
CONTEXT_SVM = System("svm-S6-ctx", "External svm S6 with the neighbouring phrase (context blocks)", "external",
                     "svm", "S6,neighbour")
#: Issue 48 step 7: context beside the table. Tuned, the context model replacing the table was
#: 0.31 BLEU below it on ja-en and its feature alone ordered the dev pools' translations no
#: better than the table's (RESULTS); beside it, the table keeps what it knows of each pair and
#: the context blocks add only what the previous phrase says.
CONTEXT_BESIDE = beside_name(LIMIT, CONTEXT_SVM.name)
CLASSIFY_MODELS = ("svm-S6", "nb-bayes-S9", "svm-S7", "hybrid-svm-S6", "dual-mlr-S6", "maxent-S6", "hybrid-S6",
                   "svm-S6-ctx")
LEXICAL_SERVED = "lexical-served"
SYSTEMS: dict[str, System] = {s.name: s for s in [
    *AT_DEFAULT_LIMIT,
    *(at_limit(s) for s in AT_DEFAULT_LIMIT),
    # Tried to close the gap (issue 16): the classifier's six scores beside the table's.
    System(BESIDE, f"External svm S6 beside LexicalReordering, distortion limit {LIMIT}",
           "external", "svm", "S6", base="svm-S6", with_lexical=True, distortion_limit=LIMIT,
           baseline=f"lexical-dl{LIMIT}"),
    # Trained for the classification study (CLASSIFY_MODELS) and not planned for tuning on ja-en.
    System("maxent-S6", "External maxent S6", "external", "maxent", "S6"),
    HYBRID_SVM, at_limit(HYBRID_SVM),
    CONTEXT_SVM, at_limit(CONTEXT_SVM),
    System(CONTEXT_BESIDE, f"External svm S6 with the neighbouring phrase beside LexicalReordering, "
           f"distortion limit {LIMIT}", "external", "svm", "S6,neighbour", base=CONTEXT_SVM.name,
           with_lexical=True, distortion_limit=LIMIT, baseline=f"lexical-dl{LIMIT}"),
    System(LEXICAL_SERVED, "External lexical (Moses's table, served)", "external", "lexical", "pair"),
]}
METHODS = {"mert": [], "pro": ["--pairwise-ranked"], "mira": ["--batch-mira"]}
METHODS["pro-alldev"] = METHODS["pro"]
METHOD_LABEL = {"mert": "MERT", "pro": "PRO", "mira": "batch-MIRA", "pro-alldev": "PRO on all of dev"}
#: Tuners that decode all of dev whatever --dev-lines says: issue 48 step 6 tunes both systems
#: on all 1,507 Kyoto dev sentences when 600 leave their difference within +-0.5 BLEU. A run
#: folder of its own (pro-alldev1) keeps these runs apart from the 600-sentence PRO runs, and
#: the table compares them only with Lexical's runs of the same tuner.
ALL_DEV = {"pro-alldev"}
#: Runs of each tuner for Lexical and the best External. batch-MIRA gets one: on ja-en (dev
#: references of 7.9 words) Moses's kbmira rewards length (dev output 1.08-1.19x the
#: reference) and its weights score 31.7 BLEU on their own 25-iteration n-best pool where
#: MERT's score 36.0 (svm S6: 20.7 against 34.9); kbmira started from MERT's weights falls to
#: 30.9 (benchmarks/tuner_pool.py; benchmarks/RESULTS.md). Its rows measure the
#: tuner failing, so more runs would only measure that again; the sparse variants are tuned
#: with PRO instead, which takes sparse features too.
TUNER_RUNS = {"mert": (1, 2, 3), "pro": (1, 2, 3), "mira": (1,)}
SPARSE_TUNER = "pro"
SPARSE_TOP_WORDS = 50              # word lists of the sparse reordering features (Cherry 2013)


def systems_at(limit: int) -> None:
    """Add every system at another distortion limit to SYSTEMS (a corpus whose word order needs
    its own limit, chosen by --sweep-distortion: ja-en-kyoto)."""
    if limit == LIMIT or f"lexical-dl{limit}" in SYSTEMS:
        return
    SYSTEMS.update({s.name: s for s in (at_limit(s, limit) for s in AT_DEFAULT_LIMIT)})
    beside = SYSTEMS[BESIDE]
    SYSTEMS[beside_name(limit)] = replace(beside, name=beside_name(limit), distortion_limit=limit,
                                          label=beside.label.replace(f"limit {LIMIT}", f"limit {limit}"),
                                          baseline=f"lexical-dl{limit}")


@dataclass(frozen=True)
class Job:
    kind: str                      # tune | heldout
    system: str
    method: str
    run: int

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.system}:{self.method}{self.run}"


def plan(best: str) -> list[Job]:
    """The issue's order of priority, at distortion limit 12 (ja-en's word order needs it: +6.7
    BLEU for Lexical, RESULTS). First the goal: 3 MERT runs each of Lexical and the best
    External, each pair followed by its held-out decodes; then the probe beside the table. Then
    PRO (x3) and batch-MIRA (TUNER_RUNS: x1) for Lexical and the best External, each tuner's
    held-out decodes right after its runs (a tuner's row is then whole on both test sets before
    the next tuner starts; a held-out decode is ~1/3 of a run); no RM x3 and every other system
    x1 with MERT, the sparse variants x1 with SPARSE_TUNER (MERT cannot tune many sparse
    weights), and last the held-out decodes of no RM.

    The systems at the ini's default limit 6 are no longer planned: earlier runs measured their
    goal runs (benchmarks/RESULTS.md), the README tells ja-en users not to decode at 6, and their
    other ~40 jobs would cost ~15 core-hours to measure a setting nobody should use. They stay
    in SYSTEMS, so `--only` can still run any of them."""
    t = lambda s, m, k: Job("tune", f"{s}-dl{LIMIT}", m, k)          # noqa: E731
    h = lambda s, m, k: Job("heldout", f"{s}-dl{LIMIT}", m, k)       # noqa: E731
    jobs = []
    for k in (1, 2, 3):
        jobs += [t("lexical", "mert", k), t(best, "mert", k), h("lexical", "mert", k), h(best, "mert", k)]
    # The probe beside the table gained on test in its first run (RESULTS): it
    # gets the goal's 3 MERT runs and held-out decodes before the rest of the plan.
    for k in (1, 2, 3):
        jobs += [Job(kind, BESIDE, "mert", k) for kind in ("tune", "heldout")]
    for method in ("pro", "mira"):
        jobs += [t(system, method, k) for k in TUNER_RUNS[method] for system in ("lexical", best)]
        jobs += [h(system, method, k) for k in TUNER_RUNS[method] for system in ("lexical", best)]
    if best == CONTEXT_SVM.name:  # step 7's lever, tuned as the context model was (PRO)
        jobs += [Job(kind, CONTEXT_BESIDE, "pro", k) for k in TUNER_RUNS["pro"] for kind in ("tune", "heldout")]
    jobs += [t("none", "mert", k) for k in (1, 2, 3)]
    jobs += [t(s.name, "mert", 1) for s in AT_DEFAULT_LIMIT
             if s.kind == "external" and s.name != best and not s.base]
    jobs += [t("lexical+sparse", SPARSE_TUNER, 1),
             t(f"{best}+sparse" if f"{best}+sparse" in SYSTEMS else "svm-S6+sparse", SPARSE_TUNER, 1)]
    # No RM on the held-out pairs too: what Lexical's table itself adds there is the headroom a
    # reordering model has on this corpus (on the test set: RESULTS).
    jobs += [h("none", "mert", k) for k in (1, 2, 3)]
    return jobs


def articles_plan(best: str, limit: int, tuner: str) -> list[Job]:
    """The plan on a corpus with dev and test articles of its own (ja-en-kyoto, issue 29 step 3-4),
    every system at one distortion limit (chosen by a sweep of Lexical's first tuned run):
    one MERT and one PRO run of Lexical first (the better is the study's tuner, --tuner); then
    with that tuner Lexical's runs 2-3, no RM x1, svm S6 replacing and beside the table x1, the
    best model of the classification study x1 (--best, if not svm S6), and for the context model
    (issue 48) its tuner's runs beside the table, step 7's lever, then PRO runs of Lexical and
    of it on all of dev (pro-alldev, step 6); last the best External system's (--best-system)
    runs 2-3. Test decodes only: there is no held-out slice."""
    systems_at(limit)
    t = lambda s, m, k: Job("tune", f"{s}-dl{limit}" if s != beside_name(limit) else s, m, k)  # noqa: E731
    jobs = [t("lexical", "mert", 1), t("lexical", "pro", 1)]
    jobs += [t("lexical", tuner, 2), t("lexical", tuner, 3), t("none", tuner, 1), t("svm-S6", tuner, 1),
             t(beside_name(limit), tuner, 1)]
    if best != "svm-S6":
        jobs.append(t(best, tuner, 1))
    if best == CONTEXT_SVM.name and limit == LIMIT:
        # Issue 48 step 7 on Kyoto: the context model beside the table, after the context
        # model's own runs (--best-system's goal runs come after this plan; --only orders them).
        jobs += [Job("tune", CONTEXT_BESIDE, tuner, k) for k in TUNER_RUNS[tuner]]
        # Step 6's second half: 600 dev sentences left the context model within +-0.5 BLEU of
        # Lexical, so both are tuned on all of dev, a pair of runs at a time.
        jobs += [Job("tune", f"{s}-dl{limit}", "pro-alldev", k) for k in TUNER_RUNS["pro"] for s in ("lexical", best)]
    return jobs


def goal_runs(best_system: str, tuner: str) -> list[Job]:
    """Runs 2-3 of the best External system, once step 4's single runs have named it."""
    return [Job("tune", best_system, tuner, k) for k in (2, 3)]


# --------------------------------------------------------------------------- the record

class Record:
    """The finished runs' results (tuned weights, outputs, timings), kept with the repository.

    A tuning run costs an hour of a core, the system it tunes a few minutes: a study on a new
    machine (or after its work directory is gone, which once lost
    every run) rebuilds the system and restores its finished runs from here instead of
    tuning them again, and the table can always be recomputed from what was decoded. One
    folder per corpus and held-out count, named by a digest of the corpus files, so runs of
    different systems never mix; outputs gzipped (a 5,000-sentence decode is ~80 KB). The
    outputs of a share-alike corpus (its README says so: ja-en-kyoto, CC BY-SA 3.0) are
    derived data under its licence, so for it the record keeps only weights and timings.

    A corpus aligned here (no train.align shipped) gets one folder per build as well (`build`,
    the study's system_id, read when the folder is first needed, after the alignment): weights
    tuned on one alignment are not another build's runs, and restoring them would compare a
    run tuned here with one tuned on a system that no longer exists."""

    FILES = ("tune.json", "test.json", "test.out", "heldout.json", "heldout.out", "timing.json")
    DECODES = ("test.json", "test.out", "heldout.json", "heldout.out")
    CORPUS_FILES = tuple(f"{subset}.{lang}" for subset in ("train", "dev", "test") for lang in (SRC, TGT)) \
        + ("train.align",)

    def __init__(self, root: Path, corpus: Path, heldout: int, build: Callable[[], str] | None = None):
        self.root, self.corpus, self.heldout, self.build = root, corpus, heldout, build
        self._dir: Path | None = None
        keep_outputs = not share_alike(corpus)
        self.files = tuple(f for f in self.FILES if keep_outputs or not f.endswith(".out"))

    @property
    def dir(self) -> Path:
        if self._dir is None:
            digest = hashlib.sha256()
            for name in self.CORPUS_FILES:
                path = shipped(self.corpus, name)
                if path is None:            # an unaligned corpus ships no train.align
                    continue
                digest.update(name.encode() + b"\0")
                _digest_file(digest, path)
            build = f"-{self.build()}" if self.build is not None else ""
            self._dir = self.root / f"{self.corpus.name}-{digest.hexdigest()[:12]}-heldout{self.heldout}{build}"
        return self._dir

    def has(self, rel: str, name: str) -> bool:
        return (self.dir / rel / self._stored(name)).is_file()

    @staticmethod
    def _stored(name: str) -> str:
        return name + ".gz" if name.endswith(".out") else name

    def save(self, run_dir: Path, rel: str) -> None:
        """Copy what the run has finished into the record, each file atomically.

        A decode's record (test.json, heldout.json and their outputs) is written once per
        weights: a record that keeps no outputs (a share-alike corpus) has its restored runs
        decode their test set again on each new machine, and that re-decode's times belong to
        that machine, not to the run the record describes. New weights (a run tuned on past
        its old cap) replace them."""
        dest = self.dir / rel
        dest.mkdir(parents=True, exist_ok=True)
        same_weights = False
        tuned = run_dir / "tuned.ini"
        if tuned.is_file():
            sections = read_ini(tuned)
            kept = {"weight": sections["weight"]}
            sparse = [Path(l) if Path(l).is_absolute() else run_dir / l
                      for l in sections.get("weight-file", []) if l.strip()]
            sparse_bytes = sparse[0].read_bytes() if sparse else None
            if sparse:
                kept["weight-file"] = ["sparse-weights"]
            weights = _ini_text(kept).encode()
            same_weights = _holds(dest / "weights.ini", weights) and \
                (sparse_bytes is None or _holds(dest / "sparse-weights", sparse_bytes))
            if sparse_bytes is not None:
                _atomic_write(dest / "sparse-weights", sparse_bytes)
            _atomic_write(dest / "weights.ini", weights)
        for name in self.files:
            src = run_dir / name
            if same_weights and name in self.DECODES and (dest / self._stored(name)).is_file():
                continue
            if src.is_file():
                data = src.read_bytes()
                _atomic_write(dest / self._stored(name), gzip.compress(data, mtime=0) if name.endswith(".out")
                              else data)

    def restore(self, run_dir: Path, rel: str) -> bool:
        """Fill a run directory from the record (only files it lacks); True if anything came back."""
        src = self.dir / rel
        if not (src / "weights.ini").is_file():
            return False
        run_dir.mkdir(parents=True, exist_ok=True)
        restored = False
        # a decode's times come back only with its output (a share-alike record keeps none: the
        # restored run is then tuned but not finished, and its test set is decoded again)
        dropped = set(self.FILES) - set(self.files)
        restorable = [n for n in self.files if n.replace(".json", ".out") not in dropped]
        wanted = [("weights.ini", "tuned.ini"), ("sparse-weights", "sparse-weights")] + \
            [(self._stored(n), n) for n in restorable]
        for stored, name in wanted:
            if (src / stored).is_file() and not (run_dir / name).is_file():
                data = (src / stored).read_bytes()
                _atomic_write(run_dir / name, gzip.decompress(data) if stored.endswith(".gz") else data)
                restored = True
        return restored


def _holds(path: Path, data: bytes) -> bool:
    return path.is_file() and path.read_bytes() == data


def share_alike(corpus: Path) -> bool:
    """Whether the corpus's README puts it under a share-alike licence (CC BY-SA)."""
    readme = corpus / "README.md"
    text = readme.read_text(encoding="utf-8", errors="replace") if readme.is_file() else ""
    return "ShareAlike" in text or "BY-SA" in text


def shipped(corpus: Path, name: str) -> Path | None:
    """A corpus file as shipped: NAME, or NAME.xz (ja-en-kyoto ships its training text
    compressed); None if neither exists."""
    for path in (corpus / name, corpus / f"{name}.xz"):
        if path.is_file():
            return path
    return None


def _digest_file(digest: "hashlib._Hash", path: Path) -> "hashlib._Hash":
    """Feed a file to a digest a MiB at a time (corpus and alignment files are hundreds of MB)."""
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


# --------------------------------------------------------------------------- helpers

#: The bytes eflomal reads as its seed in a reproducible alignment (see seeded_alignment).
ALIGN_SEED = 2026


def seeded_alignment(cmd: list, entropy: Path) -> tuple[list, bool]:
    """CMD (a `moses-reorder align` command) made reproducible, and whether that was possible.

    eflomal offers no seed: its sampler reads /dev/urandom. Run in a private mount namespace
    where /dev/urandom is a file of fixed bytes, with one OpenMP thread (two threads schedule
    its samplers differently on every run), the same corpus gives the same alignment on every
    run of a machine, so a study's tuned runs stay valid on the system it rebuilds. Another
    machine may align differently (on 2026-12-02 a new one gave build 4a9a79d30412 where the
    last gave 5cba8c2cf309: eflomal is compiled for the CPU it runs on); machines of one kind
    agree (the AMD machines of 2026-12-02 and 12-03 both gave 4a9a79d30412, the Intel Xeon
    machines of 2026-12-04 and 12-05 both 023b09816c6f, so the record's runs of that build were
    restored on the second). Needs root and
    unshare(1); elsewhere CMD is returned as it is and every run aligns differently.
    """
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return cmd, False
    if not entropy.is_file():
        _atomic_write(entropy, np.random.default_rng(ALIGN_SEED).bytes(1 << 20))
    inner = " ".join(shlex.quote(str(c)) for c in [*cmd, "--threads", "1"])
    return ["unshare", "-m", "sh", "-c",
            f"mount --bind {shlex.quote(str(entropy))} /dev/urandom && exec {inner}"], True


class Study:
    def __init__(self, args: argparse.Namespace):
        self.moses = Path(args.moses).resolve()
        self.bin = self.moses / "bin"
        self.scripts = self.moses / "scripts"
        self.corpus = Path(args.corpus).resolve()
        self.work = Path(args.work).resolve()
        self.heldout = args.heldout if args.heldout is not None else \
            (5000 if (self.corpus / "train.align").is_file() else 0)
        self.port = args.port
        self.best = args.best
        self.dev_lines = getattr(args, "dev_lines", 0)
        self.decoder = getattr(args, "decoder", "moses")
        self.tune_threads = getattr(args, "tune_threads", 1)
        self.max_iterations = getattr(args, "max_iterations", 0)
        self.lock = threading.Lock()
        # One lock per model, so a job whose model is ready (or another model) never waits for
        # an unrelated training run (one lock for all left a core idle while the hybrid
        # trained); the store every model trains from is built once, under its own lock.
        self.train_locks: dict[str, threading.Lock] = {}
        self.store_lock = threading.Lock()
        self.server_lock = threading.Lock()
        self.filter_lock = threading.Lock()
        self.server = None  # server.local.LocalServer while it runs
        self.log_file = self.work / "study.log"
        aligned_here = shipped(self.corpus, "train.align") is None
        self.record = Record(Path(args.record).resolve(), self.corpus, self.heldout,
                             build=(lambda: self.system_id) if aligned_here else None) if args.record else None

    # -- logging and processes
    def log(self, message: str) -> None:
        line = f"{time.strftime('%H:%M:%S')} {message}"
        print(line, flush=True)
        with self.lock:
            self.work.mkdir(parents=True, exist_ok=True)
            with open(self.log_file, "a", encoding="utf-8") as fh:
                fh.write(line + "\n")

    def run(self, cmd: list[str], *, cwd: Path | None = None, stdout=None, stderr=None, stdin=None,
            env: dict | None = None) -> float:
        """Run a command to completion (raise on failure); returns its wall seconds."""
        return self.measure(cmd, cwd=cwd, stdout=stdout, stderr=stderr, stdin=stdin, env=env)["wall_seconds"]

    def measure(self, cmd: list[str], *, cwd: Path | None = None, stdout=None, stderr=None, stdin=None,
                env: dict | None = None) -> dict[str, float]:
        """Run a command to completion (raise on failure); its wall and CPU seconds and peak
        resident memory. wait4 reports the command and every descendant it waited for (the
        largest one's peak for memory), so a Perl driver's sort and extract children count."""
        start = time.time()
        # same process group as this script: stopping the study (kill -- -PGID) stops its Moses runs
        with subprocess.Popen([str(c) for c in cmd], cwd=cwd, stdout=stdout, stderr=stderr, stdin=stdin,
                              env=env) as proc:
            try:
                _, status, usage = os.wait4(proc.pid, 0)
            except BaseException:
                proc.terminate()
                raise
            proc.returncode = code = os.waitstatus_to_exitcode(status)
        if code != 0:
            raise RuntimeError(f"exit {code}: {' '.join(str(c) for c in cmd)}")
        return {"wall_seconds": round(time.time() - start, 1),
                "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 1),
                "peak_mb": round(usage.ru_maxrss / 1024)}

    def done(self, step: str) -> bool:
        return (self.work / "state" / f"{step}.done").is_file()

    def mark(self, step: str, **info) -> None:
        state = self.work / "state"
        state.mkdir(parents=True, exist_ok=True)
        _atomic_write(state / f"{step}.done", (json.dumps(info, indent=1) + "\n").encode())

    def marked(self, step: str) -> dict:
        """What a finished step recorded (its measurements); {} for a step not done."""
        return json.loads((self.work / "state" / f"{step}.done").read_text()) if self.done(step) else {}

    def marked_steps(self, prefix: str) -> list[str]:
        """The finished steps whose names start with PREFIX, sorted."""
        return sorted(p.name.removesuffix(".done") for p in (self.work / "state").glob(f"{prefix}*.done"))

    # -- paths
    @property
    def cdir(self) -> Path:
        return self.work / "corpus"

    def text(self, subset: str, lang: str) -> Path:
        return self.cdir / f"{subset}.{lang}"

    @property
    def system_id(self) -> str:
        """Which build of the system a run was tuned or decoded on: a digest of the word
        alignment its phrase table was built from, the one input that can differ between
        machines (ja-en-kyoto is aligned here: the same on every run of a machine where
        seeded_alignment can fix eflomal's seed, maybe another on another machine; a shipped
        alignment gives the same one everywhere)."""
        return _digest_file(hashlib.sha256(), self.cdir / "aligned.grow-diag-final-and").hexdigest()[:12]

    # ------------------------------------------------------------------- step 1: corpus
    def prepare_corpus(self) -> None:
        if self.done("corpus"):
            return
        if not (self.corpus / "train.align").is_file():
            self.align_corpus()
            return
        self.cdir.mkdir(parents=True, exist_ok=True)
        sizes = {}
        files = {SRC: self.corpus / f"train.{SRC}", TGT: self.corpus / f"train.{TGT}",
                 "align": self.corpus / "train.align"}
        lines = {k: p.read_text(encoding="utf-8").splitlines(keepends=True) for k, p in files.items()}
        n = len(lines[SRC])
        assert all(len(v) == n for v in lines.values()), "train files differ in length"
        cut = n - self.heldout
        (self.cdir / f"train.{SRC}").write_text("".join(lines[SRC][:cut]), encoding="utf-8")
        (self.cdir / f"train.{TGT}").write_text("".join(lines[TGT][:cut]), encoding="utf-8")
        (self.cdir / "train.align").write_text("".join(lines["align"][:cut]), encoding="utf-8")
        (self.cdir / "aligned.grow-diag-final-and").write_text("".join(lines["align"][:cut]), encoding="utf-8")
        (self.cdir / f"heldout.{SRC}").write_text("".join(lines[SRC][cut:]), encoding="utf-8")
        (self.cdir / f"heldout.{TGT}").write_text("".join(lines[TGT][cut:]), encoding="utf-8")
        for subset in ("dev", "test"):
            for lang in (SRC, TGT):
                shutil.copyfile(self.corpus / f"{subset}.{lang}", self.text(subset, lang))
                sizes[subset] = sum(1 for _ in open(self.text(subset, lang), encoding="utf-8"))
        self.mark("corpus", train=cut, heldout=self.heldout, **sizes)
        self.log(f"corpus: {cut} training pairs, {self.heldout} held out, dev {sizes['dev']}, test {sizes['test']}")

    def align_corpus(self) -> None:
        """A corpus shipped without alignment (ja-en-kyoto): train, dev and test aligned together
        with `moses-reorder align` (more text, better links; dev/test have no other source of gold
        orientations). Only the train links reach the phrase table and the models; dev.align and
        test.align are for the classification study. No held-out slice: dev and test are whole
        articles of their own."""
        self.cdir.mkdir(parents=True, exist_ok=True)
        sizes = {}
        for subset in ("train", "dev", "test"):
            for lang in (SRC, TGT):
                if not self.text(subset, lang).is_file():
                    copy_text(shipped(self.corpus, f"{subset}.{lang}"), self.text(subset, lang))
            sizes[subset] = count_lines(self.text(subset, SRC))
            if count_lines(self.text(subset, TGT)) != sizes[subset]:
                raise RuntimeError(f"{subset}: {SRC} and {TGT} differ in length")
        if not self.done("align"):
            for lang in (SRC, TGT):
                with open(self.cdir / f"all.{lang}.tmp", "wb") as out:
                    for subset in ("train", "dev", "test"):
                        with open(self.text(subset, lang), "rb") as fh:
                            shutil.copyfileobj(fh, out, 1 << 20)
                os.replace(self.cdir / f"all.{lang}.tmp", self.cdir / f"all.{lang}")
            self.log(f"align: {sum(sizes.values())} pairs (train+dev+test) with moses-reorder align")
            align = self.python("training.cli", "align", "--src", self.cdir / f"all.{SRC}",
                                "--tgt", self.cdir / f"all.{TGT}", "--out", self.cdir / "all.align")
            align, seeded = seeded_alignment(align, self.work / "align.entropy")
            with open(self.work / "align.log", "wb") as log:
                took = self.measure(align, cwd=REPO, stdout=log, stderr=log)
            self.mark("align", **took, seeded=seeded)
            self.log(f"align: {took['wall_seconds']:.0f} s wall, {took['cpu_seconds']:.0f} s CPU, "
                     f"peak {took['peak_mb']} MB")
        with open(self.cdir / "all.align", "rb") as fh:
            links = fh.read().splitlines(keepends=True)
        if len(links) != sum(sizes.values()):
            raise RuntimeError(f"all.align has {len(links)} lines for {sum(sizes.values())} pairs")
        n_train, n_dev = sizes["train"], sizes["dev"]
        parts = {"train": links[:n_train], "dev": links[n_train:n_train + n_dev], "test": links[n_train + n_dev:]}
        for subset, lines in parts.items():
            _atomic_write(self.cdir / f"{subset}.align", b"".join(lines))
        _atomic_write(self.cdir / "aligned.grow-diag-final-and", b"".join(parts["train"]))
        self.mark("corpus", **sizes, heldout=0, aligned="train+dev+test")
        self.log(f"corpus: {n_train} training pairs, dev {n_dev}, test {sizes['test']} (aligned together)")

    # ------------------------------------------------------------------- step 2: LM
    @property
    def lm(self) -> Path:
        return self.work / "lm" / f"train.{LM_ORDER}gram.{TGT}.binary"

    def build_lm(self) -> None:
        if self.done("lm"):
            return
        d = self.work / "lm"
        d.mkdir(parents=True, exist_ok=True)
        arpa = d / f"train.{LM_ORDER}gram.{TGT}.arpa"
        (d / "tmp").mkdir(exist_ok=True)
        with open(self.text("train", TGT), "rb") as fin, open(arpa, "wb") as fout, \
                open(d / "lmplz.log", "wb") as ferr:
            secs = self.run([self.bin / "lmplz", "-o", LM_ORDER, "-S", "20%", "-T", d / "tmp"],
                            stdin=fin, stdout=fout, stderr=ferr)
        with open(d / "build_binary.log", "wb") as ferr:
            self.run([self.bin / "build_binary", arpa, self.lm], stdout=ferr, stderr=ferr)
        arpa.unlink()
        self.mark("lm", seconds=round(secs, 1))
        self.log(f"lm: {LM_ORDER}-gram KenLM in {secs:.0f} s")

    # ------------------------------------------------------------------- step 3: tables
    def build_tm(self) -> None:
        if self.done("tm"):
            return
        root = self.work / "tm"
        if root.exists():
            shutil.rmtree(root)
        (root / "model").mkdir(parents=True)       # steps 1-3 would have made it
        cmd = ["perl", self.scripts / "training" / "train-model.perl", "-root-dir", root,
               "-corpus", self.cdir / "train", "-f", SRC, "-e", TGT,
               "-alignment", "grow-diag-final-and", "-alignment-file", self.cdir / "aligned",
               "-reordering", MOSES_TYPE, "-lm", f"0:{LM_ORDER}:{self.lm}:8", "-external-bin-dir", self.bin,
               "-cores", "2", "-sort-buffer-size", "2G", "-sort-parallel", "2"]
        # One step at a time, each measured: step 5 (extract) and 7 (lexical-reordering-score) are
        # what `moses-reorder extract` + `lexical` replace (ours_table times those in the same run).
        steps = {}
        with open(root / "train-model.log", "wb") as log:
            for step, what in TM_STEPS.items():
                steps[what] = self.measure(cmd + ["-first-step", str(step), "-last-step", str(step)],
                                           cwd=root, stdout=log, stderr=log)
                self.log(f"tm: step {step} ({what}) {steps[what]['wall_seconds']:.0f} s wall, "
                         f"{steps[what]['cpu_seconds']:.0f} s CPU, peak {steps[what]['peak_mb']} MB")
        secs = sum(t["wall_seconds"] for t in steps.values())
        self.mark("tm", seconds=round(secs, 1), steps=steps)
        self.log(f"tm: train-model.perl steps 4-9 in {secs:.0f} s")

    def ours_table(self) -> None:
        """Our extract (the example store every model trains from) and our lexical table, timed
        like Moses's steps 5 and 7 on the same corpus; the table is not used by any system."""
        self.build_store()
        if self.done("ours-lexical"):
            return
        out = self.work / "ours" / f"reordering-table.{MOSES_TYPE}.gz"
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(self.work / "ours" / "lexical.log", "wb") as log:
            took = self.measure(self.python("training.cli", "lexical", "--store", self.store, "--type", MOSES_TYPE,
                                            "--out", out, "--quiet"), cwd=REPO, stdout=log, stderr=log)
        self.mark("ours-lexical", **took)
        self.log(f"ours: lexical table {took['wall_seconds']:.0f} s wall, {took['cpu_seconds']:.0f} s CPU, "
                 f"peak {took['peak_mb']} MB")

    def tune_text(self, lang: str, method: str = "") -> Path:
        """What the tuner decodes: all of dev, or its first --dev-lines lines (dev's tables are
        filtered for all of it, so a prefix needs no tables of its own). A tuner in ALL_DEV
        decodes all of dev."""
        if not self.dev_lines or method in ALL_DEV:
            return self.text("dev", lang)
        path = self.cdir / f"dev{self.dev_lines}.{lang}"
        if not path.is_file():
            write_head(self.text("dev", lang), self.dev_lines, path)
        return path

    def filtered_ini(self, subset: str) -> Path:
        return self.work / "filtered" / subset / "moses.ini"

    def filter_tables(self, subset: str) -> None:
        # Two held-out decodes can start together: without the lock both filtered into
        # one directory, the second deleting what the first had written while it decoded from it.
        with self.filter_lock:
            self._filter_tables(subset)

    def _filter_tables(self, subset: str) -> None:
        if self.done(f"filter-{subset}"):
            return
        d = self.work / "filtered" / subset
        if d.exists():
            shutil.rmtree(d)
        d.parent.mkdir(parents=True, exist_ok=True)
        with open(self.work / "filtered" / f"{subset}.log", "wb") as log:
            secs = self.run(["perl", self.scripts / "training" / "filter-model-given-input.pl", d,
                             self.work / "tm" / "model" / "moses.ini", self.text(subset, SRC)],
                            stdout=log, stderr=log)
        self.mark(f"filter-{subset}", seconds=round(secs, 1))
        self.log(f"filter: tables for {subset} in {secs:.0f} s")

    def sparse_lists(self) -> tuple[Path, Path]:
        d = self.work / "sparse"
        out = d / f"top{SPARSE_TOP_WORDS}.{SRC}", d / f"top{SPARSE_TOP_WORDS}.{TGT}"
        if not self.done("sparse-lists"):
            from collections import Counter
            d.mkdir(parents=True, exist_ok=True)
            for lang, path in zip((SRC, TGT), out):
                counts = Counter(w for line in open(self.text("train", lang), encoding="utf-8") for w in line.split())
                path.write_text("".join(w + "\n" for w, _ in counts.most_common(SPARSE_TOP_WORDS)), encoding="utf-8")
            self.mark("sparse-lists")
        return out

    # ------------------------------------------------------------------- step 4: models
    @property
    def store(self) -> Path:
        return self.work / "store"

    def python(self, *args) -> list:
        return [sys.executable, "-m", *args]

    def build_store(self) -> None:
        with self.store_lock:
            self._build_store()

    def _build_store(self) -> None:
        if self.done("store"):
            return
        if self.store.exists():
            shutil.rmtree(self.store)
        with open(self.work / "extract.log", "wb") as log:
            took = self.measure(self.python("training.cli", "extract", "--src", self.text("train", SRC),
                                            "--tgt", self.text("train", TGT), "--align", self.cdir / "train.align",
                                            "--out", self.store, "--model", "hier-msd", "--quiet"),
                                cwd=REPO, stdout=log, stderr=log)
        self.mark("store", seconds=took["wall_seconds"], **took)
        self.log(f"store: extracted the training slice in {took['wall_seconds']:.0f} s "
                 f"({took['cpu_seconds']:.0f} s CPU, peak {took['peak_mb']} MB)")

    def build_features(self, spec: str) -> None:
        """The store's feature matrix for SPEC, measured on its own (training then reads the
        cache): what the features stage costs at the corpus's scale, apart from the solver's."""
        with self.store_lock:
            step = f"features-{spec.replace(',', '+')}"
            if self.done(step):
                return
            with open(self.work / f"{step}.log", "wb") as log:
                took = self.measure(self.python("training.cli", "features", "--store", self.store, "--features", spec,
                                                "--quiet"), cwd=REPO, stdout=log, stderr=log)
            self.mark(step, **took)
            self.log(f"features {spec}: {took['wall_seconds']:.0f} s wall, {took['cpu_seconds']:.0f} s CPU, "
                     f"peak {took['peak_mb']} MB")

    def model_path(self, name: str) -> Path:
        return self.work / "models" / name / "1" / "model.mrw"

    def train_model(self, system: System) -> None:
        name = model_name(system)
        if self.model_path(name).is_file():
            return
        with self.lock:
            train_lock = self.train_locks.setdefault(name, threading.Lock())
        with train_lock:
            if self.model_path(name).is_file():
                return
            self.build_store()
            base = SYSTEMS[name]
            if base.family not in ("lexical", "hybrid"):  # the hybrid's matrix keeps every pair: train builds it
                self.build_features(base.features)
            tmp = self.work / "modelfiles" / f"{name}.mrw"
            tmp.parent.mkdir(parents=True, exist_ok=True)
            cmd = self.python("training.cli", "train", "--family", base.family, "--features", base.features,
                              "--type", MOSES_TYPE, "--store", self.store, "--out", tmp,
                              "--heldout-fraction", "0", "--quiet")
            for p in base.params:
                cmd += ["--param", p]
            self.log(f"model {name}: training")
            with open(self.work / "modelfiles" / f"{name}.log", "wb") as log:
                took = self.measure(cmd, cwd=REPO, stdout=log, stderr=log)
            target = self.model_path(name)
            staging = target.parent.parent / ".staging-1"
            staging.mkdir(parents=True, exist_ok=True)
            os.replace(tmp, staging / "model.mrw")
            os.replace(staging, target.parent)
            self.mark(f"model-{name}", seconds=took["wall_seconds"], **took,
                      command=" ".join(str(c) for c in cmd[2:]))
            self.log(f"model {name}: trained in {took['wall_seconds']:.0f} s ({took['cpu_seconds']:.0f} s CPU, "
                     f"peak {took['peak_mb']} MB)")

    # ------------------------------------------------------------------- server
    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start_server(self) -> None:
        with self.server_lock:
            if self.server is None:
                self._start_server()

    def _start_server(self) -> None:
        from server.local import LocalServer

        (self.work / "models").mkdir(parents=True, exist_ok=True)
        self.server = LocalServer(self.work / "models", port=self.port, log=self.work / "server.log",
                                  log_level="warning", poll_seconds=5).start(service=None)
        self.log(f"server: pid {self.server.proc.pid} on {self.address}")

    def stop_server(self) -> None:
        if self.server is not None:
            self.server.stop(timeout=30)
        self.server = None

    def wait_served(self, name: str, timeout: float = 300) -> None:
        if self.server is None:
            raise RuntimeError(f"the scoring server is not running (see {self.work / 'server.log'})")
        self.server.wait_serving(name, timeout)

    # ------------------------------------------------------------------- ini files
    @property
    def beside_as_one(self) -> bool:
        """Whether a system beside the table is one feature (Moses2's ExternalReordering with
        path=: the table's block of scores, then the model's). The same scores as the table's
        LexicalReordering beside an ExternalReordering, with one reordering state instead of
        two: the second cost 1.36-1.52x decode time on Kyoto (issue 29). Moses's (v1) feature
        has no path=."""
        return self.decoder == "moses2"

    def reordering_line(self, system: System, table_line: str, name: str = "LexicalReordering0",
                        table: str | None = None) -> str | None:
        """The reordering [feature] line of a system, from the filtered ini's table line;
        with TABLE, the table's scores in the same feature, before the model's."""
        from benchmarks.moses_system import external_line

        if system.kind == "none":
            return None
        if system.kind == "lexical":
            line = table_line
        else:
            line = external_line(MOSES_TYPE, self.address, model_name(system), name=name, n=12 if table else None,
                                 extra="version=1" + (f" path={table}" if table else ""))
        if system.sparse:
            src, tgt = self.sparse_lists()
            line += (f" sparse-words-source-top{SPARSE_TOP_WORDS}={src}"
                     f" sparse-words-target-top{SPARSE_TOP_WORDS}={tgt}"
                     " sparse-phrase=1 sparse-stack=1 sparse-between=1")
        return line

    def system_ini(self, system: System, subset: str, weights_from: Path | None = None) -> Path:
        """WORK/ini/<system>.<subset>.ini: the filtered system with its reordering line
        (and, for a decode, the [weight] and [weight-file] sections of a tuned ini)."""
        sections = read_ini(self.filtered_ini(subset))
        features = sections["feature"]
        idx = next(i for i, l in enumerate(features) if l.startswith("LexicalReordering "))
        new = self.reordering_line(system, features[idx])
        if new is None:
            del features[idx]
            sections["weight"] = [l for l in sections["weight"] if not l.startswith("LexicalReordering0=")]
        elif system.with_lexical and self.beside_as_one:
            table = feature_value(features[idx], "path")
            features[idx] = self.reordering_line(system, features[idx], name="ExternalReordering0", table=table)
            sections["weight"] = beside_as_one_weights(sections["weight"], table_twice=True)
        elif system.with_lexical:
            features.insert(idx + 1, self.reordering_line(system, features[idx], name="ExternalReordering0"))
            table_weights = next(l for l in sections["weight"] if l.startswith("LexicalReordering0="))
            sections["weight"].append(table_weights.replace("LexicalReordering0=", "ExternalReordering0=", 1))
        else:
            features[idx] = new
        if system.distortion_limit:
            sections["distortion-limit"] = [str(system.distortion_limit)]
        if weights_from is not None:
            tuned = read_ini(weights_from)
            sections["weight"] = tuned["weight"]
            if system.with_lexical and self.beside_as_one:  # tuned as two features, decoded as one
                sections["weight"] = beside_as_one_weights(tuned["weight"])
            if "weight-file" in tuned:
                sections["weight-file"] = [str((weights_from.parent / l).resolve()) if l.strip() else l
                                           for l in tuned["weight-file"]]
            out = weights_from.parent / f"{subset}.ini"
        else:
            out = self.work / "ini" / f"{system.name}.{subset}.ini"
        out.parent.mkdir(parents=True, exist_ok=True)
        write_ini(out, sections)
        return out

    def mertdir(self) -> Path:
        """Moses's tuning tools plus megam_i686.opt = the project's optimizer (no download)."""
        d = self.work / "mertdir"
        d.mkdir(parents=True, exist_ok=True)
        for tool in ("extractor", "mert", "pro", "kbmira", "evaluator"):
            link = d / tool
            if not link.exists():
                link.symlink_to(self.bin / tool)
        # Refreshed on every call, and always this checkout's optimizer: a wrapper written by an
        # earlier checkout (since removed) made every PRO run fail at its first optimisation, and
        # the installed console script, which imports whichever checkout pip installed last,
        # stopped a Kyoto PRO run when that checkout was cloned again (2026-12-02).
        megam = d / "megam_i686.opt"
        fresh = d / f".megam_i686.opt.{os.getpid()}.{threading.get_ident()}"
        fresh.unlink(missing_ok=True)
        fresh.write_text(f"#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} -m training.moses.megam \"$@\"\n")
        fresh.chmod(0o755)
        os.replace(fresh, megam)
        return d

    # ------------------------------------------------------------------- jobs
    def run_dir(self, job: Job) -> Path:
        return self.work / "runs" / job.system / f"{job.method}{job.run}"

    def restore_recorded(self, jobs: list[Job]) -> None:
        """Bring the record's finished runs into WORK/runs (a new work directory tunes only what is not there).

        Finished runs are filled too: a file recorded after this work directory last saw the
        run (a retime's timing.json, made on another machine or in another work directory)
        would otherwise never reach the table made here."""
        if self.record is None:
            return
        restored = [j.key for j in jobs if self.record.restore(self.run_dir(j), f"{j.system}/{j.method}{j.run}")]
        if restored:
            self.log(f"record: restored files of {len(restored)} runs from {self.record.dir}")

    def save_record(self, job: Job) -> None:
        if self.record is not None:
            self.record.save(self.run_dir(job), f"{job.system}/{job.method}{job.run}")

    def tuned(self, job: Job) -> bool:
        return (self.run_dir(job) / "tuned.ini").is_file() and not self.capped_below(job)

    def capped_below(self, job: Job) -> int:
        """The iteration cap a finished tuning run stopped at, when this invocation allows more
        (--max-iterations raised): the run is then continued where it stopped; else 0."""
        path = self.run_dir(job) / "tune.json"
        if job.kind != "tune" or not self.max_iterations or not path.is_file():
            return 0
        info = json.loads(path.read_text())
        cap = info.get("max_iterations") or 0
        return cap if cap and info["iterations"] >= cap and self.max_iterations > cap else 0

    def finished(self, job: Job) -> bool:
        d = self.run_dir(job)
        if job.kind == "tune":
            return (d / "test.json").is_file() and not self.capped_below(job)
        return (d / "heldout.json").is_file()

    def ready(self, job: Job) -> bool:
        return job.kind == "tune" or self.finished(Job("tune", job.system, job.method, job.run))

    def prepare_system(self, system: System) -> None:
        if system.kind == "external":
            self.train_model(system)
            self.start_server()
            self.wait_served(model_name(system))

    def execute(self, job: Job) -> None:
        system = SYSTEMS[job.system]
        self.prepare_system(system)
        d = self.run_dir(job)
        d.mkdir(parents=True, exist_ok=True)
        if job.kind == "tune":
            cap = self.capped_below(job)
            if cap:  # its weights and test decode are kept aside, then tuning goes on
                aside = d / f"capped{cap}"
                aside.mkdir(exist_ok=True)
                for f in [d / "tuned.ini", d / "tune.json", *d.glob("test.*")]:
                    os.replace(f, aside / f.name)
            if not self.tuned(job):
                self.tune(job, system, d)
            self.decode(job, system, d, "test")
        else:
            self.filter_tables("heldout")
            self.decode(job, system, d, "heldout")
        self.save_record(job)

    def tune(self, job: Job, system: System, d: Path) -> None:
        mert = d / "mert"
        cont = (mert / "finished_step.txt").is_file()
        if mert.exists() and not cont:
            shutil.rmtree(mert)
        if cont:
            resume_at_last_step(mert)
        dev_ini = self.system_ini(system, "dev")
        src, ref = self.tune_text(SRC, job.method), self.tune_text(TGT, job.method)
        cmd = ["perl", self.scripts / "training" / "mert-moses.pl", src, ref,
               self.bin / self.decoder, dev_ini, "--mertdir", self.mertdir(), "--working-dir", mert,
               "--no-filter-phrase-table", "--nbest", str(NBEST), "--decoder-flags", f"-threads {self.tune_threads}",
               *METHODS[job.method]]
        if self.max_iterations:
            cmd += ["--maximum-iterations", str(self.max_iterations)]
        if cont:
            cmd.append("--continue")
        self.log(f"{job.key}: tuning{' (continued)' if cont else ''}")
        (d / "tune.cmd").write_text(" ".join(str(c) for c in cmd) + "\n")
        with open(d / "tune.log", "ab") as log:
            secs = self.run(cmd, cwd=d, stdout=log, stderr=log)
        iterations = len(list(mert.glob("run*.moses.ini")))
        shutil.copyfile(mert / "moses.ini", d / "tuned.ini")
        info = {"seconds": round(secs, 1), "iterations": iterations, "continued": cont,
                "tune_sentences": count_lines(src), "decoder": self.decoder,
                "threads": self.tune_threads, "max_iterations": self.max_iterations or None,
                "system": self.system_id,
                **dev_bleu(mert, ref)}
        (d / "tune.json").write_text(json.dumps(info) + "\n")
        self.log(f"{job.key}: tuned in {secs / 60:.1f} min, {iterations} iterations")

    def translate(self, ini: Path, subset: str, out: Path, log: Path) -> float:
        """Decode a subset's source side with one ini, one thread, by the decoder that tuned
        (--decoder: weights tuned with one decoder are tested with it); returns wall seconds."""
        with open(self.text(subset, SRC), "rb") as fin, open(out, "wb") as fout, open(log, "wb") as ferr:
            return self.run([self.bin / self.decoder, "-f", ini, "-threads", "1"], stdin=fin, stdout=fout,
                            stderr=ferr)

    def decode(self, job: Job, system: System, d: Path, subset: str) -> None:
        if (d / f"{subset}.json").is_file():
            return
        ini = self.system_ini(system, subset, weights_from=d / "tuned.ini")
        secs = self.translate(ini, subset, d / f"{subset}.out", d / f"{subset}.log")
        n = sum(1 for _ in open(d / f"{subset}.out", encoding="utf-8"))
        took, timed = decode_seconds(d / f"{subset}.log", secs, n)
        info = {"wall_seconds": round(secs, 2), "sentences": n, "decode_seconds": round(took, 3),
                "timed_sentences": timed, "decoder": self.decoder, "system": self.system_id}
        (d / f"{subset}.json").write_text(json.dumps(info) + "\n")
        self.log(f"{job.key}: {subset} decoded in {secs:.0f} s ({n} sentences)")


    def retime(self, job: Job) -> float:
        """Decode the test set again with the run's tuned weights, nothing else of the study
        running, and append the seconds per sentence to WORK/runs/.../timing.json: the
        decode times the study logs come from decodes that ran beside tuning jobs."""
        system, d = SYSTEMS[job.system], self.run_dir(job)
        self.prepare_system(system)
        ini = self.system_ini(system, "test", weights_from=d / "tuned.ini")
        wall = self.translate(ini, "test", d / "timing.out", d / "timing.log")
        took, timed = decode_seconds(d / "timing.log", wall, count_lines(d / "timing.out"))
        rpc = [float(x) for x in re.findall(rb"in one RPC, took ([0-9.]+) seconds", (d / "timing.log").read_bytes())]
        same = (d / "timing.out").read_bytes() == (d / "test.out").read_bytes()
        path = d / "timing.json"
        timings = json.loads(path.read_text()) if path.is_file() else []
        timings.append({"sec_per_sent": took / max(1, timed), "wall_seconds": round(wall, 2),
                        "rpc_sec_per_sent": sum(rpc) / max(1, timed),     # ExternalReordering's wait
                        "load": round(os.getloadavg()[0], 2), "same_output": same,
                        "at": time.strftime("%Y-%m-%d %H:%M:%S")})
        path.write_text(json.dumps(timings, indent=1) + "\n")
        self.save_record(job)
        self.log(f"{job.key}: re-timed test decode {timings[-1]['sec_per_sent']:.4f} s/sent "
                 f"({timings[-1]['rpc_sec_per_sent']:.4f} in Score RPCs) "
                 f"(load {timings[-1]['load']}, same output: {same})")
        return timings[-1]["sec_per_sent"]


def build_system(study: Study) -> None:
    """Every step before tuning, in the order a lost machine costs least (each resumes)."""
    study.prepare_corpus()
    study.build_lm()
    study.build_tm()
    for subset in ("dev", "test"):
        study.filter_tables(subset)
    study.ours_table()


def extra_test(study: Study, jobs: list[Job], directory: Path) -> str:
    """Issue 29 step 6: decode another test set (DIRECTORY/test.{ja,en}) with every finished
    tuning run's weights and give it the study's table, bootstrap included, so anyone can check
    the figures on other text. Tables are filtered for it as for test; decodes are kept in each
    run's directory (not in the record), so a second call only decodes runs finished since."""
    subset = f"extra-{directory.resolve().name}"
    given = {lang: directory / f"test.{lang}" for lang in (SRC, TGT)}
    for path in given.values():
        if not path.is_file():
            raise RuntimeError(f"{path}: no such file (--extra-test DIR needs DIR/test.{SRC} and DIR/test.{TGT})")
    sizes = {lang: count_lines(path) for lang, path in given.items()}
    if sizes[SRC] != sizes[TGT]:  # checked before anything is copied into the work directory
        raise RuntimeError(f"{directory}: test.{SRC} has {sizes[SRC]} lines, test.{TGT} {sizes[TGT]}")
    for lang, path in given.items():
        if not study.text(subset, lang).is_file():
            copy_text(path, study.text(subset, lang))
    study.filter_tables(subset)
    for job in jobs:
        if job.kind == "tune" and study.finished(job):
            system = SYSTEMS[job.system]
            study.prepare_system(system)
            study.decode(job, system, study.run_dir(job), subset)
    n = count_lines(study.text(subset, TGT))
    return table(study, [], [(subset, f"{directory} ({n} sentences)")])


def decode_probe(study: Study, n: int, limits: list[int], decoders: list[tuple[str, int]]) -> str:
    """What one decode of dev costs before anything is tuned (issue 29 step 3): the first N dev
    sentences with Lexical and the ini's untuned weights, per distortion limit and decoder
    (binary, threads). Decides the decoder and whether all of dev can be tuned on; tuned
    weights decode at a similar speed (the beam, not the weights, sets the cost)."""
    from benchmarks.moses_system import decode

    d = study.work / "probe"
    d.mkdir(parents=True, exist_ok=True)
    head = d / f"dev-head{n}.{SRC}"
    write_head(study.text("dev", SRC), n, head)
    n_dev = count_lines(study.text("dev", SRC))
    rows = ["| decoder | threads | distortion limit | s/sent (decode wall, loading excluded) | load | "
            f"one dev decode ({n_dev} sentences), min |", "|---|---|---|---|---|---|"]
    path = d / "probe.json"
    results = json.loads(path.read_text()) if path.is_file() else {}
    for dl in limits:
        sections = read_ini(study.system_ini(SYSTEMS["lexical"], "dev"))
        sections["distortion-limit"] = [str(dl)]
        ini = d / f"lexical.dl{dl}.ini"
        write_ini(ini, sections)
        for decoder, threads in decoders:
            key = f"{decoder}-t{threads}-dl{dl}-n{n}"
            if key not in results:
                run = decode(study.bin / decoder, ini, head, threads=threads, timeout=6 * 3600)
                if run.returncode != 0:
                    raise RuntimeError(f"{decoder} failed on {ini}: {run.stderr[-2000:]}")
                results[key] = {"decode_wall": round(run.decode_wall, 2), "cpu_seconds": round(run.cpu_seconds, 1),
                                "sentences": len(run.lines), "load": round(os.getloadavg()[0], 2),
                                "at": time.strftime("%Y-%m-%d %H:%M:%S")}
                _atomic_write(path, (json.dumps(results, indent=1) + "\n").encode())
                study.log(f"probe {key}: {run.decode_wall:.0f} s decoding")
            r = results[key]
            per = r["decode_wall"] / n
            rows.append(f"| {decoder} | {threads} | {dl} | {per:.3f} | {r['load']} | {per * n_dev / 60:.1f} |")
    return "\n".join(rows) + "\n"


def classify(study: Study, models: list[str]) -> str:
    """Issue 29 step 2: each model against Moses's table on every phrase pair of the test
    articles (gold orientations from the joint alignment), by benchmarks/disagreement.py;
    `seen` = the pairs the decoder can score (in the table, so in the test-filtered phrase table).
    One report per model in WORK/classify (kept: a lost machine redoes only the missing ones);
    returns the summary table."""
    study.train_model(SYSTEMS[LEXICAL_SERVED])
    out = study.work / "classify"
    out.mkdir(parents=True, exist_ok=True)
    phrase_table = next((study.work / "filtered" / "test").glob("phrase-table*"))
    for name in models:
        report = out / f"{name}.json"
        if report.is_file():
            continue
        study.train_model(SYSTEMS[name])
        tmp = out / f".{name}.json"
        with open(out / f"{name}.md", "wb") as md, open(out / f"{name}.log", "wb") as log:
            took = study.measure([sys.executable, REPO / "benchmarks" / "disagreement.py",
                                  "--pairs", study.cdir / "test", "--model", study.model_path(name),
                                  "--table-model", study.model_path(LEXICAL_SERVED), "--phrase-table", phrase_table,
                                  "--train-store", study.store, "--json", tmp], cwd=REPO, stdout=md, stderr=log)
        os.replace(tmp, report)
        study.log(f"classify {name}: {took['wall_seconds']:.0f} s")
    return classify_summary(study, models)


def classify_summary(study: Study, models: list[str]) -> str:
    """Accuracy and log-loss of the table and each model, per direction, on all test pairs and
    on the pairs the decoder can score; with each model's size and training cost. The class
    prior's log-loss is where both start: the model's gain below the table, as a share of the
    table's own gain below the prior, says how much of what the table adds in BLEU a model can
    hope to add again (issue 29: a quarter on Kyoto's decodable pairs)."""
    from benchmarks.disagreement import prior_log_loss
    from training.modelfile.model import load_model

    lines = ["| model | features kept | train wall s | train CPU s | peak MB | direction | pairs | n | "
             "accuracy table | accuracy model | log-loss class prior | log-loss table | log-loss model | "
             "model's gain / table's gain |", "|---" * 14 + "|"]
    for name in models:
        path = study.work / "classify" / f"{name}.json"
        if not path.is_file():
            continue
        report = json.loads(path.read_text())
        took = study.marked(f"model-{name}")
        size = f"{load_model(study.model_path(name), warm_up=False).n_features:,}"
        for d, slices in report["directions"].items():
            for slice_name, label in (("all", "all"), ("seen", "decodable (seen)")):
                r = slices[slice_name]["all"]
                prior = prior_log_loss(slices[slice_name])
                gain = (r["table_log_loss"] - r["model_log_loss"]) / (prior - r["table_log_loss"])
                lines.append(f"| {SYSTEMS[name].label.removeprefix('External ')} | {size} | "
                             f"{took.get('wall_seconds', '')} | {took.get('cpu_seconds', '')} | "
                             f"{took.get('peak_mb', '')} | {d} | {label} | {r['n']:,} | "
                             f"{100 * r['table_recall']:.1f} | {100 * r['model_recall']:.1f} | "
                             f"{prior:.3f} | {r['table_log_loss']:.3f} | {r['model_log_loss']:.3f} | {gain:.2f} |")
    return "\n".join(lines) + "\n"


def system_summary(study: Study) -> str:
    """What each finished step of the system cost (the marks' measurements), as Markdown."""
    rows = ["| step | wall s | CPU s | peak MB |", "|---|---|---|---|"]
    def row(label: str, took: dict) -> None:
        if "cpu_seconds" in took:
            rows.append(f"| {label} | {took['wall_seconds']:.0f} | {took['cpu_seconds']:.0f} | {took['peak_mb']} |")
    row("moses-reorder align (train+dev+test)", study.marked("align"))
    for what, took in study.marked("tm").get("steps", {}).items():
        row(f"train-model.perl: {what}", took)
    row("moses-reorder extract (hier-msd store)", study.marked("store"))
    row("moses-reorder lexical", study.marked("ours-lexical"))
    for step in study.marked_steps("features-"):
        row(f"moses-reorder features {step.removeprefix('features-').replace('+', ',')}", study.marked(step))
    for step in study.marked_steps("model-"):
        row(f"moses-reorder train {step.removeprefix('model-')}", study.marked(step))
    corpus = study.marked("corpus")
    head = f"corpus: {corpus.get('train')} training pairs, dev {corpus.get('dev')}, test {corpus.get('test')}"
    if study.done("store"):
        from training.store.examples import ExampleStore

        store = ExampleStore.open(study.store)
        head += f"; example store: {store.n_examples:,} examples of {store.n_sentences:,} sentences"
    head += "\n\n"
    return head + "\n".join(rows) + "\n"


def retime_pairs(study: Study, jobs: list[Job], systems: list[str]) -> list[tuple[Job, Job]]:
    """(baseline run, run) for each finished tuning run of the named systems whose baseline
    has a finished run with the same tuner and number."""
    pairs = []
    for j in jobs:
        if j.kind == "tune" and j.system in systems and study.finished(j):
            base = Job("tune", SYSTEMS[j.system].baseline, j.method, j.run)
            if study.finished(base):
                pairs.append((base, j))
    return pairs


def retime_decodes(study: Study, jobs: list[Job], rounds: int, systems: list[str]) -> None:
    """Each pair of retime_pairs decoded alternating, one decode at a time: same-machine
    ratios (the study's own decodes ran beside other jobs)."""
    pairs = retime_pairs(study, jobs, systems)
    if not pairs:
        study.log(f"retime: no finished run of {', '.join(systems)} with a finished baseline run")
    for _ in range(rounds):
        for pair in pairs:
            for j in pair:
                study.retime(j)


def gold_jumps(study: Study) -> tuple[np.ndarray, str]:
    """Per sentence, the longest jump its gold alignment needs (Moses's distortion at the word
    level): of the test articles, aligned with the training text (align_corpus), or else of
    the held-out pairs (a corpus shipped with train.align has no test alignment)."""
    if (study.cdir / "test.align").is_file():
        gold, where = lines_of(study.cdir / "test.align"), "test"
    else:
        gold, where = lines_of(study.corpus / "train.align")[-study.heldout:], "held-out"
    return longest_jumps(*parse_links("".join(line + "\n" for line in gold).encode("utf-8"), where)), where


#: Buckets of issue 29's step 5: source length in tokens, and the longest jump the reference needs.
LENGTH_BUCKETS = ((1, 15), (16, 25), (26, 40), (41, 10 ** 9))
JUMP_BUCKETS = ((0, 6), (7, 12), (13, 20), (21, 10 ** 9))


def breakdown(study: Study, runs: list[str]) -> str:
    """Issue 29 step 5: the test BLEU of finished runs (SYSTEM:METHODk) on the sentences of each
    source-length bucket and of each bucket of the longest jump the gold alignment needs, with
    the difference of each run against the first: where in the test set a model wins or loses.
    SYSTEM:pro1+pro2+pro3 pools runs as the table's bootstrap does (their outputs one after
    another, each against the references), so buckets compare 3-run systems, not single tunings."""
    from sacrebleu.metrics import BLEU

    refs = lines_of(study.text("test", TGT))
    lengths = np.array([len(line.split()) for line in lines_of(study.text("test", SRC))])
    by = [("source tokens", lengths, LENGTH_BUCKETS)]
    if (study.cdir / "test.align").is_file():  # test articles aligned here (a corpus without train.align)
        by.append(("longest gold jump", gold_jumps(study)[0], JUMP_BUCKETS))
    bleu = BLEU(tokenize="none", force=True)
    hyps: dict[str, list[list[str]]] = {}
    for spec in runs:
        name, pooled = spec.split(":")
        hyps[spec] = [lines_of(study.work / "runs" / name / run / "test.out") for run in pooled.split("+")]
    first = runs[0]
    head = " | ".join(f"{SYSTEMS[r.split(':')[0]].label} {r.split(':')[1]}" for r in runs)
    out = [f"| bucket | sentences | {head} | " + " | ".join(f"Δ {r.split(':')[0]}" for r in runs[1:]) + " |",
           "|---|---:|" + "---:|" * (2 * len(runs) - 1)]
    for what, values, buckets in by:
        for lo, hi in buckets:
            pick = np.flatnonzero((values >= lo) & (values <= hi))
            if not len(pick):
                continue
            score = {r: bleu.corpus_score([h[i] for h in hyps[r] for i in pick],
                                          [[refs[i] for _ in hyps[r] for i in pick]]).score for r in runs}
            label = f"{what} {lo}-{hi}" if hi < 10 ** 9 else f"{what} {lo}+"
            out.append(f"| {label} | {len(pick)} | " + " | ".join(f"{score[r]:.2f}" for r in runs) + " | "
                       + " | ".join(f"{score[r] - score[first]:+.2f}" for r in runs[1:]) + " |")
    return "\n".join(out) + "\n"


def dev_pool(study: Study, spec: str, run: str) -> Path:
    """WORK/runs/<system>/<run>/devpool: the tuning set's 100-best lists decoded with the run's
    tuned weights, and the features and BLEU statistics Moses's extractor takes from them, in
    mert-moses.pl's file names (run1.features.dat, run1.scores.dat), so that
    benchmarks/tuner_pool.py reads it as a one-iteration pool. Unlike a run's own mert/ folder
    it exists for restored runs too (the record keeps weights, not pools), and every system's
    pool is made the same way: the translations its tuned model weighs against each other.
    SYSTEM@TUNED decodes with SYSTEM's model under TUNED's weights (as --cross-decode does),
    into WORK/cross/SYSTEM@TUNED/<run>/devpool: the pool of a model no run has tuned yet."""
    system_name, _, tuned_for = spec.partition("@")
    tuned_for = tuned_for or system_name
    system, d = SYSTEMS[system_name], study.work / "runs" / tuned_for / run
    pool = d / "devpool" if tuned_for == system_name else \
        study.work / "cross" / f"{system_name}@{tuned_for}" / run / "devpool"
    if (pool / "run1.scores.dat").is_file():
        return pool
    if not (d / "tuned.ini").is_file():
        raise SystemExit(f"--dev-pools {spec}:{run}: not tuned yet ({d / 'tuned.ini'} is missing)")
    study.prepare_system(system)
    tmp = pool.parent / ".devpool"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    ini = study.system_ini(system, "dev", weights_from=d / "tuned.ini")
    if tuned_for != system_name:
        drop_foreign_weights(ini)
    shutil.copyfile(ini, tmp / "dev.ini")
    nbest = tmp / f"run1.best{NBEST}.out"
    with open(study.tune_text(SRC), "rb") as fin, open(tmp / "run1.out", "wb") as fout, \
            open(tmp / "decode.log", "wb") as ferr:
        wall = study.run([study.bin / study.decoder, "-f", tmp / "dev.ini", "-threads", "1",
                          "-n-best-list", nbest, str(NBEST), "distinct"], stdin=fin, stdout=fout, stderr=ferr)
    with open(tmp / "extract.log", "wb") as log:   # mert-moses.pl's scorer settings (its log, iteration 1)
        study.run([study.mertdir() / "extractor", "--sctype", "BLEU", "--scconfig", "case:true",
                   "--scfile", tmp / "run1.scores.dat", "--ffile", tmp / "run1.features.dat",
                   "-r", study.tune_text(TGT), "-n", nbest], stdout=log, stderr=log)
    nbest.unlink()                                  # 3 MB a pool; the .dat files hold what is scored
    os.replace(tmp, pool)
    study.log(f"dev pool {spec}:{run}: decoded in {wall:.0f} s")
    return pool


def drop_foreign_weights(ini: Path) -> None:
    """Keep, of another system's tuned weights, those of features this ini's system has."""
    sections = read_ini(ini)
    sections["weight"] = [w for w in sections["weight"]
                          if w.split("=", 1)[0].strip() in feature_names(sections["feature"])]
    write_ini(ini, sections)


def dev_pool_ranks(study: Study, runs: list[str], feature: str = "LexicalReordering0") -> str:
    """Issue 48's decoder-side measure: on each run's dev pool (dev_pool), how often the
    reordering feature's weighted share of the model score orders two hypotheses of a sentence
    as their sentence BLEU does (tuner_pool.rank_agreement: 5,000 sampled pairs a sentence, at
    least 0.05 BLEU apart), next to the whole model's. Gold-event accuracy cannot see this: it
    scores the reference's phrase pairs and neighbours, not the wrong ones the decoder weighs.
    SYSTEM:pro1+pro2+pro3 pools the runs' counts; SYSTEM@TUNED:RUNS is SYSTEM's model under
    TUNED's weights (dev_pool)."""
    if str(REPO / "benchmarks") not in sys.path:   # imported by the tests as a file, not run
        sys.path.insert(0, str(REPO / "benchmarks"))
    import tuner_pool   # imports this module's read_ini: loaded here, not at the top, to avoid the cycle

    out = [f"| system | runs | hypothesis pairs | whole model orders them as BLEU | {feature} alone | "
           f"{feature} ties | tuned weights' BLEU on their pool |", "|---|---|---:|---:|---:|---:|---:|"]
    for spec in runs:
        pair, pooled = spec.split(":")
        for n in pair.split("@"):
            if n not in SYSTEMS:
                raise SystemExit(f"--dev-pools {spec}: no system named {n}")
        name, _, tuned_for = pair.partition("@")
        counts = np.zeros((2, 3))       # (whole, feature) x (agree, tie, total)
        bleus = []
        for run in pooled.split("+"):
            pool = dev_pool(study, pair, run)
            names, feats, stats = tuner_pool.read_pool(pool)
            weights = tuner_pool.dense_weights(pool / "dev.ini", names)   # the weights it decoded with
            bleus.append(tuner_pool.pool_bleu(weights, feats, stats)[0])
            distinct = tuner_pool.distinct_pool(feats, stats)
            mask = tuner_pool.feature_mask(names, feature)
            for row, w in enumerate((weights, np.where(mask, weights, 0.0))):
                agree, tie, total = tuner_pool.rank_agreement(w, *distinct)
                counts[row] += (agree * total, tie * total, total)
        (wa, _, wt), (fa, ft, ftot) = counts
        label = SYSTEMS[name].label + (f" under {SYSTEMS[tuned_for].label}'s weights" if tuned_for else "")
        out.append(f"| {label} | {pooled} | {int(ftot):,} | {100 * wa / wt:.1f}% | "
                   f"{100 * fa / ftot:.1f}% | {100 * ft / ftot:.1f}% | {fmt_runs(bleus)} |")
    return "\n".join(out) + "\n"


def cross_decode(study: Study, specs: list[str]) -> str:
    """Decode the test set with one system's reordering model and another's tuned weights
    (SYSTEM@TUNED:pro1+pro2+pro3): with svm S6's weights, svm S6,neighbour differs from svm S6
    only in the context blocks, so their difference is what the context does in the decoder
    before any tuning, at the cost of one test decode a run instead of a tuning run (hours of a
    core on ja-en). Each row is compared with TUNED's own test outputs of the same runs (paired
    bootstrap on the pooled outputs), and the decode time with theirs, decoded in this call."""
    from sacrebleu.metrics import BLEU, CHRF

    refs = lines_of(study.text("test", TGT))
    bleu, chrf = BLEU(tokenize="none", force=True), CHRF()
    out = ["| reordering model | weights tuned for | runs | BLEU | chrF | Δ BLEU | p BLEU | Δ chrF | p chrF | "
           "s/sent (theirs, this call) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for spec in specs:
        pair, pooled = spec.split(":")
        name, tuned_for = pair.split("@")
        for n in (name, tuned_for):
            if n not in SYSTEMS:
                raise SystemExit(f"--cross-decode {spec}: no system named {n}")
        system = SYSTEMS[name]
        mine, theirs, secs = [], [], {"mine": [], "theirs": []}
        for run in pooled.split("+"):
            src = study.work / "runs" / tuned_for / run
            if not (src / "test.out").is_file():
                raise SystemExit(f"--cross-decode {spec}: {tuned_for} {run} has no test decode yet")
            theirs.append(lines_of(src / "test.out"))
            for who, sys_, d in (("mine", system, study.work / "cross" / f"{name}@{tuned_for}" / run),
                                 ("theirs", SYSTEMS[tuned_for], study.work / "cross" / f"{tuned_for}@{tuned_for}" / run)):
                if not (d / "test.json").is_file():
                    study.prepare_system(sys_)
                    d.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(src / "tuned.ini", d / "tuned.ini")
                    ini = study.system_ini(sys_, "test", weights_from=d / "tuned.ini")
                    drop_foreign_weights(ini)
                    wall = study.translate(ini, "test", d / ".test.out", d / "test.log")
                    took, timed = decode_seconds(d / "test.log", wall, count_lines(d / ".test.out"))
                    info = {"sec_per_sent": took / max(1, timed)}
                    if who == "theirs":   # the system its weights were tuned for: its recorded output again?
                        info["same_as_recorded"] = same = \
                            (d / ".test.out").read_bytes() == (src / "test.out").read_bytes()
                    os.replace(d / ".test.out", d / "test.out")
                    (d / "test.json").write_text(json.dumps(info) + "\n")
                    study.log(f"cross {d.parent.name} {run}: {took / max(1, timed):.3f} s/sent"
                              + (f", same output as the recorded decode: {same}" if who == "theirs" else ""))
                secs[who].append(json.loads((d / "test.json").read_text())["sec_per_sent"])
                if who == "mine":
                    mine.append(lines_of(d / "test.out"))
        b = [bleu.corpus_score(h, [refs]).score for h in mine]
        c = [chrf.corpus_score(h, [refs]).score for h in mine]
        tb = [bleu.corpus_score(h, [refs]).score for h in theirs]
        tc = [chrf.corpus_score(h, [refs]).score for h in theirs]
        t = pooled_test(theirs, mine, refs)
        ratio = statistics.mean(secs["mine"]) / statistics.mean(secs["theirs"])
        out.append(f"| {system.label} | {SYSTEMS[tuned_for].label} | {pooled} | {fmt_runs(b)} | {fmt_runs(c)} | "
                   f"{statistics.mean(b) - statistics.mean(tb):+.2f} | {t['p_bleu']:.3f} | "
                   f"{statistics.mean(c) - statistics.mean(tc):+.2f} | {t['p_chrf']:.3f} | "
                   f"{statistics.mean(secs['mine']):.3f} ({statistics.mean(secs['theirs']):.3f}; {ratio:.2f}x) |")
    return "\n".join(out) + "\n"


def sweep_distortion(study: Study, limits: list[int], runs: list[str]) -> str:
    """Re-decode the test set of finished runs (SYSTEM:METHODk) with their tuned weights and only
    the distortion limit changed: a cheap look at whether a limit is worth tuning for. The
    weights were tuned at the run's own limit, so these are not tuned results."""
    from sacrebleu.metrics import BLEU

    refs = lines_of(study.text("test", TGT))
    bleu = BLEU(tokenize="none", force=True)
    out = ["| run: BLEU (decode s/sent, -threads 1) | " + " | ".join(f"limit {dl}" for dl in limits) + " |",
           "|---|" + "---|" * len(limits)]
    jumps, where = gold_jumps(study)
    out.append(f"| {where} pairs whose word order needs a longer jump ({len(jumps)} pairs, gold alignment) | "
               + " | ".join(f"{100 * np.mean(jumps > dl):.1f}%" for dl in limits) + " |")
    for spec in runs:
        name, run = spec.split(":")
        system, d = SYSTEMS[name], study.work / "runs" / name / run
        study.prepare_system(system)
        sweep = d / "sweep"
        sweep.mkdir(exist_ok=True)
        cells = []
        for dl in limits:
            hyp = sweep / f"test.dl{dl}.out"
            if not hyp.is_file():
                sections = read_ini(study.system_ini(system, "test", weights_from=d / "tuned.ini"))
                sections["distortion-limit"] = [str(dl)]
                ini = sweep / f"test.dl{dl}.ini"
                write_ini(ini, sections)
                tmp = sweep / f".test.dl{dl}.out"
                wall = study.translate(ini, "test", tmp, sweep / f"test.dl{dl}.log")
                (sweep / f"test.dl{dl}.json").write_text(json.dumps({"wall_seconds": round(wall, 2)}) + "\n")
                os.replace(tmp, hyp)
            wall = json.loads((sweep / f"test.dl{dl}.json").read_text())["wall_seconds"] \
                if (sweep / f"test.dl{dl}.json").is_file() else 0.0
            took, timed = decode_seconds(sweep / f"test.dl{dl}.log", wall, count_lines(hyp))
            cells.append(f"{bleu.corpus_score(lines_of(hyp), [refs]).score:.2f} "
                         f"({took / max(1, timed):.2f} s/sent)")
            study.log(f"sweep {spec} limit {dl}: BLEU {cells[-1]}")
        out.append(f"| {system.label}, {METHOD_LABEL[run.rstrip('0123456789')]} run {run[-1]} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def copy_text(src: Path, dest: Path) -> None:
    """Copy a corpus file, decompressing .xz, atomically (a lost machine leaves no half file)."""
    import lzma

    tmp = dest.with_name(f".{dest.name}.tmp")
    with (lzma.open(src, "rb") if src.suffix == ".xz" else open(src, "rb")) as fin, open(tmp, "wb") as fout:
        shutil.copyfileobj(fin, fout, 1 << 20)
    os.replace(tmp, dest)


def write_head(src: Path, n: int, dest: Path) -> None:
    """DEST = the first N lines of SRC, written atomically."""
    _atomic_write(dest, "".join(line + "\n" for line in lines_of(src)[:n]).encode("utf-8"))


def count_lines(path: Path) -> int:
    with open(path, "rb") as fh:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))


def read_ini(path: Path) -> dict[str, list[str]]:
    sections: dict[str, list[str]] = {"": []}
    current = ""
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        m = re.fullmatch(r"\[([^\]]+)\]", line)
        if m:
            current = m.group(1)
            sections.setdefault(current, [])
        elif line and not line.startswith("#"):
            sections[current].append(line)
    return sections


def feature_value(line: str, key: str) -> str:
    """The value of KEY= on a [feature] line."""
    return next(kv.split("=", 1)[1] for kv in line.split() if kv.startswith(f"{key}="))


def feature_names(features: list[str]) -> set[str]:
    """The names Moses gives an ini's [feature] lines: name=, else the type and its count so far."""
    names, seen = set(), {}
    for line in features:
        kind = line.split()[0]
        given = re.search(r"(?:^|\s)name=(\S+)", line)
        names.add(given.group(1) if given else f"{kind}{seen.get(kind, 0)}")
        seen[kind] = seen.get(kind, 0) + 1
    return names


def weight_values(lines: list[str]) -> dict[str, list[str]]:
    """[weight] lines by feature name: `Name= w1 w2 ...` -> {Name: [w1, w2, ...]}."""
    return {line.split("=", 1)[0].strip(): line.split("=", 1)[1].split() for line in lines}


def beside_as_one_weights(lines: list[str], table_twice: bool = False) -> list[str]:
    """[weight] lines of the table beside a model as Moses2's one ExternalReordering0 weighs
    them: LexicalReordering0's weights, then ExternalReordering0's (or, with TABLE_TWICE, the
    table's again: the untuned start, as for two features). Lines already in that form are
    kept."""
    weights = weight_values(lines)
    if "LexicalReordering0" not in weights:
        return lines
    table = weights["LexicalReordering0"]
    model = table if table_twice else weights["ExternalReordering0"]
    kept = [line for line in lines if line.split("=", 1)[0].strip() not in ("LexicalReordering0", "ExternalReordering0")]
    return kept + [f"ExternalReordering0= {' '.join(table + model)}"]


def _ini_text(sections: dict[str, list[str]]) -> str:
    out = []
    for name, lines in sections.items():
        if name:
            out.append(f"[{name}]")
        out.extend(lines)
        out.append("")
    return "\n".join(out)


def write_ini(path: Path, sections: dict[str, list[str]]) -> None:
    _atomic_write(path, _ini_text(sections).encode("utf-8"))    # two runs of one system write the same ini


# --------------------------------------------------------------------------- scheduler

def run_jobs(study: Study, jobs: list[Job], n_workers: int, max_jobs: int | None) -> None:
    pending = [j for j in jobs if not study.finished(j)]
    running: set[str] = set()
    failed: set[str] = set()
    started = [0]
    cond = threading.Condition()

    def next_job() -> Job | None:
        with cond:
            while True:
                if max_jobs is not None and started[0] >= max_jobs:
                    return None
                candidates = [j for j in pending if j.key not in running and j.key not in failed]
                if not candidates:
                    return None
                for j in candidates:
                    if study.ready(j):
                        running.add(j.key)
                        started[0] += 1
                        return j
                if not running:          # what is left waits on runs that failed
                    return None
                cond.wait(30)

    def worker() -> None:
        while True:
            job = next_job()
            if job is None:
                return
            try:
                study.execute(job)
                with cond:
                    pending.remove(job)
            except Exception as exc:                     # one failed run must not stop the others
                study.log(f"{job.key}: FAILED: {exc}")
                with cond:
                    failed.add(job.key)
            finally:
                with cond:
                    running.discard(job.key)
                    cond.notify_all()

    threads = [threading.Thread(target=worker, name=f"worker{i}") for i in range(n_workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


# --------------------------------------------------------------------------- table

def dev_bleu(mert: Path, refs: Path) -> dict[str, float | int]:
    """BLEU of the tuner's last dev decode (mert-moses.pl's run<N>.out, decoded with the weights
    of iteration N-1, the tuned weights but for the last step): what the system reached on the
    set it was tuned on, to set beside test and held-out (a dev gain that does not carry over
    is the tuner fitting 500 sentences). Empty when the tuner left no decode."""
    from sacrebleu.metrics import BLEU

    runs = sorted((int(m.group(1)), f) for f in mert.glob("run*.out")
                  if (m := re.fullmatch(r"run(\d+)\.out", f.name)))
    if not runs:
        return {}
    last, out = runs[-1]
    score = BLEU(tokenize="none", force=True).corpus_score(lines_of(out), [lines_of(refs)]).score
    return {"dev_bleu": round(score, 2), "dev_iteration": last}


def resume_at_last_step(mert: Path) -> None:
    """mert-moses.pl --continue resumes after the step finished_step.txt names, but a run that
    ended at --maximum-iterations names the step after its last one, whose data do not exist
    ('Can't start from step 8, because run8.features.dat was not found'): name the last step
    whose n-best data exist."""
    path = mert / "finished_step.txt"
    step = int(path.read_text().split()[0])
    while step > 1 and not (mert / f"run{step}.features.dat").is_file():
        step -= 1
    path.write_text(f"{step}\n")


def decode_seconds(log: Path, wall: float, sentences: int) -> tuple[float, int]:
    """Seconds a decode spent translating and the sentences they cover, from the decoder's log:
    moses's per-sentence 'Translation took' summed; moses2 prints none, so its wall after
    loading (by Moses's own clock), over every sentence (one thread)."""
    from benchmarks.moses_system import load_seconds, sentence_seconds

    text = log.read_text(encoding="utf-8", errors="replace")
    took = sentence_seconds(text)
    if took:
        return sum(took), len(took)
    return max(0.0, wall - load_seconds(text)), sentences


def lines_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def score_rows(study: Study, subset: str) -> tuple[list[dict], dict]:
    from sacrebleu.metrics import BLEU, CHRF

    refs = lines_of(study.text(subset, TGT))
    bleu, chrf = BLEU(tokenize="none", force=True), CHRF()
    rows = []
    outputs: dict[tuple[str, str], list[list[str]]] = {}
    order = ["lexical", study.best, "none"] + [s for s in SYSTEMS if s not in ("lexical", study.best, "none")]
    for sname in order:
        for method in METHODS:
            runs = []
            for k in range(1, 10):
                d = study.work / "runs" / sname / f"{method}{k}"
                if (d / f"{subset}.json").is_file():
                    hyps = lines_of(d / f"{subset}.out")
                    info = json.loads((d / f"{subset}.json").read_text())
                    tune = json.loads((d / "tune.json").read_text()) if (d / "tune.json").is_file() else {}
                    timing = json.loads((d / "timing.json").read_text()) if subset == "test" and \
                        (d / "timing.json").is_file() else []
                    runs.append({"run": k, "hyps": hyps, "bleu": bleu.corpus_score(hyps, [refs]).score,
                                 "quiet_sec_per_sent": statistics.median(t["sec_per_sent"] for t in timing)
                                 if timing else None,
                                 "chrf": chrf.corpus_score(hyps, [refs]).score,
                                 "sec_per_sent": info["decode_seconds"] / max(1, info["timed_sentences"]),
                                 "iterations": tune.get("iterations"), "tune_min": tune.get("seconds", 0) / 60,
                                 "dev_bleu": tune.get("dev_bleu"),
                                 "builds": (tune.get("system"), info.get("system"))})
            if runs:
                outputs[(sname, method)] = [r["hyps"] for r in runs]
                rows.append({"system": sname, "method": method, "runs": runs})
    for row in rows:
        baseline = SYSTEMS[row["system"]].baseline
        base = outputs.get((baseline, row["method"]))
        mine = outputs[(row["system"], row["method"])]
        if row["system"] == baseline or base is None:
            continue
        row.update(pooled_test(base, mine, refs))
    return rows, outputs


def pooled_test(base: list[list[str]], mine: list[list[str]], refs: list[str]) -> dict:
    """Paired bootstrap (sacrebleu, 1000 resamples) of two systems' runs, the first n runs of
    each pooled (their outputs one after another, each against the references): what a run's
    tuning noise does to one comparison is then averaged over n."""
    from sacrebleu.metrics import BLEU, CHRF
    from sacrebleu.significance import PairedTest

    n = min(len(base), len(mine))
    pooled_base = [h for run in base[:n] for h in run]
    pooled_mine = [h for run in mine[:n] for h in run]
    test = PairedTest([("baseline", pooled_base), ("system", pooled_mine)],
                      {"BLEU": BLEU(tokenize="none", force=True), "chrF": CHRF()},
                      [refs * n], test_type="bs", n_samples=1000)
    _, scores = test()
    bleu_key, chrf_key = (next(k for k in scores if k.startswith(m)) for m in ("BLEU", "chrF"))
    return {"pooled_runs": n, "p_bleu": scores[bleu_key][1].p_value, "p_chrf": scores[chrf_key][1].p_value,
            "pooled_bleu": (scores[bleu_key][0].score, scores[bleu_key][1].score),
            "pooled_chrf": (scores[chrf_key][0].score, scores[chrf_key][1].score)}


def fmt_runs(values: list[float]) -> str:
    mean = statistics.mean(values)
    if len(values) == 1:
        return f"{mean:.2f}"
    return f"{mean:.2f} ± {statistics.stdev(values):.2f} ({' / '.join(f'{v:.1f}' for v in values)})"


def table(study: Study, jobs: list[Job], subsets: list[tuple[str, str]] | None = None) -> str:
    """The Markdown table of every finished run, per test set (default: test and held-out)."""
    out = []
    secs_of: dict[str, float] = {}
    quiet_of: dict[tuple[str, str], float] = {}      # re-timed s/sent of a system's runs, by tuner
    n_test = count_lines(study.text("test", TGT)) if study.text("test", TGT).is_file() else 0
    for subset, title in subsets or (("test", f"{study.corpus.name} test ({n_test} sentences)"),
                                     ("heldout", f"held-out last {study.heldout} pairs of train")):
        if not (study.text(subset, TGT)).is_file():
            continue
        rows, _ = score_rows(study, subset)
        if not rows:
            continue
        out.append(f"**{title}**: BLEU/chrF = sacrebleu (tokenize none, force; chrF defaults), mean ± "
                   "sample s.d. over runs (the runs' values); p = paired bootstrap (1000 resamples) "
                   "against the system's baseline (Lexical unless named; same tuner) on the pooled "
                   "outputs of the first n runs of each; s/sent = Moses's 'Translation took' summed / sentences (moses2: "
                   "the wall after loading / sentences; `-threads 1`, "
                   "decodes run beside other jobs on a shared 2-core machine); s/sent alone = the "
                   "same, re-decoded with `--retime` (each system and its baseline alternating, "
                   "nothing else of the study running; median over re-decodes, mean over runs); dev BLEU = "
                   "the same BLEU of the tuner's last decode of the dev set it tuned on\n")
        out.append("| system | tuner | runs | BLEU | chrF | Δ BLEU vs baseline | p BLEU | p chrF | s/sent | "
                   "s/sent alone | tuning iterations | dev BLEU |")
        out.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
        means = {(r["system"], r["method"]): statistics.mean(x["bleu"] for x in r["runs"]) for r in rows}
        for r in rows:
            bleus = [x["bleu"] for x in r["runs"]]
            chrfs = [x["chrf"] for x in r["runs"]]
            secs = statistics.mean(x["sec_per_sent"] for x in r["runs"])
            baseline = SYSTEMS[r["system"]].baseline
            own = r["system"] == baseline
            secs_of[(subset, r["system"], r["method"])] = secs
            base = means.get((baseline, r["method"]))
            delta = "" if base is None or own else f"{statistics.mean(bleus) - base:+.2f}"
            if delta and baseline != "lexical":
                delta += f" (vs {SYSTEMS[baseline].label})"
            p_b = f"{r['p_bleu']:.3f} (n={r['pooled_runs']})" if "p_bleu" in r else ""
            p_c = f"{r['p_chrf']:.3f}" if "p_chrf" in r else ""
            ratio = secs_of.get((subset, baseline, r["method"]))
            s = f"{secs:.3f}" + (f" ({secs / ratio:.2f}x)" if ratio and not own else "")
            quiet = [x["quiet_sec_per_sent"] for x in r["runs"] if x["quiet_sec_per_sent"] is not None]
            alone = ""
            if quiet:
                qsecs = statistics.mean(quiet)
                quiet_of[(r["system"], r["method"])] = qsecs
                qbase = quiet_of.get((baseline, r["method"]))
                alone = f"{qsecs:.3f}" + (f" ({qsecs / qbase:.2f}x)" if qbase and not own
                                          else "") + (f" (n={len(quiet)})" if len(quiet) < len(r["runs"]) else "")
            its = "/".join(str(x["iterations"]) for x in r["runs"] if x["iterations"] is not None)
            devs = [x["dev_bleu"] for x in r["runs"] if x["dev_bleu"] is not None]
            dev = fmt_runs(devs) + (f" (n={len(devs)})" if len(devs) < len(r["runs"]) else "") if devs else ""
            out.append(f"| {SYSTEMS[r['system']].label} | {METHOD_LABEL[r['method']]} | {len(r['runs'])} | "
                       f"{fmt_runs(bleus)} | {fmt_runs(chrfs)} | {delta} | {p_b} | {p_c} | {s} | {alone} | {its} | "
                       f"{dev} |")
        crossed = [f"{SYSTEMS[r['system']].label} {METHOD_LABEL[r['method']]} {x['run']} "
                   f"({x['builds'][0] or 'unrecorded'})" for r in rows for x in r["runs"]
                   if x["builds"][0] != x["builds"][1]]
        if crossed:
            out.append(f"Weights tuned on another build of the system than the one decoded here "
                       f"({', '.join(sorted({x['builds'][1] or 'unrecorded' for r in rows for x in r['runs']}))}; "
                       "a build is named by the digest of the word alignment its tables were built from): "
                       + ", ".join(crossed) + "\n")
        out.append("")
    remaining = [j for j in jobs if not study.finished(j)]
    if remaining:
        out.append(f"Not run yet ({len(remaining)} jobs, in order of priority): "
                   + ", ".join(f"{j.system} {METHOD_LABEL[j.method]} {'run' if j.kind == 'tune' else 'held-out decode'}"
                               f" {j.run}" for j in remaining))
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--moses", required=True, help="Moses install (bin/, scripts/) with ExternalReordering")
    p.add_argument("--corpus", default=str(DEFAULT_CORPUS), help="train/dev/test with train.align")
    p.add_argument("--work", help="state and work files, outside the repository (default /work/mt/<corpus name>)")
    p.add_argument("--jobs", type=int, default=2, help="tuning jobs at a time, one core each (default 2)")
    p.add_argument("--heldout", type=int, help="last train pairs held out (default 5000; 0 for a corpus "
                                                "shipped without train.align, whose dev and test are whole articles)")
    p.add_argument("--classify", nargs="?", const=",".join(CLASSIFY_MODELS), metavar="MODELS",
                   help="build the system, then train these models (default: "
                        f"{','.join(CLASSIFY_MODELS)}) and score them against Moses's table on every phrase "
                        "pair of the test set (needs the test set's gold alignment: a corpus aligned here)")
    p.add_argument("--decode-probe", metavar="N:LIMITS",
                   help="build the system, then decode the first N dev sentences with Lexical's untuned weights "
                        "at each distortion limit (e.g. 200:6,12,20) with each of --probe-decoders")
    p.add_argument("--probe-decoders", default="mosesx1,mosesx2,moses2x2", metavar="BINxTHREADS,...",
                   help="decoders of --decode-probe (default mosesx1,mosesx2,moses2x2)")
    p.add_argument("--limit", type=int, default=LIMIT,
                   help=f"distortion limit of every system, on a corpus with test articles of its own (default {LIMIT})")
    p.add_argument("--tuner", choices=["mert", "pro"], default="mert",
                   help="the study's tuner there, after Lexical's first MERT and PRO runs (default mert)")
    p.add_argument("--best-system", help="the best External system (e.g. svm-S6-dl20): adds its runs 2-3 to that plan")
    p.add_argument("--dev-lines", type=int, default=0,
                   help="tune on the first N lines of dev (default 0: all of it)")
    p.add_argument("--decoder", choices=["moses", "moses2"], default="moses",
                   help="decoder the tuner runs and the test set is decoded with")
    p.add_argument("--max-iterations", type=int, default=0,
                   help="cap on each tuning run's iterations (mert-moses.pl --maximum-iterations; default 0: "
                        "its own cap of 25)")
    p.add_argument("--tune-threads", type=int, default=1, help="decoder threads of each tuning run (default 1)")
    p.add_argument("--system-only", action="store_true",
                   help="only build the system (alignment, LM, tables, filtered tables, our example store and "
                        "lexical table), each step measured, and print what it cost")
    p.add_argument("--train-models", metavar="SYSTEMS",
                   help="only align the corpus if it needs it and train these External systems' reordering "
                        "models (comma-separated, e.g. svm-S6-ctx): they need no Moses program, so a new "
                        "machine can train them while Moses compiles and the system is built")
    p.add_argument("--best", default="svm-S6", choices=[s for s in SYSTEMS if SYSTEMS[s].kind == "external"
                                                        and not SYSTEMS[s].base],
                   help="the External system given Lexical's tuning budget (default svm-S6)")
    p.add_argument("--record", default=str(DEFAULT_RECORD),
                   help="where finished runs are kept and restored from (default benchmarks/translation-runs, "
                        "committed); '' for none")
    p.add_argument("--port", type=int, default=50161, help="port of the scoring server (default 50161)")
    p.add_argument("--only", help="comma-separated job keys or prefixes to run, started in the order given "
                   "(e.g. tune:lexical:mert1)")
    p.add_argument("--max-jobs", type=int, help="start at most this many jobs in this invocation")
    p.add_argument("--table", action="store_true", help="only print the table of what has finished")
    p.add_argument("--extra-test", metavar="DIR",
                   help="only decode DIR/test.{ja,en} with every finished run's tuned weights and print its table "
                        "(BLEU, chrF, paired bootstrap against the baseline)")
    p.add_argument("--plan", action="store_true", help="only print the jobs in order and their state")
    p.add_argument("--retime", type=int, metavar="ROUNDS",
                   help="only re-decode the finished test sets of --retime-systems and their baselines, "
                        "alternating, ROUNDS times (run it on an otherwise idle machine)")
    p.add_argument("--retime-systems", metavar="NAMES",
                   help=f"systems --retime re-decodes, each beside its baseline (default: the best External "
                        f"at limit {LIMIT} and {BESIDE})")
    p.add_argument("--sweep-distortion", metavar="LIMITS",
                   help="only re-decode the test set of --sweep-runs at these distortion limits (e.g. 6,9,12,16) "
                        "with the runs' tuned weights and print BLEU")
    p.add_argument("--breakdown", metavar="RUNS",
                   help="only print the test BLEU of finished runs (SYSTEM:METHODk, comma-separated; the first "
                        "is the reference) by source length and, for test articles aligned here, by the longest "
                        "jump their gold alignment needs")
    p.add_argument("--cross-decode", metavar="SPECS",
                   help="only decode the test set with one system's model and another's tuned weights "
                        "(SYSTEM@TUNED:pro1+pro2+pro3, comma-separated) and compare with TUNED's own outputs")
    p.add_argument("--dev-pools", metavar="RUNS",
                   help="only decode the tuning set's 100-best lists with finished runs' tuned weights "
                        "(SYSTEM:METHODk, or SYSTEM:pro1+pro2+pro3 to pool runs, or SYSTEM@TUNED:RUNS for "
                        "SYSTEM's model under TUNED's weights; comma-separated) and print how often the "
                        "reordering feature orders their hypotheses as sentence BLEU does")
    p.add_argument("--sweep-runs", default="lexical:mert1,svm-S6:mert1",
                   help="finished runs for --sweep-distortion, SYSTEM:METHODk (default lexical:mert1,svm-S6:mert1)")
    args = p.parse_args(argv)
    try:                    # before hours of tuning, not at the table at their end
        import sacrebleu  # noqa: F401
    except ImportError:
        p.error("the table needs sacrebleu: pip install -e '.[mt]'")

    retime_systems = (args.retime_systems.split(",") if args.retime_systems
                      else [f"{args.best}-dl{LIMIT}", BESIDE])
    unknown = [n for n in retime_systems if n not in SYSTEMS]
    if unknown:
        p.error(f"--retime-systems: no system named {', '.join(unknown)}")

    args.work = args.work or str(WORK_ROOT / Path(args.corpus).resolve().name)
    study = Study(args)
    if args.classify and (Path(args.corpus) / "train.align").is_file():
        p.error("--classify scores the test set's gold orientations: it needs a corpus aligned here "
                "(one shipped without train.align, such as ja-en-kyoto)")
    if args.decode_probe:
        n, limits = args.decode_probe.split(":")
        decoders = [(d.split("x")[0], int(d.split("x")[1])) for d in args.probe_decoders.split(",")]
        build_system(study)
        text = decode_probe(study, int(n), [int(x) for x in limits.split(",")], decoders)
        (study.work / "probe.md").write_text(text, encoding="utf-8")
        print(text)
        return 0
    if args.train_models:
        names = [n.strip() for n in args.train_models.split(",") if n.strip()]
        wrong = [n for n in names if n not in SYSTEMS or SYSTEMS[n].kind != "external"]
        if wrong:
            p.error(f"--train-models: no External system named {', '.join(wrong)}")
        study.prepare_corpus()
        for name in names:
            study.train_model(SYSTEMS[name])
        return 0
    if args.system_only or args.classify:
        try:
            build_system(study)
            if args.classify:
                text = classify(study, args.classify.split(","))
                (study.work / "classify.md").write_text(text, encoding="utf-8")
                print(text)
        finally:
            study.stop_server()
        print(system_summary(study))
        return 0
    if study.heldout:
        full_plan = plan(args.best)
    else:
        systems_at(args.limit)
        full_plan = articles_plan(args.best, args.limit, args.tuner)
        if args.best_system:
            if args.best_system not in SYSTEMS or SYSTEMS[args.best_system].kind != "external":
                p.error(f"--best-system: no External system named {args.best_system}")
            full_plan += goal_runs(args.best_system, args.tuner)
    jobs = list(full_plan)
    if args.only:
        wanted = [w.strip() for w in args.only.split(",") if w.strip()]
        unknown = [w for w in wanted if not any(j.key.startswith(w) for j in jobs)]
        if unknown:  # e.g. a PRO run while the plan's tuner is MERT: say so, do not run nothing
            p.error(f"--only {','.join(unknown)}: no job of the plan is named so (--plan lists them; "
                    "the tuner is --tuner's, the candidates --best's and --best-system's)")
        # in the order given: the first keys named are the first started
        jobs = list(dict.fromkeys(j for w in wanted for j in jobs if j.key.startswith(w)))
    study.prepare_corpus()                  # the table's references; the record's corpus
    study.restore_recorded(full_plan)
    if args.plan:
        for j in jobs:
            print(f"{j.key:36} {'done' if study.finished(j) else 'tuned' if study.tuned(j) else '-'}")
        return 0
    if args.breakdown:
        print(breakdown(study, args.breakdown.split(",")))
        return 0
    for specs, measure, saved in ((args.cross_decode, cross_decode, "cross-decode.md"),
                                  (args.dev_pools, dev_pool_ranks, "dev-pools.md")):
        if specs:
            try:
                text = measure(study, specs.split(","))
            finally:
                study.stop_server()
            (study.work / saved).write_text(text, encoding="utf-8")
            print(text)
            return 0
    if args.sweep_distortion:
        try:
            print(sweep_distortion(study, [int(x) for x in args.sweep_distortion.split(",")],
                                   args.sweep_runs.split(",")))
        finally:
            study.stop_server()
        return 0
    if args.extra_test:
        try:
            print(extra_test(study, jobs, Path(args.extra_test)))
        finally:
            study.stop_server()
        return 0
    if args.retime:
        try:
            retime_decodes(study, jobs, args.retime, retime_systems)
        finally:
            study.stop_server()
    elif not args.table:
        try:
            study.build_lm()
            study.build_tm()
            for subset in ("dev", "test"):
                study.filter_tables(subset)
            run_jobs(study, jobs, args.jobs, args.max_jobs)
        finally:
            study.stop_server()
    text = table(study, full_plan)
    (study.work / "table.md").write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
