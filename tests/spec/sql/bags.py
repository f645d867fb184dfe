"""Comparing query answers as bags: floats with a relative tolerance (sums may differ in order)."""

from __future__ import annotations

import math
from typing import Any


def same_row(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """Equal rows: equal types and values, floats within 1e-9 (relative or absolute)."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if isinstance(x, float) and isinstance(y, float):
            if not math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-9):
                return False
        elif type(x) is not type(y) or x != y:
            return False
    return True


def same_bag(got: list[tuple[Any, ...]], want: list[tuple[Any, ...]]) -> bool:
    """Equal as bags of rows (see :func:`same_row`)."""
    left = list(want)
    for r in got:
        for i, w in enumerate(left):
            if same_row(r, w):
                del left[i]
                break
        else:
            return False
    return not left
