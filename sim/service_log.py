"""What a simulated service logs: its warnings into the trace, its bug events into violations.

The replica processes of the simulator (:mod:`.replica`,
:mod:`.storage_replica`) run the production services, which report through
:mod:`logging`. Each gets a private logger with a :class:`ServiceLog` handler:
every warning becomes a trace event and a "sometimes" counter, an event that
only a bug can cause breaks the service's ``works`` property, and a read below
a collection's since breaks ``read_below_since``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Protocol

__all__ = ["ServiceLog", "service_logger"]


class _World(Protocol):
    def record(self, kind: str, **fields: Any) -> None: ...

    def count(self, name: str) -> None: ...


class _Owner(Protocol):
    @property
    def world(self) -> _World: ...

    def defer_violation(self, property: str, message: str) -> None: ...


class ServiceLog(logging.Handler):
    """The handler (see the module docstring).

    ``kind`` names the trace event (``{kind}_log``) and the counters
    (``{kind}_service_{event}``); ``who`` starts every violation's message;
    ``fields`` go into every trace event. An info event named in ``traced`` becomes
    the trace event ``{kind}_{event}`` (list fields as their lengths), for the
    checkers and tests that follow what the service did (say, how a reconnect's
    reconciliation treated each dataflow).
    """

    def __init__(
        self,
        owner: _Owner,
        *,
        kind: str,
        who: str,
        bug_events: frozenset[str],
        works: str,
        fields: Mapping[str, str] | None = None,
        traced: frozenset[str] = frozenset(),
    ) -> None:
        super().__init__(logging.INFO if traced else logging.WARNING)
        self.owner = owner
        self.kind, self.who, self.bug_events, self.works = kind, who, bug_events, works
        self.fields = dict(fields or {})
        self.traced = traced

    def emit(self, record: logging.LogRecord) -> None:
        owner = self.owner
        event = record.getMessage()
        fields: dict[str, Any] = getattr(record, "fields", None) or {}
        if record.levelno < logging.WARNING:
            if event in self.traced:
                owner.world.record(
                    f"{self.kind}_{event}",
                    **self.fields,
                    **{k: len(v) if isinstance(v, list) else v for k, v in fields.items()},
                )
            return
        owner.world.record(
            f"{self.kind}_log",
            **self.fields,
            level=record.levelname.lower(),
            event=event,
            **{k: str(v)[:200] for k, v in fields.items()},
        )
        owner.world.count(f"{self.kind}_service_{event}")
        error = str(fields.get("error", ""))
        if event in self.bug_events:
            detail = fields.get("message") or error or fields.get("command") or ""
            owner.defer_violation(self.works, f"{self.who}: {event} {detail}")
        elif event == "storage_read_failed" and error.startswith("SnapshotBeforeSince"):
            owner.defer_violation(
                "read_below_since", f"{self.who} reads {fields.get('id')}: {error}"
            )


def service_logger(name: str, handler: ServiceLog) -> logging.Logger:
    """A private logger (not propagated to the root) with ``handler``, for a simulated service."""
    log = logging.Logger(name, handler.level)
    log.propagate = False
    log.addHandler(handler)
    return log
