"""Rate-limited since downgrades of a critical reader: persist's ``maybe_compare_and_downgrade_since``.

Every downgrade of a critical reader's since is a compare-and-set of the
shard's state in Consensus. Materialize's controller does not issue one per
change of a collection's since: its critical ``SinceHandle`` downgrades at
most once per ``critical_downgrade_interval`` (persist's default: 30 s) and
answers ``None`` -- "skipped, try later" -- when asked sooner; a downgrade to
the empty frontier (a dropped collection, the prerequisite of finalizing its
shard) is never limited. The shard's since therefore lags the controller's
(reference section 2.2, INV-8), which reads tolerate: a collection is never
read below the controller's since.

:class:`SinceDowngradeLimiter` is that rule as a pure value over time given
as an argument (epoch milliseconds), one entry per shard. Where persist
simply drops a skipped request (the next change brings a newer one), the
limiter keeps the newest skipped frontier, and :meth:`SinceDowngradeLimiter.due`
hands it out once the interval has passed, so a collection whose since stops
moving still gets its shard compacted.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from ..errors import InvalidUsage
from ..frontier import Antichain

__all__ = ["SinceDowngradeLimiter"]

K = TypeVar("K", bound=Hashable)


@dataclass(slots=True)
class _Shard:
    last_ms: int
    pending: Antichain | None = None


@dataclass(slots=True)
class SinceDowngradeLimiter(Generic[K]):
    """Which since downgrades to issue now (see the module docstring).

    ``interval_ms`` 0 issues every downgrade (no limit). Keys are the
    caller's shard names.
    """

    interval_ms: int
    _shards: dict[K, _Shard] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if type(self.interval_ms) is not int or self.interval_ms < 0:
            raise InvalidUsage(
                f"a since downgrade interval is an int >= 0 ms, got {self.interval_ms!r}"
            )

    def offer(self, shard: K, frontier: Antichain, now_ms: int) -> Antichain | None:
        """A downgrade of ``shard`` to ``frontier`` is asked at ``now_ms``: the frontier to
        downgrade to now, or ``None`` (kept: :meth:`due` hands it out later).

        The empty frontier always goes at once, and ends the shard's entry.
        """
        if frontier.is_empty():
            self._shards.pop(shard, None)
            return frontier
        s = self._shards.get(shard)
        if s is None or self.interval_ms == 0 or now_ms - s.last_ms >= self.interval_ms:
            self._shards[shard] = _Shard(now_ms)
            return frontier
        s.pending = frontier
        return None

    def due(self, now_ms: int) -> list[tuple[K, Antichain]]:
        """The kept downgrades whose interval has passed at ``now_ms``; they count as issued."""
        out: list[tuple[K, Antichain]] = []
        for shard, s in self._shards.items():
            if s.pending is not None and now_ms - s.last_ms >= self.interval_ms:
                out.append((shard, s.pending))
                s.last_ms, s.pending = now_ms, None
        return out

    def pending(self, shard: K) -> Antichain | None:
        """The newest downgrade of ``shard`` skipped and not yet handed out, if any."""
        s = self._shards.get(shard)
        return None if s is None else s.pending

    def forget(self, shard: K) -> None:
        """``shard`` is gone (dropped, finalized): nothing more to issue for it."""
        self._shards.pop(shard, None)
