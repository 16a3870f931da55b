"""The moses.ini [feature] line (training.moses.ini): what Moses reads, for every type spelling.

Specification, from Moses's source (moses/FF/LexicalReordering/ and FeatureFunction.cpp):
num-features is LRModel::GetNumScoreComponents (classes x directions, one per direction
for collapseff; twice that for ExternalReordering with the table of path=); output-factor
is written for `-fe` types only (with it, Moses's text-table loader reads a target field
that an `-f` table line does not have); the type is written as spelled (Moses parses any
spelling); a key given twice is refused, as Moses refuses it. pipeline prints this line.
"""

from __future__ import annotations

import itertools

import pytest

from training.api.pipeline import moses_feature_line
from training.moses.ini import feature_line, parse_feature_line
from training.moses.types import MosesType

# LRModel::GetNumberOfTypes per orientation set
CLASSES = {"msd": 3, "mslr": 4, "monotonicity": 2, "leftright": 2}
SPELLINGS = ["-".join(p for p in parts if p) for parts in itertools.product(
    ("", "wbe", "phrase", "hier"), CLASSES, ("", "backward", "unidirectional", "forward", "bidirectional"),
    ("f", "fe"), ("", "allff", "collapseff"))]


def expected(spelled: str, feature: str = "ExternalReordering", table: bool = False) -> str:
    parts = spelled.split("-")
    orientation = next(p for p in parts if p in CLASSES)
    per_direction = 1 if "collapseff" in parts else CLASSES[orientation]
    n = per_direction * (2 if "bidirectional" in parts else 1) * (2 if table else 1)
    factors = "input-factor=0" + (" output-factor=0" if "fe" in parts else "")
    return f"{feature} name=LexicalReordering0 num-features={n} type={spelled} {factors}"


@pytest.mark.parametrize("spelled", SPELLINGS)
def test_the_line_of_every_spelling(spelled):
    assert feature_line(spelled, "LexicalReordering", path="/t.gz") == expected(spelled, "LexicalReordering") + \
        " path=/t.gz"
    assert feature_line(spelled, server="127.0.0.1:50051", model="m") == expected(spelled) + \
        " server=127.0.0.1:50051 model=m"
    reversed_spelling = "-".join(reversed(spelled.split("-")))  # Moses takes the parts in any order
    assert feature_line(reversed_spelling, model="m").split()[2] == expected(spelled).split()[2]


def test_pinned_lines():
    assert feature_line("hier-msd-bidirectional-fe", server="127.0.0.1:50051", model="ja-en-svm") == (
        "ExternalReordering name=LexicalReordering0 num-features=6 type=hier-msd-bidirectional-fe input-factor=0 "
        "output-factor=0 server=127.0.0.1:50051 model=ja-en-svm")
    assert feature_line("msd-backward-f", "LexicalReordering", path="rt.gz", default_scores="0.5,0.2,0.3") == (
        "LexicalReordering name=LexicalReordering0 num-features=3 type=msd-backward-f input-factor=0 path=rt.gz "
        "default-scores=0.5,0.2,0.3")
    # Moses2's table and model in one feature: the table's block, then the model's
    assert feature_line("hier-msd-bidirectional-fe", name="ExternalReordering0", server="a:1", model="m",
                        path="/rt") == (
        "ExternalReordering name=ExternalReordering0 num-features=12 type=hier-msd-bidirectional-fe input-factor=0 "
        "output-factor=0 server=a:1 model=m path=/rt")
    assert feature_line("mslr-bidirectional-fe-collapseff", model="m").split()[2] == "num-features=2"


def test_pipeline_prints_the_builders_line():
    for spelled in ("hier-msd-bidirectional-fe", "wbe-monotonicity-forward-f", "phrase-mslr-backward-fe-collapseff"):
        mtype = MosesType.parse(spelled)
        assert moses_feature_line(mtype, "m") == expected(str(mtype)) + " server=127.0.0.1:50051 model=m"


def test_keys_moses_would_refuse():
    with pytest.raises(ValueError, match="type: written by feature_line"):
        feature_line("msd-backward-fe", type="msd-backward-f")
    with pytest.raises(ValueError, match="duplicate key 'path'"):
        parse_feature_line("LexicalReordering path=a path=b")
    with pytest.raises(ValueError, match="expected KEY=VALUE"):
        parse_feature_line("LexicalReordering path")
    line = feature_line("msd-backward-fe", "LexicalReordering", path="/t", default_scores=None)
    assert parse_feature_line(line) == ("LexicalReordering", {
        "name": "LexicalReordering0", "num-features": "3", "type": "msd-backward-fe", "input-factor": "0",
        "output-factor": "0", "path": "/t"})
