"""Progress of long stages: a tqdm bar on a terminal, plain lines in a log file or pipe.

Every stage that reports progress (store building, the feature count, the solvers'
passes, pipeline's stages) asks this module for a reporter and uses the tqdm calls
(`update`, `set_postfix`, `close`, iteration, `with`). Where the stream is a terminal
the reporter is a tqdm bar; elsewhere it writes whole lines, never a carriage return:
one when the stage starts, one at most every `interval` seconds while it runs
(defaults.PROGRESS_SECONDS) and one when it ends, so a log file shows every stage and
pass without a redrawn bar in it. `note(text)` is a one-off line on the same stream.

It must not decide what a stage is or does: callers name the stage and count its units.
"""

from __future__ import annotations

import sys
import time
from typing import IO, Any, Iterable, Iterator

from tqdm import tqdm


def _stream(file: IO[str] | None) -> IO[str]:
    return sys.stderr if file is None else file


def is_terminal(file: IO[str] | None = None) -> bool:
    stream = _stream(file)
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def note(text: str, *, enabled: bool = True, file: IO[str] | None = None) -> None:
    """One line of stage information (above any bar on a terminal)."""
    if enabled:
        tqdm.write(text, file=_stream(file))


class LineProgress:
    """tqdm's interface, written as whole lines: start, every `interval` seconds, end."""

    def __init__(self, iterable: Iterable | None = None, *, total: int | None = None, desc: str = "",
                 unit: str = "it", file: IO[str] | None = None, interval: float = 10.0,
                 disable: bool = False):
        self.iterable, self.desc, self.unit, self.file = iterable, desc, unit, _stream(file)
        if total is None and iterable is not None and hasattr(iterable, "__len__"):
            total = len(iterable)
        self.total, self.n, self.interval, self.disable = total, 0, interval, disable
        self.postfix: dict[str, Any] = {}
        self.start = self.last = time.perf_counter()
        self.closed = False
        # A line falls due in update() but is written at the next set_postfix (or the next
        # update, or close): callers update, then set the postfix of the unit just done, as
        # tqdm's idiom goes, and the line must show that unit's postfix, not the one before.
        # The time it fell due; its count is self.n until the next update writes it.
        self.due: float | None = None
        if not disable:
            self._line("started")

    def _line(self, state: str, at: float | None = None) -> None:
        count = f"{self.n:,}" + (f"/{self.total:,}" if self.total else "") + f" {self.unit}"
        extra = "".join(f", {k} {v}" for k, v in self.postfix.items())
        seconds = (time.perf_counter() if at is None else at) - self.start
        self.file.write(f"{self.desc}: {count}{extra} ({seconds:.1f} s, {state})\n")
        self.file.flush()

    def _write_due(self) -> None:
        if self.due is not None:
            at, self.due = self.due, None
            self._line("running", at)

    def update(self, n: int = 1) -> None:
        self._write_due()
        self.n += n
        now = time.perf_counter()
        if not self.disable and now - self.last >= self.interval:
            self.last = now
            self.due = now

    def set_postfix(self, refresh: bool = True, **values: Any) -> None:
        self.postfix = {k: v for k, v in values.items()}
        self._write_due()

    def close(self) -> None:
        if not self.closed and not self.disable:
            self._write_due()
            self._line("done")
        self.closed = True

    def __iter__(self) -> Iterator:
        try:
            for item in self.iterable:
                yield item
                self.update(1)
        finally:
            self.close()

    def __enter__(self) -> "LineProgress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def progress(iterable: Iterable | None = None, *, total: int | None = None, desc: str, unit: str = "it",
             enabled: bool = True, leave: bool = True, file: IO[str] | None = None,
             interval: float | None = None):
    """A reporter for one stage: tqdm on a terminal, LineProgress otherwise, silent if not enabled."""
    from training import defaults  # at call time: defaults imports modules that import this one

    stream = _stream(file)
    if is_terminal(stream):
        return tqdm(iterable, total=total, desc=desc, unit=unit, disable=not enabled, leave=leave, file=stream)
    return LineProgress(iterable, total=total, desc=desc, unit=unit, file=stream, disable=not enabled,
                        interval=defaults.PROGRESS_SECONDS if interval is None else interval)
