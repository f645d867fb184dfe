"""What read policies promise, from what the clients asked for: the checkers' own arithmetic.

A client sets a lag policy (``LagWriteFrontier(lag, granularity)``) on a
table, source or index; every object has the runtime's documented default
until then (docs/environment.md: one second, ``LagWriteFrontier(1000,
1000)``). The policy promises that the object stays readable from

    ``lag_since(upper) = upper - lag``, rounded down to a multiple of ``min(lag, granularity)``

(``upper`` itself for ``lag == 0``), Materialize's ``lag_writes_by``. The
checkers judge sinces with this one line of their own, fed by the policies the
*clients* set as their history records them (``policy`` operations: the lag
and granularity asked for, and whether the call was acknowledged, refused or
in doubt), never with the product's policy classes or the catalog's encoding
of them, so a bug in either is not shared by the check:

* :meth:`Promises.least` -- how far a since must have come at ``upper`` (the
  policy in force: the last acknowledged one, or one whose outcome is unknown
  after it; the least of them);
* :meth:`Promises.most` -- how far a since may be at ``upper``: every policy the
  object ever had (each moved its since forward, never back), the greatest of
  them. A since beyond it lost history the policy promised.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["DEFAULT_LAG", "Lag", "Promises", "lag_since"]

Lag = tuple[int, int]
"""A lag policy: ``(lag_ms, granularity_ms)``."""

DEFAULT_LAG: Lag = (1000, 1000)
"""The runtime's documented default policy (docs/environment.md, "Read policies")."""


def lag_since(upper: int, lag: Lag) -> int:
    """The since a lag policy implies at ``upper`` (see the module docstring)."""
    ms, granularity = lag
    return upper if ms == 0 else max(0, upper - ms) - max(0, upper - ms) % min(ms, granularity)


def _lag(ev: Mapping[str, Any]) -> Lag:
    return int(ev["lag_ms"]), int(ev.get("granularity_ms", DEFAULT_LAG[1]))


class Promises:
    """The read policies the clients set, by object id (the catalog id as text)."""

    def __init__(self) -> None:
        self._ops: dict[str, list[dict[str, Any]]] = {}

    def invoked(self, ev: dict[str, Any]) -> None:
        """A ``policy`` operation was invoked (its record is live: its completion shows)."""
        self._ops.setdefault(str(ev["target"]), []).append(ev)

    def revision(self, target: str) -> tuple[int, int]:
        """Changes whenever what :meth:`most` answers may shrink: calls made, calls refused."""
        ops = self._ops.get(target, ())
        return len(ops), sum(1 for op in ops if op["status"] == "fail")

    def in_force(self, target: str) -> set[Lag]:
        """The policies one of which is in force on ``target`` now.

        The acknowledged one that completed last, and every one that may have
        applied after it: acknowledged, in doubt or pending, and not completed
        before it was invoked. The default while none was acknowledged. (A call
        in doubt ended with its controller: it landed by then, or never.)
        """
        ops = self._ops.get(target, ())
        acked = [op for op in ops if op["status"] == "ok"]
        last = max(acked, key=lambda op: int(op["complete"])) if acked else None
        out: set[Lag] = {DEFAULT_LAG} if last is None else {_lag(last)}
        start = -1 if last is None else int(last["invoke"])
        for op in ops:
            if op["status"] == "fail" or op is last:
                continue
            # One in doubt (``info``) is settled when its controller died: it landed then or never.
            if op["status"] == "pending" or int(op["complete"]) > start:
                out.add(_lag(op))
        return out

    def ever(self, target: str) -> set[Lag]:
        """Every policy ``target`` may have had: the default, and each not refused."""
        return {DEFAULT_LAG} | {
            _lag(op) for op in self._ops.get(target, ()) if op["status"] != "fail"
        }

    def least(self, target: str, upper: int) -> int:
        """The least since the policy in force allows at ``upper``: a since must have come this far."""
        return min(lag_since(upper, lag) for lag in self.in_force(target))

    def most(self, target: str, upper: int) -> int:
        """The greatest since any policy ``target`` ever had allows at ``upper``."""
        return max(lag_since(upper, lag) for lag in self.ever(target))
