"""Reusable test machinery: history (see the package docstring)."""

from __future__ import annotations

__all__: list[str] = []
