"""Structured logs of the replica process: one JSON object per line on stderr.

Every record has ``ts`` (UTC, ISO 8601), ``level``, ``logger`` and ``event``;
:func:`log_event` adds its keyword fields. Records from other libraries (grpc,
py4j) come out in the same shape, their message as ``event``.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import sys
from typing import Any, TextIO

__all__ = ["LOGGER_NAME", "JsonFormatter", "configure_logging", "log_event"]

LOGGER_NAME = "tidegate.replica"


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON line; fields given through ``extra={"fields": {...}}``."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": _dt.datetime.fromtimestamp(record.created, _dt.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            doc.update(fields)
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return json.dumps(doc, default=str, sort_keys=False)


def configure_logging(level: int = logging.INFO, stream: TextIO | None = None) -> logging.Logger:
    """Send every log record of the process to ``stream`` (stderr) as JSON lines; return ours."""
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    logger = logging.getLogger(LOGGER_NAME)
    logger.setLevel(level)
    return logger


def log_event(
    logger: logging.Logger,
    event: str,
    *,
    level: int = logging.INFO,
    exc_info: bool = False,
    **fields: Any,
) -> None:
    """Log ``event`` with ``fields`` (values that are not JSON become their ``str``)."""
    if logger.isEnabledFor(level):
        logger.log(level, event, extra={"fields": fields}, exc_info=exc_info)
