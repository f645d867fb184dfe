"""Rows and a total order on their values (so consolidated output is canonical)."""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any, TypeAlias

__all__ = ["Row", "row_sort_key", "value_sort_key"]

Row: TypeAlias = tuple[Any, ...]
"""One row of a collection: a tuple of column values (``None`` is SQL NULL)."""


_RANK_OF_TYPE: dict[type, int] = {bool: 1, int: 2, float: 2, Decimal: 2, str: 3, bytes: 4}
"""The rank of the common exact types, looked up before the general ``isinstance`` chain."""


def value_sort_key(v: Any) -> Any:
    """A total sort key over mixed values: NULL first, then bools, numbers, strings, bytes, tuples."""
    rank = _RANK_OF_TYPE.get(type(v))
    if rank is not None:
        if v != v:  # NaN: after every number, as PostgreSQL sorts it
            return (2, math.inf, 1)
        return (rank, v)
    if v is None:
        return (0,)
    if isinstance(v, bool):
        return (1, v)
    if isinstance(v, int | float):
        return (2, v) if v == v else (2, math.inf, 1)
    if isinstance(v, str):
        return (3, v)
    if isinstance(v, bytes):
        return (4, v)
    if isinstance(v, tuple):
        return (5, tuple(value_sort_key(x) for x in v))
    sk = getattr(v, "sort_key", None)
    if callable(sk):
        return (6, type(v).__name__, sk())
    try:
        hash(v)
        return (7, type(v).__name__, v)  # comparable values of one type (dates, Decimals, ...)
    except TypeError:
        return (8, type(v).__name__, repr(v))


def row_sort_key(row: Row) -> Any:
    """The sort key of a row: its values' keys, left to right."""
    return tuple(map(value_sort_key, row))
