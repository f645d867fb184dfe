"""Intervals in SQL text (``'1 hour'``, ``'30s'``, ``'500ms'``) in milliseconds.

Shared by the parser (``ALTER ... RETAIN HISTORY``), the lowering
(``INTERVAL`` literals) and the storage statements (``TICK INTERVAL``), so that
the lowering and the storage statements need not import the parser.
"""

from __future__ import annotations

import re

__all__ = ["parse_interval_ms"]

_UNITS = {
    "ms": 1,
    "millisecond": 1,
    "milliseconds": 1,
    "s": 1000,
    "sec": 1000,
    "secs": 1000,
    "second": 1000,
    "seconds": 1000,
    "m": 60_000,
    "min": 60_000,
    "mins": 60_000,
    "minute": 60_000,
    "minutes": 60_000,
    "h": 3_600_000,
    "hr": 3_600_000,
    "hour": 3_600_000,
    "hours": 3_600_000,
    "d": 86_400_000,
    "day": 86_400_000,
    "days": 86_400_000,
}


def parse_interval_ms(text: str) -> int:
    """``'1h'``, ``'30 seconds'``, ``'1 day 2 hours'``, ``'500ms'`` in milliseconds [ValueError]."""
    parts = re.findall(r"(\d+(?:\.\d+)?)\s*([A-Za-z]+)", text)
    if not parts or re.sub(r"(\d+(?:\.\d+)?)\s*([A-Za-z]+)", "", text).strip():
        raise ValueError(f"invalid interval \"{text}\" (write e.g. '1 hour', '30s', '500ms')")
    total = 0.0
    for number, unit in parts:
        scale = _UNITS.get(unit.lower())
        if scale is None:
            raise ValueError(f'invalid interval unit "{unit}" in "{text}"')
        total += float(number) * scale
    return int(total)
