"""Fixtures for feature tests: an example store of the first 2000 ja-en training lines.

The store is made by the real `moses-reorder extract` (hier-msd labels), so the features
tests read exactly what trainers read.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from training.cli import main as cli_main
from training.store import ExampleStore

SLICE_LINES = 2000


@pytest.fixture(scope="session")
def slice_2k_files(ja_en_dir: Path, tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("features-2k")
    paths = {}
    for side, ext in (("src", "ja"), ("tgt", "en"), ("align", "align")):
        with open(ja_en_dir / f"train.{ext}", "rb") as fh:
            lines = [next(fh) for _ in range(SLICE_LINES)]
        paths[side] = out / f"train.{ext}"
        paths[side].write_bytes(b"".join(lines))
    return paths


@pytest.fixture(scope="session")
def store_2k(slice_2k_files, tmp_path_factory) -> ExampleStore:
    out = tmp_path_factory.mktemp("store") / "store"
    code = cli_main(["extract", "--src", str(slice_2k_files["src"]), "--tgt", str(slice_2k_files["tgt"]),
                     "--align", str(slice_2k_files["align"]), "--out", str(out), "--model", "hier-msd",
                     "--chunk-examples", "20000", "--quiet"])
    assert code == 0
    return ExampleStore.open(out)
