"""Structured logs for the scoring service: one JSON object per line on stderr.

Operators grep and ship these lines, so every record carries a stable `event` name and
its facts as fields (model, version, path, error), never only prose. Lifecycle events,
failures and refused calls are logged (the refusals at a bounded rate: `RefusalLog`);
successful requests are not (metrics count them), so logging never sits on the hot path.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from typing import Any

LOGGER_NAME = "moses_reorder.server"


class JsonLinesFormatter(logging.Formatter):
    """Formats a record as one JSON line: ts, level, event, pid, then the record's fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "event": record.getMessage(),
            "pid": os.getpid(),
        }
        fields = getattr(record, "fields", None)
        if fields:
            entry.update(fields)
        if record.exc_info:
            entry["traceback"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


def get_logger() -> logging.Logger:
    return logging.getLogger(LOGGER_NAME)


def configure_logging(level: str = "info", stream=None) -> logging.Logger:
    """Send the server's records to stderr as JSON lines (idempotent)."""
    logger = get_logger()
    logger.setLevel(level.upper())
    logger.propagate = False
    for handler in list(logger.handlers):
        if getattr(handler, "_moses_reorder", False):
            logger.removeHandler(handler)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonLinesFormatter())
    handler._moses_reorder = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    return logger


def log_event(level: int, event: str, exc_info: bool = False, **fields: Any) -> None:
    """Log `event` with its fields (the JSON formatter flattens them into the line)."""
    get_logger().log(level, event, exc_info=exc_info, extra={"fields": fields})


class RefusalLog:
    """Logs refused calls (`request_refused`: method, code, why), at most `per_second` lines
    a second for each (method, code): a client flooding bad requests must not flood the
    log. The lines left out are counted: the next line logged for that pair says how many
    (`suppressed`), and `flush` (the server calls it every second and when it stops) logs
    what no later line reported (`request_refusals_suppressed`), so a count is never lost
    when a flood stops. The metrics count every call regardless."""

    def __init__(self, per_second: int = 10):
        self.per_second = per_second
        self._lock = threading.Lock()
        self._windows: dict[tuple[str, str], list] = {}  # (method, code) -> [second, logged, suppressed]

    def refused(self, method: str, code: str, why: str) -> None:
        now = int(time.monotonic())
        with self._lock:
            window = self._windows.setdefault((method, code), [now, 0, 0])
            if window[0] != now:
                window[0], window[1] = now, 0
            if window[1] >= self.per_second:
                window[2] += 1
                return
            window[1] += 1
            suppressed, window[2] = window[2], 0
        fields = {"method": method, "code": code, "why": why}
        if suppressed:
            fields["suppressed"] = suppressed
        log_event(logging.WARNING, "request_refused", **fields)

    def flush(self, everything: bool = False) -> None:
        """Log the counts left out in seconds that are over (all of them with `everything`)."""
        now = int(time.monotonic())
        with self._lock:
            due = [(key, window[2]) for key, window in self._windows.items()
                   if window[2] and (everything or window[0] != now)]
            for key, _ in due:
                self._windows[key][2] = 0
        for (method, code), count in due:
            log_event(logging.WARNING, "request_refusals_suppressed", method=method, code=code, suppressed=count,
                      why=f"{count} more {code} refusals of {method} than the {self.per_second} a second logged")
