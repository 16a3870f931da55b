"""Each direction's fitted classifier kept beside the weight file until the whole file is
written, so a training run that is stopped (a lost machine, a job killed) does again only
the directions it had not finished.

Why: on Kyoto's 42M examples one svm direction takes ~100 CPU minutes, and a model of
both directions did not fit between two interruptions of the machine (issue 48). The
dual trainers cannot be stopped and restarted mid-fit at no cost, but a finished
direction is a complete result: its exported arrays and its metadata.

A direction's part, `OUT.parts/<direction>.npz`, holds the arrays `export_arrays()` gave,
its metadata as JSON, and the fingerprint of everything its fit read: the store, the
family and its hyper-parameters, the seed, the split and the columns (the feature keys
themselves). A part whose fingerprint differs is ignored and written again, so a changed
command never reuses a stale fit. The folder goes once the weight file is in place.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from training.atomic import atomic_writer

META = "__meta__"  # the JSON metadata and fingerprint, stored as a uint8 array


def fingerprint(settings: dict[str, Any], keys: np.ndarray) -> str:
    """SHA-256 of the fit's settings (JSON, sorted) and the bytes of its feature keys."""
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode())
    digest.update(np.ascontiguousarray(keys).tobytes())
    return digest.hexdigest()


class DirectionParts:
    """The parts folder of one weight file."""

    def __init__(self, out: str | Path):
        self.folder = Path(f"{out}.parts")

    def _path(self, direction: str) -> Path:
        return self.folder / f"{direction}.npz"

    def load(self, direction: str, expected: str) -> tuple[dict[str, np.ndarray], dict[str, Any]] | None:
        """The arrays and metadata of a finished fit with this fingerprint, else None."""
        path = self._path(direction)
        try:
            with np.load(path, allow_pickle=False) as npz:
                meta = json.loads(npz[META].tobytes().decode())
                if meta.get("fingerprint") != expected:
                    return None
                return {name: npz[name] for name in npz.files if name != META}, meta["info"]
        except (OSError, ValueError, KeyError):  # absent, or cut short before the rename
            return None

    def save(self, direction: str, expected: str, arrays: dict[str, np.ndarray], info: dict[str, Any]) -> None:
        """Write one direction's part atomically (a stop mid-write leaves no part)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        meta = np.frombuffer(json.dumps({"fingerprint": expected, "info": info}, default=str).encode(),
                             dtype=np.uint8)
        with atomic_writer(self._path(direction)) as f:
            np.savez(f, **arrays, **{META: meta})

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
