"""The README and the guides say what the code does: the family table's feature sets (docs/training.md),
the output folder, the results table's corpora."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from training import defaults
from training.families import FAMILIES, get_family

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
TRAINING_GUIDE = (ROOT / "docs" / "training.md").read_text(encoding="utf-8")


def family_rows() -> dict[str, str]:
    rows = {}
    for line in TRAINING_GUIDE.splitlines():
        m = re.match(r"\| `([a-z-]+)` \|", line)
        if m and m.group(1) in FAMILIES:
            rows[m.group(1)] = line
    return rows


def test_the_family_table_gives_each_family_the_features_it_trains_on() -> None:
    rows = family_rows()
    assert set(rows) == set(FAMILIES)
    for family, row in rows.items():
        cls = get_family(family)
        own = dict(cls.features_by_language or {}) or ({"": cls.default_features} if cls.default_features else {})
        if own:  # lexical, hybrid: their own set, said in their row
            for features in own.values():
                assert f"`{features}`" in row, (family, row)
            assert f"{cls.default_threshold}" in row.split("|")[-2], row
        else:
            assert f"`--features` ({defaults.FEATURES}), {defaults.THRESHOLD}" in row, row


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs git and a checkout")
def test_the_readme_output_folder_is_ignored_by_git() -> None:
    assert "--out work/demo" in README
    result = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", "work/demo/report.md"])
    assert result.returncode == 0, "work/ (the README's output folder) is not in .gitignore"


def test_the_readme_is_a_front_door() -> None:
    """At most ~200 lines; results, the two commands and the Moses steps before any guide link."""
    lines = README.splitlines()
    assert len(lines) <= 200, len(lines)
    order = [README.index(h) for h in ("## Results on real text", "## Two commands", "## Use it with Moses",
                                       "## Where to go next")]
    assert order == sorted(order)
    steps = re.findall(r"^\d\. \*\*", README[order[2]:order[3]], re.M)
    assert 1 <= len(steps) <= 5
    for guide in ("docs/training.md", "docs/serving.md", "docs/moses.md", "docs/scale.md", "docs/internals.md",
                  "docs/moses-quirks.md", "benchmarks/RESULTS.md"):
        assert f"]({guide})" in README and (ROOT / guide).is_file(), guide


def results_section() -> str:
    return README[README.index("## Results on real text"):README.index("## Two commands")]


def test_the_results_section_is_one_short_table_of_what_a_moses_user_decides_on() -> None:
    """Issue 47: at most ~25 lines, one table with a row per corpus and measure (accuracy, BLEU
    with p, decode time), at most five plain sentences, and none of the analysis's own terms."""
    section = results_section()
    lines = section.rstrip().splitlines()
    assert len(lines) <= 25, len(lines)
    rows = [line for line in lines if line.startswith("|")]
    assert len(rows) == len([line for line in lines if line.startswith("|")]) and rows[1].startswith("|---")
    body = [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[2:]]
    corpus = ""
    seen = set()
    for cells in body:
        corpus = cells[0].split(",")[0] or corpus
        measure = next(m for m in ("accuracy", "BLEU", "decode time") if m in cells[1])
        assert (corpus, measure) not in seen, cells
        seen.add((corpus, measure))
        if measure == "BLEU":
            assert "p = " in cells[-1], cells
    assert {m for _, m in seen} == {"accuracy", "BLEU", "decode time"} and len({c for c, _ in seen}) >= 2
    table_start, table_end = section.index(rows[0]), section.index(rows[-1]) + len(rows[-1])
    prose = section[:table_start] + section[table_end:]
    prose = prose.replace("## Results on real text", "")
    assert len(re.findall(r"[.!?](\s|$)", prose)) <= 5, prose
    for term in ("log-loss", "bootstrap where", "pooled", "S6", "prior", "run 1", "pairs the decoder"):
        assert term not in section, term
    assert "](benchmarks/RESULTS.md" in prose  # the analysis is one link away


def test_the_exit_codes_the_readme_gives_are_the_errors_codes() -> None:
    from training.errors import AddressError, InputError, ModelFileError, UsageError

    text = " ".join(README.split())
    assert "2 usage error, 3 bad input data" in text and "4 bad model file, 5 cannot listen" in text
    assert (UsageError.exit_code, InputError.exit_code, ModelFileError.exit_code, AddressError.exit_code) == (2, 3, 4, 5)


def test_the_readme_gives_the_container_tests_real_skip_reason_and_no_stale_counts() -> None:
    """Issue 47: the README said the container tests skip "without a Docker daemon" where they
    skip because python:3.11-slim is neither local nor pullable, and gave counts of an old run."""
    import sys

    sys.path.insert(0, str(ROOT / "tests" / "docker"))
    import dockerkit

    source = (ROOT / "tests" / "docker" / "dockerkit.py").read_text(encoding="utf-8")
    assert "neither local nor pullable (make one with docker/local-base.sh" in source  # the skip's remedy
    text = " ".join(README.split())
    assert dockerkit.DEFAULT_BASE in text and "docker/local-base.sh" in text and "MOSES_REORDER_DOCKER_BASE" in text
    assert not re.search(r"\d+ passed|\d+ skipped", text), "test counts go stale: RESULTS.md keeps dated ones"


def test_the_readme_says_which_version_to_pin_as_pipeline_prints_it() -> None:
    """Issue 47: step 5 said to tune with `version=` pinned; the printed moses.ini line has no
    version= and nothing said which value. The README quotes what the summary prints."""
    step = README[README.index("5. **Tune**"):README.index("Details, Moses2")]
    assert "version=N" in step and '"ja-en-svm was published as version N"' in " ".join(step.split())
    report = (ROOT / "training" / "eval" / "report.py").read_text(encoding="utf-8")
    assert "was published as version {version}: add version={version}" in report


def test_the_readme_sections_the_code_points_readers_to_exist() -> None:
    """A report that says `README, "Section"` sends the reader to a heading that is there (issue 47:
    report.md named "Results at a glance", a section the README no longer has)."""
    quoted = set()
    for source in [*(ROOT / "training").rglob("*.py"), *(ROOT / "server").rglob("*.py")]:
        quoted.update(re.findall(r'README, \\*"([^"\\]+)\\*"', source.read_text(encoding="utf-8")))
    assert quoted, "no README section quoted by the code: the pattern above is stale"
    headings = set(re.findall(r"^#+ (.+)$", README, re.M))
    assert quoted <= headings, quoted - headings
