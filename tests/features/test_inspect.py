"""`moses-reorder inspect`: metadata, schema and sizes of a weight file; exit 4 for a bad one."""

from __future__ import annotations

import json

import numpy as np

from training.cli import main as cli_main
from training.modelfile.model import write_model


def make(path, float16=False):
    keys = np.arange(1, 1001, dtype=np.uint64) * np.uint64(7919)
    write_model(path, family="svm", moses_type="hier-msd-bidirectional-fe", keys=keys,
                weights=np.full((1000, 6), 0.25, np.float32), bias=np.zeros(6, np.float32), features="S7",
                threshold=10, trainer="svm-shrinking", hyperparameters={"C": 0.5},
                corpus_fingerprint="abc123", training_seconds=1.5, float16=float16)


def test_inspect_text(tmp_path, capsys):
    make(tmp_path / "m.mrw")
    assert cli_main(["inspect", str(tmp_path / "m.mrw")]) == 0
    out = capsys.readouterr().out
    for text in ("hier-msd-bidirectional-fe", "mono, swap, disc", "backward, forward", "n_features    1000",
                 "S7", "svm-shrinking", '"C": 0.5', "abc123", "weights     float32  1000x6"):
        assert text in out, text


def test_inspect_json(tmp_path, capsys):
    make(tmp_path / "m.mrw", float16=True)
    assert cli_main(["inspect", "--json", str(tmp_path / "m.mrw")]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["n_features"] == 1000 and info["metadata"]["weights_dtype"] == "float16"
    assert info["arrays"]["weights"] == {"dtype": "float16", "shape": [1000, 6], "nbytes": 12000}
    assert info["file_size"] == (tmp_path / "m.mrw").stat().st_size


def test_inspect_bad_file(tmp_path, capsys):
    make(tmp_path / "m.mrw")
    data = bytearray((tmp_path / "m.mrw").read_bytes())
    data[200] ^= 0xFF
    (tmp_path / "m.mrw").write_bytes(bytes(data))
    assert cli_main(["inspect", str(tmp_path / "m.mrw")]) == 4
    assert "corrupt" in capsys.readouterr().err


def test_inspect_metadata_of_the_wrong_type_is_exit_4_naming_the_field(tmp_path, capsys):
    from training.modelfile.container import read_weight_file, write_weight_file

    make(tmp_path / "m.mrw")
    wf = read_weight_file(tmp_path / "m.mrw")
    write_weight_file(tmp_path / "bad.mrw", {**wf.metadata, "link": ["softmax"]},
                      {k: np.array(v) for k, v in wf.arrays.items()})  # checksum valid, metadata foreign
    assert cli_main(["inspect", str(tmp_path / "bad.mrw")]) == 4
    err = capsys.readouterr().err
    assert "'link' must be a string" in err and "Traceback" not in err
