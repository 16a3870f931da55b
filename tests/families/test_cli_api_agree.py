"""`moses-reorder train` and `training.api.train_model` are one code path with one set of
defaults: the same arguments give the same model file for every family.

Everything of the two files is compared (arrays byte for byte, metadata value for value)
except what measures the run itself: created-at, durations and peak memory.
"""

from __future__ import annotations

import numpy as np
import pytest

from training.api import train_model
from training.cli import main as cli_main
from training.families import FAMILIES
from training.modelfile.container import read_weight_file

TYPE = "hier-msd-bidirectional-fe"
# Per-run measurements, not settings or results.
VOLATILE = {"created_at", "training_seconds", "feature_seconds", "train_seconds", "fit_seconds", "seconds",
            "peak_memory_bytes", "compile_seconds"}  # numba compiles in whichever run comes first on a cold cache


def settled(value):
    """Metadata without the per-run measurements."""
    if isinstance(value, dict):
        return {k: settled(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [settled(v) for v in value]
    return value


def test_every_registered_family_is_compared():
    assert set(FAMILIES) == {"svm", "dual-mlr", "maxent", "nb-map", "nb-bayes", "lexical", "hybrid"}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_cli_and_api_write_the_same_model(small_store, tmp_path, family):
    """No --features/--threshold/--calibration-fraction: both sides must fill the same defaults."""
    features = None if FAMILIES[family].default_features or FAMILIES[family].features_by_language else "S7"
    by_cli, by_api = tmp_path / "cli.mrw", tmp_path / "api.mrw"
    argv = ["train", "--family", family, "--type", TYPE, "--store", str(small_store), "--out", str(by_cli),
            "--quiet"] + (["--features", features] if features else [])
    assert cli_main(argv) == 0
    train_model(small_store, family=family, moses_type=TYPE, out=by_api, features=features)
    cli, api = read_weight_file(by_cli), read_weight_file(by_api)
    assert settled(cli.metadata) == settled(api.metadata)
    assert cli.metadata["threshold"] == api.metadata["threshold"]
    assert sorted(cli.arrays) == sorted(api.arrays)
    for name in cli.arrays:
        a, b = np.asarray(cli.arrays[name]), np.asarray(api.arrays[name])
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), name
