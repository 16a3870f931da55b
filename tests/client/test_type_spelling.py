"""Every spelling of a reordering type that Moses's LexicalReordering parses is accepted
by ExternalReordering as the model the server serves under its canonical spelling.

Moses (moses/FF/LexicalReordering/LRModel.cpp) splits `type=` on dashes and takes the
parts in any order, the last of each group winning: kind wbe|phrase|hier (default wbe:
`msd-bidirectional-fe` is `wbe-msd-bidirectional-fe`), orientation set
msd|mslr|monotonicity|leftright (required), direction backward|unidirectional|forward|
bidirectional (default backward), conditioning f|fe (required: LexicalReordering throws
without it), allff|collapseff (default allff). The server names a model by
training.moses.types.MosesType's canonical string. ExternalReordering compares the two
as schemas (moses_ff/moses/ReorderingType.h); this test compiles that header with a
small driver and feeds it every spelling.
"""

from __future__ import annotations

import itertools
import shutil
import subprocess
from pathlib import Path

import pytest

from training.moses.types import CLASSES, DIRECTIONS, MosesType

ROOT = Path(__file__).resolve().parents[2]
DRIVER = ROOT / "moses_ff" / "moses" / "tests" / "reordering_type_main.cc"

KINDS = (None, "wbe", "phrase", "hier")
ORIENTATIONS = ("msd", "mslr", "monotonicity", "leftright")
DIRECTION_SPELLINGS = {None: "backward", "backward": "backward", "unidirectional": "backward",
                       "forward": "forward", "bidirectional": "bidirectional"}
LANGUAGES = ("f", "fe")
COLLAPSE = (None, "allff", "collapseff")


@pytest.fixture(scope="module")
def parser(tmp_path_factory: pytest.TempPathFactory):
    compiler = shutil.which("c++") or shutil.which("g++")
    if compiler is None:
        pytest.skip("no C++ compiler (c++ or g++) found")
    exe = tmp_path_factory.mktemp("type") / "reordering_type"
    # -std=c++11: Moses compiles the feature with -std=c++0x.
    subprocess.run([compiler, "-std=c++11", "-Wall", "-Werror", "-O0", "-o", str(exe), str(DRIVER)], check=True)

    def run(lines: list[str]) -> list[str]:
        out = subprocess.run([str(exe)], input="\n".join(lines) + "\n", capture_output=True, text=True, check=True)
        return out.stdout.splitlines()
    return run


def every_spelling() -> list[tuple[str, str]]:
    """(spelling, the canonical type it means) for every combination of parts Moses
    accepts, in Moses's usual order and in a shuffled order."""
    out = []
    for kind, orient, direction, lang, collapse in itertools.product(
            KINDS, ORIENTATIONS, DIRECTION_SPELLINGS, LANGUAGES, COLLAPSE):
        parts = [p for p in (kind, orient, direction, lang, collapse) if p]
        canonical = (f"{kind or 'wbe'}-{orient}-{DIRECTION_SPELLINGS[direction]}-{lang}"
                     + ("-collapseff" if collapse == "collapseff" else ""))
        out.append(("-".join(parts), canonical))
        out.append(("-".join(reversed(parts)), canonical))
    return out


def test_every_spelling_moses_parses_means_its_canonical_type(parser) -> None:
    spellings = every_spelling()
    assert len(spellings) == 2 * 4 * 4 * 5 * 2 * 3
    answers = parser([s for s, _ in spellings])
    for (spelling, canonical), answer in zip(spellings, answers, strict=True):
        schema = MosesType.parse(canonical)
        expected = (f"OK {canonical} {len(schema.outputs)} {','.join(CLASSES[schema.orientation])} "
                    f"{','.join(DIRECTIONS[schema.direction])}")
        assert answer == expected, spelling
        # The server's canonicalisation of the same spelling agrees with ours.
        assert str(MosesType.parse(spelling)) == canonical, spelling


def test_a_feature_accepts_exactly_the_served_models_of_its_schema(parser) -> None:
    spellings = every_spelling()
    served = sorted({str(MosesType.parse(c)).removesuffix("-collapseff") for _, c in spellings})
    queries, expected = [], []
    for spelling, canonical in spellings:
        for model in served:
            queries.append(f"SAME {spelling} {model}")
            # Collapsing is Moses's job on the full rows: it is not part of the model.
            expected.append("1" if canonical.removesuffix("-collapseff") == model else "0")
    assert parser(queries) == expected
    # Moses's own regression test spells the wbe model without its kind.
    assert parser(["SAME msd-bidirectional-fe wbe-msd-bidirectional-fe",
                   "SAME hier-msd-bidirectional-fe-collapseff hier-msd-bidirectional-fe",
                   "SAME phrase-msd-bidirectional-fe wbe-msd-bidirectional-fe",
                   "SAME hier-msd-bidirectional-f hier-msd-bidirectional-fe"]) == ["1", "1", "0", "0"]


@pytest.mark.parametrize("spelling, why", [
    ("mono-bidirectional-fe", "unknown part 'mono'"),          # Moses: Illegal part, exit(1)
    ("msd-bidirectional-fe-e", "unknown part 'e'"),
    ("hier-bidirectional-fe", "names no orientation set"),
    ("hier-msd-bidirectional", "names no conditioning"),
    ("", "names no orientation set"),
])
def test_spellings_moses_refuses_are_refused(parser, spelling: str, why: str) -> None:
    (answer,) = parser([spelling])
    assert answer.startswith("ERR ") and why in answer, answer


def test_empty_parts_are_skipped_as_moses_tokenizes(parser) -> None:
    assert parser(["hier--msd-bidirectional--fe"]) == ["OK hier-msd-bidirectional-fe 6 mono,swap,disc backward,forward"]
