"""A phrase-based ja-en Moses system around one reordering line, for the scripts that run
the real decoder (moses_identity.py, moses_threads.py, moses_failover.py).

What it is for: writing moses.ini files that differ only in the reordering feature,
filtering tables to a test set, running `moses` on a test set (the server beside it is
server.local.LocalServer), and timing them. What it must not do: build Moses or its tables (the phrase
table, the LM and the Moses build come from the user; MOSES-NOTES.md section 8), or
contain anything of Moses's own.
"""

from __future__ import annotations

import gzip
import os
import re
import resource
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from training.moses.ini import feature_line, n_scores, parse_feature_line  # noqa: E402,F401 (n_scores: for the scripts)
from training.moses.types import MosesType  # noqa: E402

MAX_PHRASE = 7  # train-model.perl's extract limit


def moses_binary(moses_dir: str | None, name: str = "moses") -> Path:
    """INST/bin/NAME under --moses-dir or $MOSES_DIR (an install prefix or a source tree)."""
    base = moses_dir or os.environ.get("MOSES_DIR")
    if not base:
        raise SystemExit("give --moses-dir or set MOSES_DIR (a Moses install prefix with bin/moses)")
    path = Path(base) / "bin" / name
    if not path.is_file():
        raise SystemExit(f"{path} not found (MOSES_DIR / --moses-dir must hold bin/{name})")
    return path


def source_ngrams(lines: list[str], max_len: int = MAX_PHRASE) -> set[str]:
    grams = set()
    for line in lines:
        words = line.split()
        for i in range(len(words)):
            for j in range(i + 1, min(len(words), i + max_len) + 1):
                grams.add(" ".join(words[i:j]))
    return grams


def filter_table(src: Path, dst: Path, grams: set[str]) -> int:
    """Rows of a phrase or reordering table (gzipped or not) whose source phrase occurs in
    `grams`, written gzipped to DST."""
    if dst.is_file():
        with gzip.open(dst, "rt", encoding="utf-8") as f:
            return sum(1 for _ in f)
    tmp = dst.with_name(dst.name + ".tmp")
    kept = 0
    opener = gzip.open if src.suffix == ".gz" else open
    with opener(src, "rt", encoding="utf-8") as fin, gzip.open(tmp, "wt", encoding="utf-8", compresslevel=1) as fout:
        for line in fin:
            if line[:line.index(" |||")] in grams:
                fout.write(line)
                kept += 1
    tmp.rename(dst)
    return kept


def complete_table(table: Path, out: Path, lines: list[str], phrase_table: Path, prior: np.ndarray) -> int:
    """TABLE plus a row `w ||| w ||| PRIOR` for every unknown word of `lines` (a source
    word that is no source phrase of PHRASE_TABLE, so the decoder's only option for it is
    the unknown-word one, which copies it); returns the rows added.

    For Moses2, whose LexicalReordering has no default-scores: Moses2 gives a pair missing
    from its table no reordering score, the served `lexical` family gives it the class
    prior, so with these rows the table and the served model are the same model (Moses's
    default-scores do this for moses). Only for `-fe` tables (Moses2 reads no other)."""
    sources = set()
    with gzip.open(phrase_table, "rt", encoding="utf-8") as f:
        for line in f:
            sources.add(line[:line.index(" |||")])
    unknown = sorted({w for line in lines for w in line.split()} - sources)
    values = " ".join(f"{p:.9g}" for p in prior)
    tmp = out.with_name(out.name + ".tmp")
    with gzip.open(table, "rb") as fin, gzip.open(tmp, "wb", compresslevel=1) as fout:
        fout.write(fin.read())
        fout.write("".join(f"{w} ||| {w} ||| {values}\n" for w in unknown).encode("utf-8"))
    tmp.rename(out)
    return len(unknown)


def other_spelling(moses_type: str) -> str:
    """Another spelling Moses accepts for the same type: parts reversed, `-allff` added,
    `wbe` left out (Moses's default kind), `backward` as `unidirectional`."""
    t = MosesType.parse(moses_type)
    parts = [p for p in (t.kind, t.orientation, t.direction, t.language) if p != "wbe"]
    parts = ["unidirectional" if p == "backward" else p for p in parts]
    return "-".join(reversed(parts)) + ("-collapseff" if t.collapse else "-allff")


