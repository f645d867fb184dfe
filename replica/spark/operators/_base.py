"""What every operator shares: :class:`Node`, :class:`StatefulNode` and the change helpers.

A change is a list of ``(row or message, time, diff)`` triples
(:data:`Changes`); the stateful operators consolidate a step's change by key
and time (:func:`by_key_time`) before they look their keys up in Spark.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tidegate.spec.frontier import Row

from ..arrangement import Spine

__all__ = ["Changes", "Node", "StatefulNode", "bump", "by_key_time", "net_rows"]

Changes = list[tuple[Any, int, int]]
"""``(row or message, time, diff)`` triples."""


def by_key_time(
    changes: Changes, keyfn: Callable[[Row], Row]
) -> dict[Row, dict[int, dict[Row, int]]]:
    """Consolidate changes into ``key -> time -> row -> diff`` (zeros dropped)."""
    out: dict[Row, dict[int, dict[Row, int]]] = {}
    cancelled = False
    for row, t, d in changes:
        rows = out.setdefault(keyfn(row), {}).setdefault(t, {})
        n = rows.get(row, 0) + d
        if n:
            rows[row] = n
        else:
            del rows[row]
            cancelled = True
    if not cancelled:  # no row cancelled out: no time or key is empty
        return out
    return {k: {t: rs for t, rs in ts.items() if rs} for k, ts in out.items() if any(ts.values())}


def bump(state: dict[Row, int], row: Row, d: int) -> None:
    """Add ``d`` to ``row``'s count in ``state``, dropping it at zero."""
    n = state.get(row, 0) + d
    if n:
        state[row] = n
    else:
        state.pop(row, None)


def net_rows(by_key: dict[Row, dict[int, dict[Row, int]]]) -> dict[Row, int]:
    """The net ``row -> diff`` of a :func:`by_key_time` change over all its keys and times."""
    out: dict[Row, int] = {}
    for times in by_key.values():
        for rows in times.values():
            for r, d in rows.items():
                bump(out, r, d)
    return out


class Node:
    """One operator. After :meth:`run`, ``out``/``errs`` hold its changes for the step."""

    consolidated = False
    """Whether ``out`` never holds two changes of one ``(row, time)`` nor a zero diff."""

    def __init__(self, inputs: list[Node]) -> None:
        self.inputs = inputs
        self.out: Changes = []
        self.errs: Changes = []

    def run(self, first_time: int | None) -> None:
        """Compute this step's changes; ``first_time`` is the as_of when the step includes it."""
        raise NotImplementedError

    def _input_errs(self) -> Changes:
        errs: Changes = []
        for n in self.inputs:
            errs.extend(n.errs)
        return errs


class StatefulNode(Node):
    """A node whose state is held in Spark arrangements."""

    arrangements: tuple[Spine, ...] = ()

    def state_jobs(self) -> int:
        """The Spark jobs its arrangements' lookups have run so far."""
        return sum(a.jobs for a in self.arrangements)

    def clear(self) -> None:
        """Forget the state held in Spark (its dataflow was dropped)."""
        for a in self.arrangements:
            a.clear()
