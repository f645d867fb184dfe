"""The examples in the storage modules' docstrings are correct."""

from __future__ import annotations

import doctest
import importlib

import pytest

WITH_EXAMPLES = [
    "tidegate.spec.storage.reclock",
    "tidegate.spec.storage.resumption",
    "tidegate.spec.storage.loadgen",
    "tidegate.spec.storage.sessions",
    "tidegate.spec.errors.storage_protocol",
]


@pytest.mark.parametrize("name", WITH_EXAMPLES)
def test_storage_module_doctests(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
