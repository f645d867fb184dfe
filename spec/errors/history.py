"""Errors of the command history (``spec/history.py``) and of its replay model.

A push that raises leaves the history unchanged.
"""

from __future__ import annotations

from .base import TidegateError

__all__ = [
    "HistoryAsOfUnset",
    "HistoryError",
    "HistoryRepeatsCreateInstance",
    "HistoryRepeatsHello",
    "IllegalReplay",
    "NotACommand",
]


class HistoryError(TidegateError):
    """Base class of the command history's errors."""


class HistoryRepeatsHello(HistoryError, ValueError):
    """A second ``Hello`` pushed into one history (one history is one protocol iteration)."""


class HistoryRepeatsCreateInstance(HistoryError, ValueError):
    """A second ``CreateInstance`` pushed into one history (at most one per iteration)."""


class HistoryAsOfUnset(HistoryError, ValueError):
    """A ``CreateDataflow`` whose ``as_of`` is ``None``: the reduction needs it to advance it."""


class NotACommand(HistoryError, TypeError):
    """Something that is not a compute command was pushed into a history."""


class IllegalReplay(HistoryError):
    """The model replica (``spec/testing/history.py``) got a command that breaks a dependency rule.

    ``rule`` names the rule of docs/reference/compute.md section 3 that was broken.
    """

    def __init__(self, rule: str, detail: str) -> None:
        super().__init__(f"[{rule}] {detail}")
        self.rule = rule
