"""The short scenario the simulator's tool tests share, and the mutant they break it with.

Without the SQL clients: the tools need a scenario whose short runs sometimes pass with the
mutant and sometimes fail, and the SQL clients' reads add ways to see it (so nearly every seed
fails) while their actions crowd out the subscribes the mutant needs (so nearly none does).
"""

from __future__ import annotations

from dataclasses import replace

from tidegate.sim.scenario import small

QUICK = replace(
    small(),
    name="quick",
    duration_ms=2_000,
    quiet_ms=6_000,
    workload=replace(small().workload, sql_query=0, sql_insert=0, sql_ddl=0),
)
MUTANT = "subscribe_loses_retractions"
