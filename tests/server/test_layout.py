"""The repository layout is one rule for both sides: what `pipeline` publishes is what the server loads.

Specification: a version directory is named by a canonical positive integer ("7"; never
"07", "0", "+1", " 1" or a hidden staging name), for training.modelfile.layout's
next_version/publish and for the server's ModelRepository alike, so a stray "07" neither
bumps the next published version nor gets served. A model whose warm-up score is
nonsense is refused once, by load_model, and the repository shows that version FAILED
with the reason while the previous version keeps serving.
"""

from __future__ import annotations

import numpy as np
import pytest

from serverkit import model_path, write_test_model
from server.repository import FAILED, LOADED, ModelRepository
from training.modelfile.layout import MODEL_FILE, next_version, parse_version, publish, version_dirs
from training.modelfile.links import LINKS

KEYS = np.arange(1, 9, dtype=np.uint64)


@pytest.mark.parametrize("name, version", [
    ("1", 1), ("7", 7), ("10", 10), ("123456", 123456),
    ("07", None), ("0", None), ("00", None), ("+1", None), ("-1", None), (" 1", None), ("1 ", None),
    ("1.0", None), ("", None), ("²", None), ("١", None), (".staging-3-42", None), ("v1", None),
])
def test_parse_version_accepts_canonical_positive_integers_only(name, version):
    assert parse_version(name) == version


def test_version_dirs_ignore_non_canonical_names_and_files(tmp_path):
    for name in ("1", "3", "07", "0", ".staging-4-1"):
        (tmp_path / name).mkdir()
    (tmp_path / "5").write_text("a file, not a version directory")
    assert version_dirs(tmp_path) == {1: tmp_path / "1", 3: tmp_path / "3"}
    assert next_version(tmp_path) == 4
    assert next_version(tmp_path / "missing") == 1


def test_publish_after_a_stray_07_yields_what_the_server_loads(tmp_path):
    root = tmp_path / "models"
    (root / "m" / "07").mkdir(parents=True)
    write_test_model(root / "m" / "07" / MODEL_FILE, KEYS, seed=7)  # a loadable file, but not a version
    assert next_version(root / "m") == 1
    first = publish(write_test_model(tmp_path / "a.mrw", KEYS, seed=1), root, "m")
    assert first == root / "m" / "1" / MODEL_FILE == model_path(root, "m", 1) and first.is_file()
    repo = ModelRepository(root)
    snapshot = repo.scan()[0]
    assert snapshot.loaded_versions == (1,) and set(snapshot.records) == {1}
    second = publish(write_test_model(tmp_path / "b.mrw", KEYS, seed=2), root, "m")
    assert second == model_path(root, "m", 2)
    snapshot = repo.scan()[0]
    assert snapshot.loaded_versions == (1, 2) and snapshot.newest.path == second
    assert not any(p.name.startswith(".staging") for p in (root / "m").iterdir())


def test_a_model_with_nonsense_warm_up_scores_is_failed_with_the_reason(repo_root, monkeypatch):
    monkeypatch.setitem(LINKS, "test-unnormalized", lambda model, scores, n_found: scores)
    write_test_model(model_path(repo_root, "m", 1), KEYS, seed=1)
    bad = model_path(repo_root, "m", 2)
    bad.parent.mkdir(parents=True)
    good_v2 = write_test_model(repo_root / "v2.mrw", KEYS, seed=2)
    from training.modelfile.container import read_weight_file, write_weight_file

    wf = read_weight_file(good_v2)
    write_weight_file(bad, {**wf.metadata, "link": "test-unnormalized"}, {k: np.array(v) for k, v in wf.arrays.items()})
    snapshot = ModelRepository(repo_root).scan()[0]
    assert snapshot.loaded_versions == (1,)
    assert snapshot.records[1].state == LOADED
    record = snapshot.records[2]
    assert record.state == FAILED
    assert "do not sum to 1 per direction" in record.message
    assert str(bad) in record.detail and str(bad) not in record.message  # paths only in the log
