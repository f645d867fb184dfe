"""What the control endpoint does: status, peek and append against a running ``Environment``.

Kept apart from the HTTP layer (:mod:`.control`) so it can be called and
tested directly. Collections are named as in the catalog (a table's,
index's or materialized view's name) or by id (``u7``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio

from tidegate.spec.errors import TidegateError
from tidegate.spec.frontier import Antichain
from tidegate.spec.ids import GlobalId

from .control import Refusal
from .values import RowsError, keys_from_json, row_to_json, rows_from_json

__all__ = ["CollectionInfo", "ControlService", "frontier_json", "lag_ms"]


@dataclass(frozen=True)
class CollectionInfo:
    """A named collection of the environment: ``kind`` is table, index or materialized-view."""

    name: str
    id: GlobalId
    kind: str


def frontier_json(f: Antichain) -> list[Any]:
    return list(f.elements)


def lag_ms(upper: Antichain, now_ms: int) -> int | None:
    """How far the upper trails the wall clock (timestamps are epoch ms); ``None`` if closed."""
    if upper.is_empty():
        return None
    return max(0, now_ms - (int(min(upper.elements)) - 1))


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


class ControlService:
    """Serves control requests from an ``Environment`` (see :mod:`tidegate.runtime.environment`)."""

    def __init__(
        self,
        env: Any,
        *,
        orchestrator: Any = None,
        clock_ms: Callable[[], int] = wall_ms,
        wait_s: float = 30.0,
    ) -> None:
        self.env = env
        self.orchestrator = orchestrator
        """Runs the managed replicas, if any: ``status`` adds their process state."""
        self.clock_ms = clock_ms
        self.wait_s = wait_s
        """How long a peek at a given time waits for the collection to be complete there."""

    # -- the environment's catalog, by name ------------------------------------------------

    def collections(self) -> list[CollectionInfo]:
        """Every table, index and materialized view of the catalog, in id order."""
        out = [CollectionInfo(e.name, e.id, _kind(e)) for e in self.env.state.entries()]
        return sorted(out, key=lambda c: c.id)

    def resolve(self, name: str) -> CollectionInfo:
        for c in self.collections():
            if c.name == name or str(c.id) == name:
                return c
        raise Refusal(404, "UnknownCollection", f"no table, index or materialized view {name!r}")

    # -- requests --------------------------------------------------------------------------

    async def status(self) -> dict[str, Any]:
        now = self.clock_ms()
        rows = []
        for c in self.collections():
            since, upper = self.env.frontiers(c.id)
            rows.append(
                {
                    "name": c.name,
                    "id": str(c.id),
                    "kind": c.kind,
                    "since": frontier_json(since),
                    "upper": frontier_json(upper),
                    "lag_ms": lag_ms(upper, now),
                }
            )
        processes = self.orchestrator.status() if self.orchestrator is not None else {}
        replicas = []
        for r in self.env.replicas():
            entry = {
                "name": r.replica,
                "status": r.status,
                "epoch": r.epoch,
                "address": r.address,
                "last_error": r.last_error or None,
            }
            p = processes.get(r.replica)
            if p is not None:
                entry.update(process=p.state, pid=p.pid, restarts=p.restarts)
            replicas.append(entry)
        return {"now_ms": now, "collections": rows, "replicas": replicas}

    async def peek(self, name: str, at: int | None, key: Sequence[Any] | None) -> dict[str, Any]:
        """Read ``name`` at ``at`` (waiting up to ``wait_s`` for it to be complete) or freshest."""
        c = self.resolve(name)
        schema = self.env.schema(c.id)
        kwargs: dict[str, Any] = {}
        if key is not None:
            if c.kind != "index":
                raise Refusal(
                    400, "NotAnIndex", f"key lookups need an index; {name!r} is a {c.kind}"
                )
            try:
                kwargs["key"] = keys_from_json(key, schema, self.env.state.get(c.id).keys)
            except RowsError as e:
                raise Refusal(400, "BadKey", str(e)) from None
        if at is not None:
            at = int(at)
            with anyio.move_on_after(self.wait_s):
                await self.env.wait_for(c.id, at)
        result = await self.env.peek(c.id, at, **kwargs)
        return {
            "name": c.name,
            "id": str(c.id),
            "time": "freshest" if at is None else at,
            "columns": list(schema.names),
            "rows": [[row_to_json(r), n] for r, n in _rows_of(result)],
        }

    async def append(self, table: str, rows: Any) -> dict[str, Any]:
        c = self.resolve(table)
        if c.kind != "table":
            raise Refusal(400, "NotATable", f"{table!r} is a {c.kind}; only tables take appends")
        try:
            updates = rows_from_json(rows, self.env.schema(c.id))
        except RowsError as e:
            raise Refusal(400, "BadRows", str(e)) from None
        ts = await self.env.append(c.name, updates)
        return {"table": c.name, "time": ts, "rows": len(updates)}

    async def handle(self, method: str, path: str, body: Mapping[str, Any]) -> Any:
        """The :data:`~.control.Handler` for :func:`~.control.serve_control`."""
        try:
            if (method, path) == ("GET", "/health"):
                return {"ok": True}
            if (method, path) == ("GET", "/status"):
                return await self.status()
            if (method, path) == ("POST", "/peek"):
                return await self.peek(str(body["name"]), body.get("at"), body.get("key"))
            if (method, path) == ("POST", "/append"):
                return await self.append(str(body["table"]), body.get("rows"))
        except KeyError as e:
            raise Refusal(400, "BadRequest", f"missing field {e}") from None
        except TidegateError as e:
            raise Refusal(400, type(e).__name__, str(e)) from None
        raise Refusal(404, "NotFound", f"no route {method} {path}")


def _kind(entry: Any) -> str:
    name = type(entry).__name__
    return {"TableEntry": "table", "IndexEntry": "index"}.get(name, "materialized-view")


def _rows_of(result: Any) -> list[tuple[Any, int]]:
    rows = getattr(result, "rows", result)
    return [(tuple(r), int(n)) for r, n in rows]
