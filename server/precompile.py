"""Compile the scoring kernels into numba's on-disk cache ahead of time.

Why: a new server compiles its numba kernels (cache=True) when it loads its first model
(`load_model`'s warm-up) and on its first requests; for a container started to scale out,
that compile is most of its start-up. docker/Dockerfile runs this module while the image is
built, with NUMBA_CACHE_DIR pointing into the image, so a container loads machine code from
the cache and serves within seconds.

How: it writes a throwaway repository of small models -- every registered link, float32 and
float16 weights, the feature sets the pipeline trains on (S6, the lexical table's `pair`,
the hybrid's `S7,pair`) and a context-3 ANOVA d<=2 set -- starts a real ScoringServer on a
loopback port over it and sends each model one real Score RPC, so the kernels are compiled
for exactly the argument types the serving path gives them. Kernels are compiled per argument
type, not per model, so this covers every model those families and links write.

It must not need the `train` extra (the image has no scipy) and it leaves nothing behind
but the cache. Cache entries are keyed by CPU: the image sets NUMBA_CPU_NAME=generic so
they serve on any x86-64 host, not just the one that built the image.

    python -m server.precompile           # exit 0 when every model scored through the server
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import grpc
import numpy as np

# (source sentence, phrase pairs (span start, end, target words, in-phrase alignment)):
# two pairs of different shapes, so a request hits the loops' every branch once.
_SOURCE = ["kare", "wa", "hon", "o", "yomu"]
_PAIRS = [(0, 1, ["he"], [(0, 0)]), (2, 4, ["the", "book"], [(0, 1), (1, 0)])]
_FEATURE_SETS = ("S6", "pair", "S7,pair", "S15")
_MOSES_TYPE = "hier-msd-bidirectional-fe"  # outputs: 2 directions x 3 classes (mono, swap, disc)
_N_DIRECTIONS, _N_OUTPUTS = 2, 6


def _models(root: Path) -> list[str]:
    """Write one model per (link, weight dtype, feature set) under ROOT; return their names."""
    from training.features.spec import FeatureSpec
    from training.features.templates import extract_keys
    from training.modelfile.layout import MODEL_FILE
    from training.modelfile.links import LINKS
    from training.modelfile.model import write_model
    from training.modelfile.request import batch_from_strings

    n_out = _N_OUTPUTS  # write_model checks it against the type
    rng = np.random.default_rng(0)
    names = []
    for features in _FEATURE_SETS:
        _, keys = extract_keys(batch_from_strings(_SOURCE, _PAIRS), FeatureSpec.parse(features))
        keys = np.unique(keys)
        for link in sorted(LINKS):
            for float16 in (False, True):
                name = f"{link}-{'f16' if float16 else 'f32'}-{features.replace(',', '+')}"
                extras = ({"alpha_sum": np.full(n_out, 50.0), "temperature": np.ones(_N_DIRECTIONS)}
                          if link == "dirichlet" else None)
                path = root / name / "1" / MODEL_FILE
                path.parent.mkdir(parents=True)
                write_model(path, family="precompile", moses_type=_MOSES_TYPE, keys=keys,
                            weights=rng.normal(0, 1, size=(keys.shape[0], n_out)), link=link,
                            bias=np.zeros(n_out, dtype=np.float32), features=features, threshold=0,
                            extras=extras, float16=float16, trainer="server.precompile (synthetic weights)")
                names.append(name)
    return names


def precompile() -> list[str]:
    """Serve the synthetic models and score each once over gRPC; return the model names."""
    from server.api import pb, pb_grpc
    from server.app import ScoringServer, ServeOptions
    from training.modelfile.request import arrays_from_strings

    with tempfile.TemporaryDirectory(prefix="moses-reorder-precompile-") as tmp:
        root = Path(tmp)
        names = _models(root)
        server = ScoringServer(ServeOptions(models=root, host="127.0.0.1", port=0, poll_seconds=0,
                                            keep_versions=1, cache_size=0, cache_mb=0))
        port = server.start()
        try:
            with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
                stub = pb_grpc.ReorderingScorerStub(channel)
                for name in names:
                    response = stub.Score(pb.ScoreRequest(model=name, **arrays_from_strings(_SOURCE, _PAIRS)),
                                          timeout=600)
                    probs = np.asarray(response.probabilities, dtype=np.float32)
                    if probs.shape != (len(_PAIRS) * len(response.outputs),) or not np.isfinite(probs).all():
                        raise RuntimeError(f"precompile: model {name} answered {probs.shape} probabilities")
        finally:
            server.stop(0)
    return names


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(prog="python -m server.precompile", description=__doc__.splitlines()[0]).parse_args(argv)
    from server.logs import configure_logging

    configure_logging("warning")  # a model that fails to load says why in the build log
    names = precompile()
    print(f"precompile: {len(names)} models scored over gRPC; kernels cached", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
