"""Atomic file output: a reader sees the old file or the complete new one, never a part.

Write to a temporary file in the destination's directory, fsync it, rename it over the
destination, then fsync the directory so the rename itself survives a crash. It must not
be used for directories (build those in a temporary directory and rename that, then
`fsync_directory` the parent).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from training.errors import InputError


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def fsync_directory(directory: str | os.PathLike) -> None:
    """Make a rename inside `directory` durable."""
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike) -> Iterator[BinaryIO]:
    """Yield a binary file whose content replaces `path` when the block ends without error.

    The writer may seek and rewrite (e.g. a magic number written last); on any failure
    `path` is left untouched and the temporary file is removed.
    """
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o666 & ~_umask())  # mkstemp makes 0600; give the usual mode
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    fsync_directory(directory)


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> None:
    """Replace `path` with `data` atomically; on any failure `path` is left untouched."""
    with atomic_writer(path) as f:
        f.write(data)


def write_json_atomic(path: str | os.PathLike, data: object) -> None:
    """`data` as indented JSON, written atomically."""
    import json

    write_bytes_atomic(path, json.dumps(data, indent=2).encode())


def make_parents(path: str | os.PathLike) -> Path | None:
    """Create the missing directories above `path`; return the topmost one made (None when
    none was missing), for `remove_made` to undo after a failed write.

    Why: `--out work/store` on a fresh checkout should work as `mkdir -p` would, and a run
    that fails after making them must still leave nothing behind.
    """
    parent = Path(path).parent if str(Path(path).parent) else Path(".")
    topmost = None
    for directory in (parent, *parent.parents):
        if os.path.lexists(directory):
            break
        topmost = directory
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:          # a file in the way, no permission
        raise InputError(f"cannot create the directory: {exc.strerror}", parent) from exc
    return topmost


def remove_made(topmost: Path | None) -> None:
    """Remove what `make_parents` made (nothing when it made nothing)."""
    if topmost is not None:
        shutil.rmtree(topmost, ignore_errors=True)


@contextlib.contextmanager
def parents_for(path: str | os.PathLike) -> Iterator[None]:
    """The directories above `path` exist inside the block; those it had to make are removed
    again when the block fails."""
    topmost = make_parents(path)
    try:
        yield
    except BaseException:
        remove_made(topmost)
        raise
