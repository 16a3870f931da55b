"""Structured logs for the scoring service: one JSON object per line on stderr.

Operators grep and ship these lines, so every record carries a stable `event` name and
its facts as fields (model, version, path, error), never only prose. Lifecycle events
and failures are logged; successful requests are not (metrics count them), so logging
never sits on the hot path.
"""

from __future__ import annotations

import json
import logging
import os
import sys
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
