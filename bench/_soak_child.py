"""The controller the runtime soak kills: ``python bench/_soak_child.py DATA_DIR FIRST_ID``.

Opens (or restores) an environment with two managed replicas (Python
executor) on DATA_DIR; creates table ``ledger``, index ``by_id`` and
materialized view ``totals`` (a count and sum over the ledger) unless the
catalog has them. Then it prints ``{"ready": true, "at": T, "rows": [...], "totals": [...]}``
(the ids in ``by_id`` and the rows of ``totals`` at one time T, so the soak
can check nothing was lost across the restart and the view agrees)
and appends single rows with ids from FIRST_ID on, printing
``{"ack": ts, "id": id}`` for each acknowledged append. Every fifth append it
peeks ``by_id`` at the freshest time and checks its own acknowledged rows are
there (read-your-writes, strict serializability's visible part); a violation
is printed as ``{"violation": ...}`` and ends the process with status 3.
"""

from __future__ import annotations

import itertools
import json
import sys

import anyio

from tidegate.dsl import Schema, count, sum_
from tidegate.runtime.environment import Environment
from tidegate.spec.errors import SinceViolation

SCHEMA = Schema.of(("id", "int64", False), ("amount", "int64", False))


def say(**fields: object) -> None:
    print(json.dumps(fields), flush=True)


async def main(data_dir: str, first_id: int) -> None:
    async with Environment.open(data_dir, replicas=2, executor="python") as env:
        names = {e.name for e in env.state.entries()}
        if "ledger" not in names:
            await env.create_table("ledger", SCHEMA)
        if "by_id" not in names:
            await env.create_index(env.table("ledger"), ["id"], name="by_id")
        if "totals" not in names:
            totals = env.table("ledger").group_by().agg(count(), sum_("amount"))
            await env.create_materialized_view("totals", totals)
        while True:  # both at one time; each keeps 1 s of history, so a slow first read may retry
            at = await env.freshest("by_id")
            try:
                stored = await env.peek("by_id", at)
                totals = [list(row) for row, n in await env.peek("totals", at) for _ in range(n)]
                break
            except SinceViolation:
                continue
        say(
            ready=True, at=at, rows=sorted(r[0] for r, n in stored for _ in range(n)), totals=totals
        )
        mine: set[int] = set()
        for n in itertools.count():
            rid = first_id + n
            ts = await env.append("ledger", [(rid, rid * 3)])
            mine.add(rid)
            say(ack=ts, id=rid)
            if n % 5 == 4:
                seen = {r[0] for r, _ in await env.peek("by_id")}
                missing = mine - seen
                if missing:
                    say(
                        violation=f"acknowledged ids missing from a fresh peek: {sorted(missing)[:5]}"
                    )
                    sys.exit(3)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], int(sys.argv[2]))
