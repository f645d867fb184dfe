"""The examples in the frontier modules' docstrings are correct."""

from __future__ import annotations

import doctest
import importlib

import pytest

WITH_EXAMPLES = [
    "antichain",
    "change_batch",
    "mutable_antichain",
    "read_policy",
    "read_holds",
]
ALL = [*WITH_EXAMPLES, "order", "compaction", "rows"]


@pytest.mark.parametrize("name", ALL)
def test_frontier_module_doctests(name: str) -> None:
    module = importlib.import_module(f"tidegate.spec.frontier.{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
    if name in WITH_EXAMPLES:
        assert result.attempted > 0
