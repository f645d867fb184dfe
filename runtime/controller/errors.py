"""Errors of the runtime controller and the embedding API (beyond the spec's own typed errors).

Everything the spec validates raises the spec's errors unchanged (and the
catalog its own, :mod:`tidegate.runtime.errors`); these cover what only the
driver knows: peek outcomes, subscriptions that fell behind, and a driver
that is not running.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tidegate.spec.errors import TidegateError

__all__ = [
    "CopyToFailed",
    "DependencyDropped",
    "DriverNotRunning",
    "PeekFailed",
    "ReplicasNotConnected",
    "ResultTooLarge",
    "RuntimeControllerError",
    "SourceCeased",
    "SourceSchemaMismatch",
    "SourceStalled",
    "SourceUnreadable",
    "SubscribeLagged",
    "dropped_while_subscribed",
    "input_dropped",
]


class RuntimeControllerError(TidegateError):
    """A request to the runtime controller or the environment failed."""


class PeekFailed(RuntimeControllerError):
    """A replica answered a peek with an error (``message`` says why)."""

    def __init__(self, id: object, timestamp: int, message: str) -> None:
        super().__init__(f"peek of {id} at {timestamp} failed: {message}")
        self.id = id
        self.timestamp = timestamp
        self.message = message


class ResultTooLarge(PeekFailed):
    """A peek's answer is larger than the environment's ``max_result_size``."""


class DependencyDropped(PeekFailed):
    """What a pending peek reads was dropped before it was answered.

    Materialize's ``ConcurrentDependencyDrop``: once an object is dropped its
    data stops advancing, so a read waiting on it could wait forever. A
    subscribe reading it ends with a batch carrying the same message.
    """

    def __init__(self, id: object, timestamp: int, dropped: object) -> None:
        super().__init__(id, timestamp, f"{dropped} was dropped while the peek was pending")
        self.dropped = dropped


_SUBSCRIBE_INPUT_DROPPED = " was dropped while the subscribe ran"


def dropped_while_subscribed(dropped: object) -> str:
    """The error of a subscribe's last batch when ``dropped``, an input of it, was dropped."""
    return f"{dropped}{_SUBSCRIBE_INPUT_DROPPED}"


def input_dropped(error: str) -> str | None:
    """The input a subscribe batch's ``error`` says was dropped (``None``: another error)."""
    if error.endswith(_SUBSCRIBE_INPUT_DROPPED):
        return error[: -len(_SUBSCRIBE_INPUT_DROPPED)]
    return None


class CopyToFailed(RuntimeControllerError):
    """A copy-to was refused or answered with an error (``message`` says why: e.g. the URL is
    not writable, or the collection has an error at the copy-to's time)."""

    def __init__(self, id: object, url: str, message: str) -> None:
        super().__init__(f"copy-to {id} to {url!r} failed: {message}")
        self.id = id
        self.url = url
        self.message = message


class SubscribeLagged(RuntimeControllerError):
    """A subscriber did not keep up: its bounded buffer overflowed and the subscribe was dropped."""

    def __init__(self, id: object, buffer: int) -> None:
        super().__init__(f"subscribe {id} dropped: its consumer fell {buffer} batches behind")
        self.id = id


class DriverNotRunning(RuntimeControllerError):
    """The controller driver is not running (not entered yet, or closed)."""


class ReplicasNotConnected(RuntimeControllerError, TimeoutError):
    """Replicas were not all connected in time; ``waiting`` holds their :class:`ReplicaInfo`."""

    def __init__(self, timeout_s: float, waiting: Sequence[Any]) -> None:
        parts = [
            f"{i.replica} ({i.status}{': ' + i.last_error if i.last_error else ''})"
            for i in waiting
        ]
        super().__init__(f"replicas not connected after {timeout_s:g}s: {', '.join(parts)}")
        self.waiting = list(waiting)


class SourceSchemaMismatch(RuntimeControllerError, ValueError):
    """A source was created with a schema its upstream does not have (nothing was created).

    ``expected`` is the schema the upstream (a PostgreSQL table, a load
    generator's kind) gives its rows; ``given`` the one the caller asked for.
    Leave the schema out to take the upstream's.
    """

    def __init__(self, source: str, expected: object, given: object) -> None:
        super().__init__(
            f"source {source!r}: the upstream's rows are {expected}, not {given} "
            "(leave the schema out to take the upstream's)"
        )
        self.source = source
        self.expected = expected
        self.given = given


class SourceUnreadable(RuntimeControllerError):
    """A fresh read needs data of a source (directly, or through what is computed from it) whose
    status reports an error (:class:`SourceStalled`, :class:`SourceCeased`): the read is answered
    with the source's error instead of waiting for data that is not coming, as Materialize does.

    ``source`` is the source's id, ``name`` its name, ``error`` what its storage replica
    reported; ``status`` (a class attribute) is the status that failed the read.
    """

    status = ""

    def __init__(
        self, source: object, error: str | None, message: str, name: str | None = None
    ) -> None:
        super().__init__(message)
        self.source = source
        self.name = name
        self.error = error


def _named(source: object, name: str | None) -> str:
    return f"{name!r} ({source})" if name is not None else str(source)


class SourceStalled(SourceUnreadable):
    """A fresh read of a source that is ``stalled`` (or of something computed from it): its storage
    replica cannot read the upstream now (unreachable, a slot in use) and retries with back-off.

    The read is refused rather than left waiting for as long as the upstream is down; it may
    succeed once the source runs again (``storage_status`` says when), so a later retry is right.
    """

    status = "stalled"

    def __init__(self, source: object, error: str | None, name: str | None = None) -> None:
        super().__init__(
            source,
            error,
            f"source {_named(source, name)} is stalled ({error or 'no reason given'}): a fresh "
            "read of it cannot be answered until it runs again; retry once its upstream is back",
            name,
        )


class SourceCeased(SourceUnreadable):
    """A fresh read of a source that has ceased (or of something computed from it): its data will
    never reach the time the read needs, so the read is refused rather than left waiting.

    ``source`` is the source's id, ``error`` what its storage replica reported (an upstream
    schema change, a lost replication slot); drop the source and create it again.
    """

    status = "ceased"

    def __init__(self, source: object, error: str | None, name: str | None = None) -> None:
        super().__init__(
            source,
            error,
            f"source {_named(source, name)} has ceased ({error or 'no reason given'}): it will "
            "ingest nothing more, so a fresh read of it cannot be answered; drop it and create it "
            "again",
            name,
        )
