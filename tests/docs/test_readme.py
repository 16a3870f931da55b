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
    # every tuned row says how many tuning runs stand behind it (issue 29: 3 runs is the measurement)
    tuned = [line for line in lines if line.startswith("| ja-en Kyoto Wikipedia") and "BLEU" in line]
    assert tuned and all(re.search(r"\b(1 run|3 runs)\b", line) for line in tuned)


def test_the_exit_codes_the_readme_gives_are_the_errors_codes() -> None:
    from training.errors import InputError, ModelFileError, UsageError

    assert "2 usage error,\n3 bad input data" in README or "2 usage error, 3 bad input data" in " ".join(README.split())
    assert (UsageError.exit_code, InputError.exit_code, ModelFileError.exit_code) == (2, 3, 4)
