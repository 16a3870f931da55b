"""The fixture directory the C++ client tests read (REORDERING_FIXTURE_DIR).

A model repository with two versions of one hier-msd-bidirectional-fe model, both
trained by our trainer (`moses-reorder extract` + `moses-reorder train`, maxent over S7,
on the first TRAIN_LINES of ja-en train; version 2 with a stronger prior, so its scores
differ), real sentences of ja-en as ScoreRequest JSON lines, the probabilities Python
computes for them with training.modelfile.model.load_model(...).predict_proba (one file per
version), and the command line that starts the real server (`moses-reorder serve`).
Requests and expected scores are made as the server's own tests make them (serverkit),
so both suites pin the same contract. This module must not start servers or build C++.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from google.protobuf import json_format

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from corpus_slice import write_corpus_slice  # noqa: E402
from serverkit import (expected_scores, model_path, score_request, self_signed_cert, sentences,  # noqa: E402
                       subprocess_env)

MODEL = "ja-en"
MOSES_TYPE = "hier-msd-bidirectional-fe"
TRAIN_LINES = 500
# version -> extra `moses-reorder train` options; the prior (sigma^2) differs.
VERSIONS = {1: ["--C", "1.0"], 2: ["--C", "0.05"]}


def _cli(*args: str) -> None:
    env = subprocess_env()
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(Path(__file__).resolve().parents[2]),
                                                    env.get("PYTHONPATH", "")) if p)
    result = subprocess.run([sys.executable, "-m", "training.cli", *args], capture_output=True, text=True, env=env)
    if result.returncode != 0:
        raise RuntimeError(f"moses-reorder {' '.join(args)} failed ({result.returncode}):\n{result.stderr[-3000:]}")


def train_models(work: Path, ja_en_dir: Path, root: Path) -> dict[int, Path]:
    """Extract the train slice and train one model per version into the repository `root`."""
    write_corpus_slice(ja_en_dir, TRAIN_LINES, work, stem="slice")
    store = work / "store"
    _cli("extract", "--src", str(work / "slice.ja"), "--tgt", str(work / "slice.en"),
         "--align", str(work / "slice.align"), "--out", str(store), "--model", "hier-msd", "--quiet")
    paths = {}
    for version, options in VERSIONS.items():
        path = model_path(root, MODEL, version)
        path.parent.mkdir(parents=True, exist_ok=True)
        _cli("train", "--family", "maxent", "--features", "S7", "--type", MOSES_TYPE, "--store", str(store),
             "--out", str(path), "--threshold", "0", "--quiet", *options)
        paths[version] = path
    return paths


def write_fixture(out: Path, ja_en_dir: Path) -> Path:
    """Write everything the C++ tests need into `out`; return it."""
    out.mkdir(parents=True, exist_ok=True)
    root = out / "models"
    paths = train_models(out / "train", ja_en_dir, root)
    # Sentences whose pairs hit trained keys (train) and mostly unseen ones (test).
    batch = sentences(ja_en_dir, "train", 12) + sentences(ja_en_dir, "test", 8)
    with open(out / "requests.jsonl", "w", encoding="utf-8") as f:
        for s in batch:
            f.write(json_format.MessageToJson(score_request(s, MODEL), indent=None) + "\n")
    n_outputs = 0
    for v, path in paths.items():
        with open(out / f"expected-v{v}.txt", "w", encoding="utf-8") as f:
            for s in batch:
                probs = expected_scores(path, s)
                n_outputs = probs.shape[1]
                f.write(" ".join(repr(float(p)) for p in np.asarray(probs, dtype=np.float32).ravel()) + "\n")
    (out / "fixture.txt").write_text(
        f"model={MODEL}\nmoses_type={MOSES_TYPE}\nn_outputs={n_outputs}\n"
        f"versions={' '.join(map(str, VERSIONS))}\n", encoding="utf-8")
    serve = [sys.executable, "-m", "training.cli", "serve", "--models", str(root), "--host", "127.0.0.1",
             "--port", "{port}", "--poll-seconds", "0", "--log-level", "warning"]
    (out / "serve_command.txt").write_text("\n".join(serve) + "\n", encoding="utf-8")
    self_signed_cert(out / "tls")  # tls/server.crt + tls/server.key for the TLS test
    return out
