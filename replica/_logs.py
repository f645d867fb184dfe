"""Structured logs of the replica process: one JSON object per line on stderr, through structlog.

The rendering is the runtime's (:mod:`tidegate.runtime.logs`), so the
controller's and the replicas' records have one shape: ``event``, ``level``,
``logger``, ``ts`` (UTC, ISO 8601) and the event's fields. Records from other
libraries (grpc, py4j) come out in the same shape, their message as
``event``; with :func:`~tidegate.runtime.logs.capture_stderr` (the replica
process always captures) so do the JVM's lines on stderr.
"""

from __future__ import annotations

import logging
from typing import TextIO

from tidegate.runtime.logs import capture_stderr, log_event
from tidegate.runtime.logs import configure_logging as _configure

__all__ = ["LOGGER_NAME", "capture_stderr", "configure_logging", "log_event"]

LOGGER_NAME = "tidegate.replica"


def configure_logging(level: int = logging.INFO, stream: TextIO | None = None) -> logging.Logger:
    """Send every log record of the process to ``stream`` (stderr) as JSON lines; return ours."""
    return _configure(level, stream, loggers=(LOGGER_NAME,), static={"component": "replica"})
