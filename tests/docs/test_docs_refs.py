"""Every repository path and named constant the docs and the module docstrings give is there.

Specification: docs/*.md and the first docstring of every Python module name only paths
that exist, constants the code defines (with the value the code gives them, where the
text states one) and dotted names that resolve (tests/docs/refs.py says exactly what
counts); every moses.ini reordering line the docs and the README show is the line
training.moses.ini builds for its keys, so the docs cannot drift from what pipeline prints.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from refs import ROOT, problems, problems_in, texts
from training.moses.ini import feature_line, parse_feature_line


def test_the_scan_reads_the_docs_and_every_module_docstring():
    sources = {path for path, _, _ in texts()}
    assert ROOT / "docs" / "internals.md" in sources and ROOT / "server" / "service.py" in sources
    assert len(sources) > 150


def test_every_reference_resolves():
    found = problems()
    assert not found, "stale references:\n" + "\n".join(map(str, found))


def test_stale_references_are_found():
    """The drift the issue found, and its kinds: each must be reported."""
    stale = ("trainers (through training/vocab.py), pinned in tests/features/test_features.py\n"
             "slices of `SLICE_KEYS` (2^20) keys; `NO_SUCH_LIMIT`; featurespec.py\n"
             "training.features.templates.no_such_function and server.service.ScoreLimits.no_such_field\n")
    found = [p.what for p in problems_in(stale, ROOT / "training" / "features" / "templates.py")]
    assert sorted(found) == sorted(["path training/vocab.py does not exist", "path tests/features/test_features.py does not exist",
                     "SLICE_KEYS is [262144.0] in the code, the text says 2^20",
                     "constant NO_SUCH_LIMIT is defined nowhere", "file featurespec.py does not exist",
                     "training.features.templates.no_such_function does not resolve",
                     "server.service.ScoreLimits.no_such_field does not resolve"])
    fine = ("`SLICE_KEYS` (2^18), solvers/state.py from a family, ../shared/DESIGN.md, moses/FF/Factory.cpp "
            "in a Moses checkout, `RESOURCE_EXHAUSTED`, server.service.ScoreLimits.max_pairs\n")
    assert problems_in(fine, ROOT / "training" / "families" / "svm.py") == []


def _ini_lines() -> list[tuple[Path, str]]:
    pages = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
    return [(page, line.strip()) for page in pages for line in page.read_text(encoding="utf-8").splitlines()
            if line.strip().startswith(("ExternalReordering name=", "LexicalReordering name="))]


def test_the_docs_show_the_builders_moses_ini_lines():
    lines = _ini_lines()
    assert len(lines) >= 3
    for page, line in lines:
        feature, keys = parse_feature_line(line)
        rebuilt = feature_line(keys.pop("type"), feature, name=keys.pop("name"),
                               **{k: v for k, v in keys.items() if k not in ("num-features", "input-factor",
                                                                            "output-factor")})
        assert line == rebuilt, f"{page.relative_to(ROOT)}: {line}\n  training.moses.ini builds: {rebuilt}"


@pytest.mark.parametrize("root", ["training", "server"])
def test_docstrings_carry_no_dated_lab_notes(root):
    """Measurements and their dates belong in benchmarks/RESULTS.md, with the command."""
    import re

    dated = [f"{path.relative_to(ROOT)}: {m.group(0)}" for path, _, text in texts()
             if path.is_relative_to(ROOT / root) for m in re.finditer(r"\b20\d\d-\d\d-\d\d\b.{0,40}", text)
             if "master of" not in text[max(0, m.start() - 12):m.start()]]
    assert not dated, dated
