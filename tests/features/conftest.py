"""Fixtures for feature tests: an example store of the first 2000 ja-en training lines.

The store is made by the real `moses-reorder extract` (hier-msd labels), so the features
tests read exactly what trainers read.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from training.cli import main as cli_main
from training.store.examples import ExampleStore

@pytest.fixture(scope="session")
def store_2k(slice_2k, tmp_path_factory) -> ExampleStore:
    out = tmp_path_factory.mktemp("store") / "store"
    code = cli_main(["extract", "--src", str(slice_2k["src"]), "--tgt", str(slice_2k["tgt"]),
                     "--align", str(slice_2k["align"]), "--out", str(out), "--model", "hier-msd",
                     "--chunk-examples", "20000", "--quiet"])
    assert code == 0
    return ExampleStore.open(out)
