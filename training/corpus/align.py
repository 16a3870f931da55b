"""Word-align a tokenized parallel corpus: eflomal in both directions, then symmetrize.

This is how a user who has only tokenized text gets the Pharaoh alignment that
`extract` needs. It validates the text once (the same line and token rules extract
relies on), runs eflomal (an optional dependency: `pip install 'moses-reorder[align]'`)
in one call that produces both directional alignments, and combines them with
training.corpus.symmetrize. It must not tokenize, lowercase or otherwise change the text:
the alignment indices refer to the user's tokens, split on spaces and tabs.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from training.atomic import parents_for, write_bytes_atomic
from training.errors import InputError, MosesReorderError
from training.corpus.pharaoh import format_links, parse_links
from training.corpus.reading import decode_utf8
from training.corpus.symmetrize import symmetrize

# eflomal (2.0) silently writes a sentence of 1024 or more tokens as an empty one, which
# would come out unaligned: refuse such input instead.
MAX_TOKENS = 1023

# eflomal splits on any Unicode whitespace; Moses splits on spaces and tabs. Other
# whitespace inside a line would shift every index after it, so it is refused.
_FOREIGN_SPACE = re.compile(r"[^\S \t\n]")

INSTALL_HINT = "pip install 'moses-reorder[align]'"


@dataclass(frozen=True)
class TokenizedText:
    """One side of the corpus: its lines (as eflomal reads them) and their token counts."""

    path: Path
    lines: list[str]
    lengths: np.ndarray  # int64 [n_lines]


def read_tokenized(path: str | os.PathLike, max_tokens: int = MAX_TOKENS) -> TokenizedText:
    """Read and check one tokenized file; every problem names the file and line."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path) from exc
    text = decode_utf8(data, path)
    if text.startswith("\ufeff"):
        raise InputError("starts with a UTF-8 byte-order mark; remove it", path, 1)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        raise InputError("is empty", path)
    lengths = np.empty(len(lines), dtype=np.int64)
    for i, line in enumerate(lines):
        n = len(line.split())
        if n == 0:
            raise InputError("empty line: eflomal cannot align an empty sentence; "
                             "remove this pair from both files", path, i + 1)
        if n > max_tokens:
            raise InputError(f"sentence has {n} tokens; the aligner takes at most {max_tokens}", path, i + 1)
        lengths[i] = n
    bad = _FOREIGN_SPACE.search(text)
    if bad:
        line = text.count("\n", 0, bad.start()) + 1
        raise InputError(f"contains whitespace U+{ord(bad.group()):04X} other than space and tab "
                         "(tokens must be separated by spaces or tabs only)", path, line)
    return TokenizedText(path, lines, lengths)


def read_parallel(src: str | os.PathLike, tgt: str | os.PathLike) -> tuple[TokenizedText, TokenizedText]:
    """Both sides, checked, and checked to have the same number of lines."""
    source = read_tokenized(src)
    target = read_tokenized(tgt)
    if len(source.lines) != len(target.lines):
        shorter = source if len(source.lines) < len(target.lines) else target
        raise InputError(
            f"line counts differ: {source.path} has {len(source.lines)} lines, "
            f"{target.path} has {len(target.lines)}", shorter.path, len(shorter.lines) + 1,
        )
    return source, target


def _import_eflomal():
    try:
        import eflomal
    except ImportError as exc:
        raise MosesReorderError(f"the aligner eflomal is not installed: {INSTALL_HINT}") from exc
    return eflomal


def run_eflomal(source: TokenizedText, target: TokenizedText, n_samplers: int = 3,
                threads: int | None = None, verbose: bool = False
                ) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """eflomal's forward and reverse alignments as ((links, offsets), (links, offsets)).

    Both come back as (src, tgt) pairs. Forward gives every target word at most one
    link, reverse every source word. eflomal seeds its sampler from the clock, so two
    runs differ slightly; it offers no seed.
    """
    eflomal = _import_eflomal()
    env_threads = os.environ.get("OMP_NUM_THREADS")
    with tempfile.TemporaryDirectory(prefix="moses-reorder-align-") as tmp:
        fwd_path = os.path.join(tmp, "forward.links")
        rev_path = os.path.join(tmp, "reverse.links")
        aligner = eflomal.Aligner(n_samplers=n_samplers)
        try:
            if threads is not None:  # the eflomal binary is OpenMP; it inherits our environment
                os.environ["OMP_NUM_THREADS"] = str(threads)
            aligner.align(source.lines, target.lines, links_filename_fwd=fwd_path,
                          links_filename_rev=rev_path, quiet=not verbose)
        except (subprocess.CalledProcessError, OSError, ValueError) as exc:
            raise MosesReorderError(f"eflomal failed: {exc}") from exc
        finally:
            if threads is not None:
                if env_threads is None:
                    os.environ.pop("OMP_NUM_THREADS", None)
                else:
                    os.environ["OMP_NUM_THREADS"] = env_threads
        result = []
        for path in (fwd_path, rev_path):
            try:
                data = Path(path).read_bytes()
            except OSError as exc:
                raise MosesReorderError(f"eflomal wrote no alignment ({exc.strerror}): {path}") from exc
            links, offsets = parse_links(data, path)
            if offsets.shape[0] - 1 != len(source.lines):
                raise MosesReorderError(f"eflomal returned {offsets.shape[0] - 1} alignments "
                                        f"for {len(source.lines)} sentence pairs")
            result.append((links, offsets))
    return result[0], result[1]


def align_corpus(src: str | os.PathLike, tgt: str | os.PathLike, out: str | os.PathLike,
                 method: str = "grow-diag-final-and", n_samplers: int = 3,
                 threads: int | None = None, verbose: bool = False,
                 report: Callable[[str], None] | None = None) -> int:
    """Align SRC with TGT and write Pharaoh `i-j` lines (i source, j target) to OUT.

    OUT is replaced atomically, so a failed run leaves no partial file. `report` hears a
    line before each stage (eflomal is one opaque process: there is no finer progress
    to show). Returns the number of links written.
    """
    report = report or (lambda message: None)
    out = Path(out)
    if out.is_dir():
        raise InputError("is a directory; --out names the alignment file to write", out)
    with parents_for(out):          # made now (a file in the way is said now, not after a long alignment)
        return _align_to(out, src, tgt, method, n_samplers, threads, verbose, report)


def _align_to(out: Path, src, tgt, method: str, n_samplers: int, threads: int | None, verbose: bool,
              report: Callable[[str], None]) -> int:
    source, target = read_parallel(src, tgt)
    report(f"aligning {len(source.lines)} sentence pairs with eflomal in both directions "
           f"({n_samplers} samplers)")
    (fwd, fwd_off), (rev, rev_off) = run_eflomal(source, target, n_samplers, threads, verbose)
    report(f"symmetrizing with {method}")
    # reverse gives each source word one link (symal's direct), forward each target word.
    links, offsets = symmetrize(source.lengths, target.lengths, rev, rev_off, fwd, fwd_off, method)
    try:
        write_bytes_atomic(out, format_links(links, offsets))
    except OSError as exc:
        raise InputError(f"cannot write the alignment: {exc.strerror}", out) from exc
    return int(links.shape[0])
