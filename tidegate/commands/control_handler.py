"""What a handler of the control endpoint is, and what it answers: shared by :mod:`.control`
(which serves it) and :mod:`.control_server` (the ASGI app that calls it).

A :data:`Handler` takes ``(method, path, body)`` and returns a JSON-able result,
a :class:`Stream` (sent as NDJSON as it comes), or raises :class:`Refusal`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

__all__ = ["Handler", "Refusal", "Stream"]


class Refusal(Exception):
    """Raised by a handler for a request it refuses: an HTTP status, an error type and a message."""

    def __init__(self, status: int, type: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.type = type
        self.message = message


class Stream:
    """A streamed answer: a handler returns one to send its items as they come, one JSON object
    per line (NDJSON, ``application/x-ndjson``), instead of one ``{"result": ...}``.

    The server calls :meth:`aclose` when the stream ends, fails or the client goes away (which
    is how a ``tidegate subscribe`` ended with Ctrl-C drops its subscribe).
    """

    def __init__(
        self,
        items: AsyncIterator[Mapping[str, Any]],
        close: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.items = items
        self._close = close

    async def aclose(self) -> None:
        if self._close is not None:
            close, self._close = self._close, None
            await close()


Handler = Callable[[str, str, Mapping[str, Any]], Awaitable[Any]]
"""``(method, path, body) -> result``; raises :class:`Refusal` to refuse; a :class:`Stream`
result is streamed."""
