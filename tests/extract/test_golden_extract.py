"""Our `extract` and `extract.o` text equal Moses's on the golden 2k slice, byte for byte after sorting.

Every extract.o.<models>.sorted.gz in golden/ja-en-2k is checked: the file name names
the `--model` list Moses's extract was given ("phrase+hier-msd" = phrase-msd and hier-msd).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import GOLDEN
from tests.extract.conftest import golden_lines, sorted_lines
from training.store.build import build_store
from training.moses.extract import parse_models

GOLDEN_O = sorted(GOLDEN.glob("extract.o.*.sorted.gz"))


def models_of(path: Path) -> list[str]:
    name = path.name[len("extract.o."):-len(".sorted.gz")]
    kinds, _, orientation = name.partition("-")
    return [f"{kind}-{orientation}" for kind in kinds.split("+")]


def test_every_golden_model_list_is_found():
    assert len(GOLDEN_O) == 7, GOLDEN_O


@pytest.mark.parametrize("golden", GOLDEN_O, ids=lambda p: p.name)
def test_extract_o_matches_moses(golden: Path, corpus_2k, tmp_path):
    store = tmp_path / "store"
    build_store(corpus_2k, parse_models(models_of(golden)), store, moses_format=True, progress=False)
    ours = sorted_lines((store / "extract.o").read_bytes())
    theirs = golden_lines(golden)
    assert len(ours) == len(theirs) == 65260
    first_difference = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), None)
    assert first_difference is None, (ours[first_difference], theirs[first_difference])


@pytest.mark.parametrize("model", ["wbe-msd", "hier-mslr"])
def test_extract_phrase_pairs_match_moses(model, corpus_2k, tmp_path):
    """The phrase-pair file is the same whatever the model (hier enumerates over-length blocks too)."""
    store = tmp_path / "store"
    build_store(corpus_2k, parse_models([model]), store, moses_format=True, progress=False)
    assert sorted_lines((store / "extract").read_bytes()) == golden_lines(GOLDEN / "extract.sorted.gz")


def test_wbe_with_hier_writes_only_the_wbe_pair(corpus_2k, tmp_path):
    """Quirk 11: with wbe and hier together Moses's extract.o holds only the wbe labels;
    the store still has both."""
    store = tmp_path / "store"
    build_store(corpus_2k, parse_models(["hier-msd", "wbe-msd"]), store, moses_format=True, progress=False)
    ours = sorted_lines((store / "extract.o").read_bytes())
    assert ours == golden_lines(GOLDEN / "extract.o.wbe-msd.sorted.gz")
    from training.store.examples import ExampleStore

    assert list(ExampleStore.open(store).label_columns) == [
        "hier-msd/prev", "hier-msd/next", "wbe-msd/prev", "wbe-msd/next"]
