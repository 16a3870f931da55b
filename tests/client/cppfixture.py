"""The fixture directory the C++ client tests read (REORDERING_FIXTURE_DIR).

A model repository with two versions of one hier-msd-bidirectional-fe model, real
sentences of ja-en as ScoreRequest JSON lines, the probabilities Python computes for
them with training.model.load_model(...).predict_proba (one file per version), and the
command line that starts the real server (`moses-reorder serve`). The models, requests
and expected scores are made exactly as the server's own tests make them (serverkit),
so both suites pin the same contract. This module must not start servers or build C++.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from google.protobuf import json_format

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))
from serverkit import (N_TRAIN, expected_scores, keys_of, model_path, score_request,  # noqa: E402
                       sentences, write_test_model)

MODEL = "ja-en"
MOSES_TYPE = "hier-msd-bidirectional-fe"
VERSIONS = (1, 2)


def write_fixture(out: Path, ja_en_dir: Path) -> Path:
    """Write everything the C++ tests need into `out`; return it."""
    out.mkdir(parents=True, exist_ok=True)
    root = out / "models"
    keys = keys_of(sentences(ja_en_dir, "train", N_TRAIN))
    paths = {v: write_test_model(model_path(root, MODEL, v), keys, moses_type=MOSES_TYPE, seed=v)
             for v in VERSIONS}
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
    return out
