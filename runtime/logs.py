"""Structured logs: one JSON object per line, rendered by structlog, for the controller and the replicas.

:func:`configure_logging` routes every log record of the process (ours, and
those of grpc, py4j, uvicorn, ...) through one stdlib handler whose formatter
is structlog's :class:`~structlog.stdlib.ProcessorFormatter`. Every record
has ``event`` (our records' event name, another library's message), ``level``
(lower case), ``logger`` and ``ts`` (UTC, ISO 8601), then its fields; an
exception comes as ``exception`` (the formatted traceback)::

    {"event": "listening", "level": "info", "logger": "tidegate.replica", "ts": "2026-...Z", "address": "127.0.0.1:7001"}

:func:`log_event` logs an event with fields through a stdlib logger (so
``caplog`` and other handlers see the event name as the record's message);
:func:`get_logger` gives a structlog logger (``log.info("event", key=value)``)
rendered the same way.

:func:`capture_stderr` turns whatever else reaches the process's stderr
descriptor into JSON lines too: the JVM's log4j lines and the lines Spark
prints before log4j is configured, native libraries' messages, stray prints.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import sys
import threading
from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any, TextIO

import structlog

__all__ = [
    "JVM_LOGGER",
    "STDERR_LOGGER",
    "StderrCapture",
    "capture_stderr",
    "configure_logging",
    "get_logger",
    "log_event",
    "wrap_line",
]

JVM_LOGGER = "jvm"
"""The logger of the JVM's log4j lines captured from stderr (``jvm.<class>``)."""
STDERR_LOGGER = "stderr"
"""The logger of any other line captured from stderr."""


def _add_fields(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> Any:
    """A stdlib record's ``extra={"fields": {...}}`` (what :func:`log_event` passes) as keys."""
    record = event_dict.get("_record")
    fields = getattr(record, "fields", None)
    if isinstance(fields, Mapping):
        for key, value in fields.items():
            event_dict.setdefault(str(key), value)
    return event_dict


def _shared(static: Mapping[str, Any]) -> list[Any]:
    """The processors every record goes through (stdlib's and structlog's own)."""

    def add_static(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> Any:
        for key, value in static.items():
            event_dict.setdefault(key, value)
        return event_dict

    return [
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True, key="ts"),
        add_static,
    ]


def formatter(static: Mapping[str, Any] | None = None) -> logging.Formatter:
    """The JSON-lines formatter of :func:`configure_logging` (for a handler of your own)."""
    shared = _shared(dict(static or {}))
    return structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*shared, _add_fields],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(default=str),
        ],
    )


def configure_logging(
    level: int = logging.INFO,
    stream: TextIO | None = None,
    *,
    loggers: Iterable[str] = ("tidegate",),
    static: Mapping[str, Any] | None = None,
) -> logging.Logger:
    """Send every log record of the process to ``stream`` (stderr) as JSON lines.

    The root logger stays at ``WARNING`` (other libraries' chatter); ``loggers``
    (and the captured ``jvm``/``stderr`` ones) log from ``level``. ``static``
    fields are added to every record (e.g. ``{"component": "controller"}``).
    Returns the first of ``loggers``. Calling it again replaces the handler.
    """
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(formatter(static))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    names = list(loggers) or ["tidegate"]
    for name in (*names, JVM_LOGGER, STDERR_LOGGER):
        logging.getLogger(name).setLevel(level)
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *_shared(dict(static or {})),
            structlog.stdlib.PositionalArgumentsFormatter(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
    return logging.getLogger(names[0])


def get_logger(name: str = "tidegate") -> Any:
    """A structlog logger named ``name`` (rendered as JSON once :func:`configure_logging` ran)."""
    return structlog.stdlib.get_logger(name)


def log_event(
    logger: logging.Logger,
    event: str,
    *,
    level: int = logging.INFO,
    exc_info: bool = False,
    **fields: Any,
) -> None:
    """Log ``event`` with ``fields`` (values that are not JSON become their ``str``).

    The stdlib record's message is ``event`` and its ``fields`` attribute the
    fields, so that other handlers (pytest's ``caplog``) see them as well.
    """
    if logger.isEnabledFor(level):
        logger.log(level, event, extra={"fields": fields}, exc_info=exc_info)


# -- stderr -----------------------------------------------------------------------------------

_LOG4J = re.compile(
    r"^(?P<ts>\d\d/\d\d/\d\d \d\d:\d\d:\d\d)\s+(?P<level>TRACE|DEBUG|INFO|WARN|ERROR|FATAL)\s+"
    r"(?P<cls>[\w.$-]+):\s?(?P<msg>.*)$"
)
_LEVELS = {
    "TRACE": logging.DEBUG,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL,
}


def wrap_line(line: str) -> tuple[str, int, str, dict[str, Any]] | None:
    """A captured stderr line as ``(logger, level, event, fields)``; ``None`` if it is JSON already.

    A log4j line in Spark's default layout (``25/11/25 09:00:00 WARN
    NativeCodeLoader: ...``) keeps its level, its class as ``jvm.<class>``
    and its own time as ``jvm_ts``; any other line is an ``info`` record of the
    ``stderr`` logger (a traceback's lines, Spark's first lines printed before
    log4j is set up).
    """
    text = line.rstrip("\r\n")
    if text.startswith("{"):
        with contextlib.suppress(ValueError):
            if isinstance(json.loads(text), dict):
                return None
    m = _LOG4J.match(text)
    if m is not None:
        return (
            f"{JVM_LOGGER}.{m['cls']}",
            _LEVELS[m["level"]],
            m["msg"],
            {"stream": "stderr", "jvm_ts": m["ts"]},
        )
    return STDERR_LOGGER, logging.INFO, text, {"stream": "stderr"}


class StderrCapture:
    """The process's stderr descriptor (fd 2) redirected into a pipe whose lines become JSON records.

    Child processes (Spark's JVM, started after this) inherit the pipe. A line
    that is a JSON object already passes through unchanged; any other line is
    logged through :func:`wrap_line`'s logger. :attr:`original` is the real
    stderr: give it to :func:`configure_logging` so records do not loop back
    through the pipe. :meth:`close` restores fd 2 and drains what is left.
    """

    def __init__(self) -> None:
        sys.stderr.flush()
        self._saved = os.dup(2)
        self.original: TextIO = os.fdopen(
            os.dup(self._saved), "w", buffering=1, encoding="utf-8", errors="replace"
        )
        read, write = os.pipe()
        os.dup2(write, 2)
        os.close(write)
        self._read = read
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._pump, name="stderr-capture", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        with open(self._read, "rb", closefd=True) as pipe:
            for raw in pipe:
                self._emit(raw.decode("utf-8", errors="replace"))

    def _emit(self, line: str) -> None:
        if not line.strip():
            return
        wrapped = wrap_line(line)
        with self._lock:
            if wrapped is None:
                self.original.write(line if line.endswith("\n") else line + "\n")
                return
            name, level, event, fields = wrapped
            logger = logging.getLogger(name)
            if logger.isEnabledFor(level):
                logger.log(level, event, extra={"fields": fields})

    def close(self, timeout_s: float = 2.0) -> None:
        """Point fd 2 back at the real stderr; wait (briefly) for the pipe's last lines."""
        sys.stderr.flush()
        os.dup2(self._saved, 2)
        os.close(self._saved)
        self._thread.join(timeout_s)  # EOF once every writer (the JVM included) has closed it
        with contextlib.suppress(OSError, ValueError):
            self.original.flush()


def capture_stderr() -> StderrCapture:
    """Start capturing fd 2 (see :class:`StderrCapture`); call before starting child processes."""
    return StderrCapture()