@dataclass
class System:
    phrase_table: Path
    lm: Path
    lm_order: int = 4
    distortion_limit: int = 6
    table_limit: int = 20
    weights: dict[str, str] = field(default_factory=lambda: {
        "UnknownWordPenalty0": "1", "WordPenalty0": "-1", "PhrasePenalty0": "0.2",
        "TranslationModel0": "0.2 0.2 0.2 0.2", "Distortion0": "0.3", "LM0": "0.5"})

    def ini(self, path: Path, reordering_line: str, n_reordering: int,
            reordering_weights: dict[str, list[float]] | None = None) -> Path:
        """The system with REORDERING_LINE (one feature line, or several); their weights are
        REORDERING_WEIGHTS, by default 0.3 for each of LexicalReordering0's n_reordering."""
        weights = "\n".join(f"{k}= {v}" for k, v in self.weights.items())
        reordering = reordering_weights or {"LexicalReordering0": [0.3] * n_reordering}
        weights += "".join(f"\n{k}= {' '.join(str(w) for w in v)}" for k, v in reordering.items())
        path.write_text(f"""[input-factors]
0
[mapping]
0 T 0
[distortion-limit]
{self.distortion_limit}
[feature]
UnknownWordPenalty
WordPenalty
PhrasePenalty
PhraseDictionaryMemory name=TranslationModel0 num-features=4 path={self.phrase_table} input-factor=0 output-factor=0 table-limit={self.table_limit}
Distortion
KENLM name=LM0 factor=0 path={self.lm} order={self.lm_order}
{reordering_line}
[weight]
{weights}
""")
        return path


def test_slice(test: Path, n: int, work: Path, phrase_table: Path, lm: Path, table_limit: int
               ) -> tuple[list[str], Path, "System"]:
    """The first n test sentences written to WORK/test.N.ja, and a System whose phrase table
    is filtered to them: what every decode benchmark starts from."""
    work.mkdir(parents=True, exist_ok=True)
    lines = test.read_text(encoding="utf-8").splitlines()[:n]
    src = work / f"test.{n}.ja"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    pt = work / "phrase-table.test.gz"
    filter_table(phrase_table, pt, source_ngrams(lines))
    return lines, src, System(pt, lm, table_limit=table_limit)


def lexical_line(moses_type: str, table: Path, default_scores: str | None = None) -> str:
    """Moses's own feature on TABLE (training.moses.ini, the one line builder)."""
    return feature_line(moses_type, "LexicalReordering", path=table, default_scores=default_scores)


def external_line(moses_type: str, server: str, model: str, default_scores: str | None = None,
                  extra: str = "", name: str = "LexicalReordering0", n: int | None = None) -> str:
    """ExternalReordering asking SERVER for MODEL; EXTRA: more `key=value` words (path= makes
    it Moses2's table-and-model feature, with twice the scores)."""
    keys = parse_feature_line("ExternalReordering " + extra)[1]
    return feature_line(moses_type, "ExternalReordering", name=name, num_features=n, server=server, model=model,
                        default_scores=default_scores, **keys)


@dataclass
class Decode:
    lines: list[str]
    seconds: float          # process wall time
    decode_seconds: float   # sum of Moses's per-sentence "Translation took"
    returncode: int
    stderr: str
    load_seconds: float = 0.0  # Moses's own clock when loading ended (moses and moses2 print it)
    cpu_seconds: float = 0.0   # user + system CPU of the process (exact only when runs do not overlap)

    @property
    def decode_wall(self) -> float:
        """Wall time of the decoding itself: the process's minus its loading."""
        return self.seconds - self.load_seconds


def decode(moses: Path, ini: Path, src: Path, threads: int = 1, flags: tuple[str, ...] = (),
           timeout: float = 3600, verbose: int = 1) -> Decode:
    t0 = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(src, "rb") as fin:
        run = subprocess.run([str(moses), "-f", str(ini), "-threads", str(threads), "-v", str(verbose), *flags],
                             stdin=fin, capture_output=True, timeout=timeout)
    seconds = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    err = run.stderr.decode("utf-8", "replace")
    return Decode(run.stdout.decode("utf-8").splitlines(), seconds, float(np.sum(sentence_seconds(err))),
                  run.returncode, err, load_seconds(err), cpu)


def sentence_seconds(stderr: str) -> list[float]:
    """moses's per-sentence 'Translation took' (3 decimals: with threads, lines interleave);
    empty for moses2, which prints none."""
    return [float(m) for m in re.findall(r"Translation took (\d+\.\d{3})", stderr)]


def load_seconds(stderr: str) -> float:
    """Moses's own clock when loading ended, from its log (moses and moses2 print it; moses2
    prints no per-sentence 'Translation took', so its decode time is the wall minus this)."""
    loaded = re.search(r"(?:Created input-output object|Loaded) : \[([0-9.]+)\] seconds", stderr)
    return float(loaded.group(1)) if loaded else 0.0


def served_prior(address: str, model: str) -> np.ndarray:
    """The row the server answers for a phrase pair no model has seen (for the lexical
    family: the class prior), as the float32 values the feature function receives."""
    import grpc
    from server.api import pb, pb_grpc
    from training.modelfile.request import arrays_from_strings
    request = pb.ScoreRequest(model=model, **arrays_from_strings(["\u2400unseen\u2400"], [(0, 1, ["\u2400unseen\u2400"], [(0, 0)])]))
    with grpc.insecure_channel(address) as channel:
        answer = pb_grpc.ReorderingScorerStub(channel).Score(request, timeout=30)
    return np.asarray(answer.probabilities, dtype=np.float32)


def compare(a: list[str], b: list[str]) -> list[int]:
    """0-based line numbers where two outputs differ (a missing line counts)."""
    n = max(len(a), len(b))
    return [i for i in range(n) if i >= len(a) or i >= len(b) or a[i] != b[i]]
