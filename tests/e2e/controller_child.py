"""A controller to SIGKILL: ``python controller_child.py DATA_DIR [EXECUTOR]``.

Opens (or restores) an environment with one managed replica on DATA_DIR,
creates table ``ledger`` and index ``by_id`` unless the catalog has them, then
appends batches of five rows forever, printing one JSON line per
acknowledged append: ``{"ack": ts, "rows": [[id, amount], ...]}``. The first
line is ``{"ready": true}``.
"""

from __future__ import annotations

import json
import sys
from itertools import count

import anyio

from tidegate.dsl import Schema
from tidegate.runtime.environment import Environment
from tidegate.spec.frontier import LagWriteFrontier

SCHEMA = Schema.of(("id", "int64", False), ("amount", "int64", False))


async def main(data_dir: str, executor: str) -> None:
    async with Environment.open(data_dir, replicas=1, executor=executor) as env:
        names = {e.name for e in env.state.entries()}
        if "ledger" not in names:
            await env.create_table("ledger", SCHEMA)
        if "by_id" not in names:
            await env.create_index(env.table("ledger"), ["id"], name="by_id")
            # the test reads both at acknowledged times after a restart: keep ten minutes
            for name in ("ledger", "by_id"):
                await env.set_read_policy(name, LagWriteFrontier(600_000, 1_000))
        print(json.dumps({"ready": True}), flush=True)
        for n in count():
            rows = [(n * 5 + i, (n * 5 + i) * 3) for i in range(5)]
            ts = await env.append("ledger", rows)
            print(json.dumps({"ack": ts, "rows": [list(r) for r in rows]}), flush=True)
            await anyio.sleep(0.02)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "python")
