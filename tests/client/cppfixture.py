"""The fixture directory the C++ client tests read (REORDERING_FIXTURE_DIR).

A model repository with two versions of one hier-msd-bidirectional-fe model, both
trained by our trainer (`moses-reorder extract` + `moses-reorder train`, maxent over S7,
on the first TRAIN_LINES of ja-en train; version 2 with a stronger prior, so its scores
differ), and a model of the same type with decoder context (maxent over S7,neighbour);
real sentences of ja-en as ScoreRequest JSON lines, the probabilities Python computes for
them with training.modelfile.model.load_model(...).predict_proba (one file per version),
the context model's blocks for them (`context_blocks`) and its probabilities of each pair
next to given neighbours (`predict_proba_next_to`, which never adds blocks: what the C++
combination must come to), and the command line that starts the real server
(`moses-reorder serve`).
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
from training.features.batch import pair_slice  # noqa: E402
from training.features.neighbour import BACKWARD, FORWARD, edge_words, pair_boundary_words  # noqa: E402
from training.modelfile.model import load_model  # noqa: E402
from training.modelfile.request import arrays_from_strings, batch_from_request_arrays  # noqa: E402

MODEL = "ja-en"
CONTEXT_MODEL = "ja-en-ctx"
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


def train_models(work: Path, ja_en_dir: Path, root: Path) -> tuple[dict[int, Path], Path]:
    """Extract the train slice and train one model per version into the repository `root`,
    and the context model; return the versions' paths and the context model's."""
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
    context = model_path(root, CONTEXT_MODEL, 1)
    context.parent.mkdir(parents=True, exist_ok=True)
    _cli("train", "--family", "maxent", "--features", "S7,neighbour", "--type", MOSES_TYPE, "--store", str(store),
         "--out", str(context), "--threshold", "0", "--quiet")
    return paths, context


def _floats(values) -> str:
    return " ".join(repr(float(v)) for v in np.asarray(values, dtype=np.float32).ravel())


def write_context_expectations(out: Path, path: Path, batch: list) -> None:
    """For each request, one line each of two files. context-blocks.txt: the model's own
    scores, neighbour block and boundary, in that order ([pairs x outputs] twice, then
    [outputs]). context-next.txt: for each pair c, its probabilities with the pair before it
    in the request (cyclically) as its backward neighbour and the pair after it as its
    forward one, [pairs x outputs], then with the sentence edges as both neighbours."""
    model = load_model(path)
    with open(out / "context-blocks.txt", "w", encoding="utf-8") as blocks, \
            open(out / "context-next.txt", "w", encoding="utf-8") as nexts:
        for s in batch:
            pairs = batch_from_request_arrays(**arrays_from_strings(s.source, s.pairs))
            own, neighbour, boundary = model.context_blocks(pairs)
            blocks.write(" ".join((_floats(own), _floats(neighbour), _floats(boundary))) + "\n")
            n = pairs.n_pairs
            words = {d: pair_boundary_words(pairs, d) for d in (BACKWARD, FORWARD)}
            next_to, at_edges = [], []
            for c in range(n):
                one = pair_slice(pairs, c, c + 1)
                before = tuple(w[[(c + n - 1) % n]] for w in words[BACKWARD])
                after = tuple(w[[(c + 1) % n]] for w in words[FORWARD])
                next_to.append(model.predict_proba_next_to(one, {"backward": before, "forward": after})[0])
                at_edges.append(model.predict_proba_next_to(
                    one, {"backward": edge_words(BACKWARD), "forward": edge_words(FORWARD)})[0])
            nexts.write(" ".join((_floats(next_to), _floats(at_edges))) + "\n")


def write_fixture(out: Path, ja_en_dir: Path) -> Path:
    """Write everything the C++ tests need into `out`; return it."""
    out.mkdir(parents=True, exist_ok=True)
    root = out / "models"
    paths, context = train_models(out / "train", ja_en_dir, root)
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
    write_context_expectations(out, context, batch)
    (out / "fixture.txt").write_text(
        f"model={MODEL}\ncontext_model={CONTEXT_MODEL}\nmoses_type={MOSES_TYPE}\nn_outputs={n_outputs}\n"
        f"versions={' '.join(map(str, VERSIONS))}\n", encoding="utf-8")
    serve = [sys.executable, "-m", "training.cli", "serve", "--models", str(root), "--host", "127.0.0.1",
             "--port", "{port}", "--poll-seconds", "0", "--log-level", "warning"]
    (out / "serve_command.txt").write_text("\n".join(serve) + "\n", encoding="utf-8")
    self_signed_cert(out / "tls")  # tls/server.crt + tls/server.key for the TLS test
    return out
