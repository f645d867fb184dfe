"""Errors of the history area (see the package docstring)."""

from __future__ import annotations

__all__: list[str] = []
