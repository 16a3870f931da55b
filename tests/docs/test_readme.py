"""The README says what the code does: the family table's feature sets, the output folder."""

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


def family_rows() -> dict[str, str]:
    rows = {}
    for line in README.splitlines():
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
