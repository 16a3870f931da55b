"""The model repository's layout, ROOT/<name>/<version>/model.<ext>, in one place.

`pipeline` publishes into it and the server (server/repository.py) serves from it, so
both read versions with the same rule: a model name is a directory whose name does not
start with "."; a version is a subdirectory named by a positive integer in canonical
spelling ("7", never "07", "0", "+7" or " 7"; a hidden staging directory is none), and
it holds exactly one `model.<ext>` weight file (`publish` writes MODEL_FILE). A version
appears in one rename of a fully written directory, so a polling server never sees a
half-copied one.
"""

from __future__ import annotations

import os
from pathlib import Path

from training.errors import InputError

MODEL_STEM = "model"
MODEL_FILE = f"{MODEL_STEM}.mrw"  # what publish writes; the server accepts any model.<ext>
SERVED_DIR = "models"  # `pipeline --out OUT` publishes the models to serve in OUT/models (others: OUT/evaluated)


def parse_version(name: str) -> int | None:
    """The version a directory name stands for, or None if it is not a version directory."""
    if not (name.isascii() and name.isdigit()) or name != str(int(name)) or int(name) < 1:
        return None
    return int(name)


def model_dirs(root: Path) -> dict[str, Path]:
    """The model-name directories under ROOT (hidden ones are not models)."""
    return {p.name: p for p in Path(root).iterdir() if p.is_dir() and not p.name.startswith(".")}


def version_dirs(name_dir: Path) -> dict[int, Path]:
    """A model's version directories by version."""
    out = {}
    for child in Path(name_dir).iterdir():
        version = parse_version(child.name)
        if version is not None and child.is_dir():
            out[version] = child
    return out


def nested_repository(root: Path) -> Path | None:
    """If ROOT holds no model version but one of its directories is a repository (the usual
    slip: `serve --models OUT` for the pipeline's OUT/models), that directory; else None.
    SERVED_DIR comes first: the pipeline's OUT/evaluated is a repository too, of the models
    its report measured, not of those to serve. An empty ROOT is a repository still waiting
    for models, not a slip."""
    names = model_dirs(root)
    if any(version_dirs(d) for d in names.values()):
        return None
    for child in sorted(names.values(), key=lambda d: (d.name != SERVED_DIR, d.name)):
        if any(version_dirs(d) for d in model_dirs(child).values()):
            return child
    return None


def next_version(name_dir: Path) -> int:
    """One more than the highest version (1 for a new model)."""
    name_dir = Path(name_dir)
    return max(version_dirs(name_dir), default=0) + 1 if name_dir.is_dir() else 1


def find_model_file(version_dir: Path) -> Path:
    """The one `model.<ext>` file of a version directory; InputError naming the directory if
    there is none or more than one."""
    candidates = sorted(p for p in Path(version_dir).iterdir()
                        if p.is_file() and p.name.split(".", 1)[0] == MODEL_STEM and "." in p.name)
    if not candidates:
        raise InputError(f"no {MODEL_STEM}.<ext> weight file in the version directory", version_dir)
    if len(candidates) > 1:
        raise InputError(f"several model files in one version directory: {[p.name for p in candidates]}",
                         version_dir)
    return candidates[0]


def publish(model_file: Path, models_root: Path, name: str) -> Path:
    """Move a finished weight file into ROOT/<name>/<next version>/ in one rename.

    The version directory is assembled under a hidden name and renamed into place, so a
    polling server never sees a half-copied version.
    """
    model_dir = Path(models_root) / name
    model_dir.mkdir(parents=True, exist_ok=True)
    version = next_version(model_dir)
    staging = model_dir / f".staging-{version}-{os.getpid()}"
    staging.mkdir()
    os.replace(model_file, staging / MODEL_FILE)
    os.replace(staging, model_dir / str(version))
    return model_dir / str(version) / MODEL_FILE
