"""Views through the Environment: named plans in the catalog, indexed, inlined, dropped, restored."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tidegate.dsl import Schema, col, count
from tidegate.runtime import Environment
from tidegate.runtime.errors import HasDependents, UnknownCatalogObject

pytestmark = pytest.mark.processes

ORDERS = Schema.of(("id", "int64", False), ("customer", "string", False), ("amount", "int64"))


def test_a_view_is_indexed_inlined_dropped_and_restored(tmp_path: Path) -> None:
    async def main() -> None:
        with anyio.fail_after(120):
            async with Environment.open(tmp_path, replicas=1, executor="python") as env:
                await env.create_table("orders", ORDERS)
                await env.append("orders", [(1, "ann", 10), (2, "bob", 25), (3, "ann", 40)])
                big = env.table("orders").filter(col("amount") > 20)
                vid = await env.create_view("big", big, definition="CREATE VIEW big AS ...")
                per = env.table("big").group_by("customer").agg(count())
                await env.create_view("big_per_customer", per, views=["big"])
                assert env.resolve("big") == vid
                assert env.state.definition(vid) == "CREATE VIEW big AS ..."
                assert [e.name for e in env.state.entries()] == ["orders"]  # no collections
                with pytest.raises(UnknownCatalogObject, match="is a view"):
                    await env.peek("big")
                idx = await env.create_index("big_per_customer", ["customer"], name="bpc")
                assert sorted(await env.peek(idx)) == [(("ann", 1), 1), (("bob", 1), 1)]
                with pytest.raises(HasDependents):
                    await env.drop("big")
            async with Environment.open(tmp_path, replicas=1, executor="python") as env:
                assert env.state.view("big_per_customer") is not None  # restored
                await env.append("orders", [(4, "ann", 99)])
                assert sorted(await env.peek("bpc")) == [(("ann", 2), 1), (("bob", 1), 1)]
                gone = await env.drop("big", cascade=True)
                assert sorted(str(g) for g in gone) == ["u2", "u3", "u4"]  # both views, the index
                assert env.state.views == () and [e.name for e in env.state.entries()] == ["orders"]

    anyio.run(main)
