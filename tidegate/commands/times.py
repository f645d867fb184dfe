"""Timestamps for people: ISO 8601 (UTC, milliseconds) beside the epoch-millisecond number.

tidegate's timestamps are epoch milliseconds (the timestamp oracle follows the
wall clock), so every time the CLI shows can be read as a date. Text shows
both, ``1764312000123 (2025-11-28T06:40:00.123Z)``; JSON keeps the number and
adds a field named ``<field>_iso`` (a list of strings for a frontier).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

__all__ = ["format_time", "iso_frontier", "iso_ms"]

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def iso_ms(ms: Any) -> str | None:
    """``ms`` (epoch milliseconds) as ISO 8601 in UTC with milliseconds (``...T06:40:00.123Z``).

    ``None`` for anything that is not an integer time a calendar can hold (years 1 to 9999).
    """
    if type(ms) is not int:
        return None
    try:
        when = _EPOCH + dt.timedelta(milliseconds=ms)
    except OverflowError:
        return None
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def iso_frontier(elements: Sequence[Any]) -> list[str | None]:
    """A frontier's elements (``[t]``, or ``[]`` when closed) as ISO strings."""
    return [iso_ms(t) for t in elements]


def format_time(ms: Any) -> str:
    """``1764312000123 (2025-11-28T06:40:00.123Z)``; just the number if it reads as no date."""
    iso = iso_ms(ms)
    return str(ms) if iso is None else f"{ms} ({iso})"
