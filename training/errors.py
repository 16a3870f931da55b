"""Errors a user can act on, each with the exit code the CLI returns for it.

Raise these at public entry points (file readers, CLI arguments, model loading) with a
message that names the file, line or field. Internals trust their inputs.
"""

from __future__ import annotations

import os


class MosesReorderError(Exception):
    """Base class: a problem in the user's input or environment, not a bug."""

    exit_code = 1


class InputError(MosesReorderError):
    """Bad input data (corpus, alignment, store, arguments). Exit code 3."""

    exit_code = 3

    def __init__(self, message: str, path: str | os.PathLike | None = None, line: int | None = None):
        self.path = None if path is None else os.fspath(path)
        self.line = line
        where = ""
        if self.path is not None:
            where = self.path if line is None else f"{self.path}:{line}"
            where += ": "
        super().__init__(where + message)


class UsageError(InputError):
    """A misused option: an unknown family, type or feature set, a value out of range, options
    that do not go together. Exit code 2, as argparse's own usage errors, so a script can tell
    "the command line is wrong" (2) from "the data is wrong" (3). A subclass of InputError, so
    code that refuses bad input (the server's request checks) catches both."""

    exit_code = 2


class AddressError(InputError):
    """An address the server cannot listen on: the port is in use, or the host is not one of this
    machine's addresses. Exit code 5, so a script that starts a server can tell "pick another
    port" from bad input data (3)."""

    exit_code = 5


class ModelFileError(MosesReorderError):
    """A weight file that is truncated, corrupt, foreign or from the future. Exit code 4."""

    exit_code = 4

    def __init__(self, message: str, path: str | os.PathLike | None = None):
        self.path = None if path is None else os.fspath(path)
        super().__init__(f"{self.path}: {message}" if self.path else message)
