"""A controller that appends with request ids: ``python idempotent_child.py DATA_DIR MODE [N]``.

Opens (or restores) an environment without replicas on DATA_DIR, creates table
``ledger`` (``id``, ``amount``) unless the catalog has it, prints
``{"ready": true}``, then appends request ``n`` = 0, 1, 2, ... as the row
``(n, n * 3)`` with request id ``req-n``, printing ``{"sent": n}`` before and
``{"ack": ts, "n": n}`` (or ``{"error": type, "n": n}``) after each.

Modes:

* ``stall N``: request ``N``'s write lands in the table's shard, then the
  process prints ``{"landed": N}`` and stops in the middle of that commit (its
  acknowledgement never comes): the test SIGKILLs it there.
* ``until-fenced``: four clients append at once until one is refused as
  fenced (another environment was promoted), which prints ``{"fenced": n}``;
  then the process exits (the others' appends in flight end unanswered).
"""

from __future__ import annotations

import json
import sys
import time
from itertools import count
from typing import Any

import anyio

from tidegate.dsl import Schema
from tidegate.runtime.environment import Environment
from tidegate.runtime.errors import EnvironmentFenced
from tidegate.spec.frontier import LagWriteFrontier

SCHEMA = Schema.of(("id", "int64", False), ("amount", "int64", False))


def say(**line: Any) -> None:
    print(json.dumps(line), flush=True)


async def main(data_dir: str, mode: str, stall_at: int) -> None:
    async with Environment.open(data_dir, replicas={}, tick_ms=100) as env:
        if "ledger" not in {e.name for e in env.state.entries()}:
            await env.create_table("ledger", SCHEMA)
            await env.set_read_policy("ledger", LagWriteFrontier(600_000, 1_000))
        if mode == "stall":
            write = env.store.compare_and_append

            def stalling(*args: Any, **kwargs: Any) -> Any:
                upper = write(*args, **kwargs)
                if f"req-{stall_at}" in (kwargs.get("requests") or {}):
                    say(landed=stall_at)
                    time.sleep(3600)  # in the middle of the commit: the test kills us here
                return upper

            env.store.compare_and_append = stalling  # type: ignore[method-assign]
        say(ready=True)
        numbers = count()

        async def appender() -> None:
            for n in numbers:
                say(sent=n)
                try:
                    ts = await env.append("ledger", [(n, n * 3)], request_id=f"req-{n}")
                except EnvironmentFenced:
                    say(fenced=n)
                    tg.cancel_scope.cancel()
                    return
                except Exception as e:
                    say(error=type(e).__name__, n=n)
                    continue
                say(ack=ts, n=n)
                await anyio.sleep(0.002)

        # Four clients at once: a commit is nearly always in flight (and groups several).
        async with anyio.create_task_group() as tg:
            for _ in range(1 if mode == "stall" else 4):
                tg.start_soon(appender)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else -1)
