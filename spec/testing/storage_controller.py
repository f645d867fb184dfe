"""Reusable test machinery: storage controller (see the package docstring)."""

from __future__ import annotations

__all__: list[str] = []
