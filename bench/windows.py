"""Top-K per group and a window function, maintained, beside DuckDB recomputing (``python bench/windows.py``).

A table of ``--rows`` rows (1,000,000 by default) in ``--groups`` groups gets
``--steps`` changes of ``--change`` updates each (half inserts, half deletes
of live rows). Two views, written in SQL and lowered by tidegate:

* ``topk``: ``SELECT g, id, v FROM (SELECT g, id, v, row_number() OVER
  (PARTITION BY g ORDER BY v DESC, id) AS rn FROM t) s WHERE rn <= 3``,
  which lowers to a ``TopK`` of 3 per group under the window;
* ``running``: ``SELECT id, sum(v) OVER (PARTITION BY g ORDER BY id),
  lag(v) OVER (PARTITION BY g ORDER BY id) FROM t``, a ``Window`` that
  recomputes the partitions a change touches.

tidegate maintains each in the ``PythonExecutor`` (one step per change);
DuckDB applies the change to its table and recomputes the query from scratch
(``CREATE OR REPLACE TABLE ... AS``, so the whole answer is produced, as a
maintained view holds it). Figures are per change: median CPU time
(``time.process_time``, which other processes on a shared machine do not
inflate) and median wall time, for both, printed side by side. Pathway has
no window functions or per-group Top-K operator to compare with.

Options: ``--rows``, ``--groups``, ``--steps``, ``--change``, ``--seed``.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import sys
import time
from typing import Any

import duckdb
import pyarrow as pa

from tidegate.spec.executor import PythonExecutor
from tidegate.spec.frontier import Antichain
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import Schema
from tidegate.spec.protocol.types import BuildDesc, DataflowDescription, IndexExport, SourceImport
from tidegate.spec.sql import CatalogItem, DictCatalog, SelectStmt, lower_query, parse_one

SRC, OBJ, IDX = GlobalId.user(1), GlobalId.user(2), GlobalId.user(3)
SCHEMA = Schema.of(("id", "int64", False), ("g", "int64", False), ("v", "int64", False))
CATALOG = DictCatalog([CatalogItem("t", SRC, SCHEMA, "table")])

QUERIES = {
    "topk": "SELECT g, id, v FROM (SELECT g, id, v, row_number() OVER "
    "(PARTITION BY g ORDER BY v DESC, id) AS rn FROM t) s WHERE rn <= 3",
    "running": "SELECT id, sum(v) OVER (PARTITION BY g ORDER BY id) AS s, "
    "lag(v) OVER (PARTITION BY g ORDER BY id) AS prev FROM t",
}


def dataflow(sql: str) -> DataflowDescription:
    stmt = parse_one(sql)
    assert isinstance(stmt, SelectStmt)
    plan = lower_query(stmt.query, CATALOG, (), stmt.sql).relation()
    return DataflowDescription(
        "windows",
        source_imports=(SourceImport(SRC),),
        objects_to_build=(BuildDesc(OBJ, plan),),
        index_exports=(IndexExport(IDX, OBJ, ()),),
        as_of=Antichain([0]),
    )


class Data:
    """The table's rows, and changes: inserts of new ids, deletes of live rows."""

    def __init__(self, rows: int, groups: int, seed: int) -> None:
        self.rng = random.Random(seed)
        self.groups = groups
        self.live = [self.row(i) for i in range(rows)]
        self.next_id = rows

    def row(self, i: int) -> tuple[int, int, int]:
        return (i, self.rng.randrange(self.groups), self.rng.randrange(1_000_000))

    def change(self, n: int) -> tuple[list[tuple[int, int, int]], list[tuple[int, int, int]]]:
        added = [self.row(self.next_id + k) for k in range(n // 2)]
        self.next_id += n // 2
        removed = []
        for _ in range(n - n // 2):
            i = self.rng.randrange(len(self.live))
            self.live[i], self.live[-1] = self.live[-1], self.live[i]
            removed.append(self.live.pop())
        self.live.extend(added)
        return added, removed


def tidegate_run(sql: str, a: Any) -> tuple[list[float], list[float], float]:
    data = Data(a.rows, a.groups, a.seed)
    ex = PythonExecutor()
    h = ex.install(dataflow(sql))
    t0 = time.perf_counter()
    ex.feed(h, SRC, [(r, 0, 1) for r in data.live], Antichain([1]))
    ex.step()
    ex.allow_compaction(IDX, Antichain([0]))
    load = time.perf_counter() - t0
    gc.collect()
    gc.freeze()
    cpu, wall = [], []
    for t in range(1, a.steps + 1):
        added, removed = data.change(a.change)
        ups = [(r, t, 1) for r in added] + [(r, t, -1) for r in removed]
        w0, c0 = time.perf_counter(), time.process_time()
        ex.feed(h, SRC, ups, Antichain([t + 1]))
        ex.step()
        ex.allow_compaction(IDX, Antichain([t]))
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    gc.unfreeze()
    return cpu, wall, load


def duckdb_run(sql: str, a: Any) -> tuple[list[float], list[float]]:
    data = Data(a.rows, a.groups, a.seed)
    con = duckdb.connect()
    con.execute("SET threads = 1")  # one core, as the PythonExecutor uses
    con.execute("CREATE TABLE t (id BIGINT, g BIGINT, v BIGINT)")
    cols = list(zip(*data.live, strict=True))
    rows = pa.table({"id": cols[0], "g": cols[1], "v": cols[2]})
    con.register("rows", rows)
    con.execute("INSERT INTO t SELECT * FROM rows")
    con.unregister("rows")
    cpu, wall = [], []
    for _ in range(a.steps):
        added, removed = data.change(a.change)
        w0, c0 = time.perf_counter(), time.process_time()
        if added:
            con.executemany("INSERT INTO t VALUES (?, ?, ?)", added)
        if removed:
            con.execute(f"DELETE FROM t WHERE id IN ({', '.join(str(r[0]) for r in removed)})")
        con.execute(f"CREATE OR REPLACE TABLE answer AS {sql}")
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    con.close()
    return cpu, wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--groups", type=int, default=10_000)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--change", type=int, default=10)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    print(
        f"{a.rows:,} rows in {a.groups:,} groups; {a.steps} changes of {a.change} updates "
        "(half inserts, half deletes); per change, medians"
    )
    for name, sql in QUERIES.items():
        t_cpu, t_wall, load = tidegate_run(sql, a)
        d_cpu, d_wall = duckdb_run(sql, a)
        tc, dc = statistics.median(t_cpu), statistics.median(d_cpu)
        print(
            f"{name:8} tidegate (PythonExecutor, maintained): cpu {tc * 1e3:8.2f} ms, "
            f"wall {statistics.median(t_wall) * 1e3:8.2f} ms  (initial load {load:.1f} s)\n"
            f"{'':8} DuckDB (recomputed from scratch):      cpu {dc * 1e3:8.2f} ms, "
            f"wall {statistics.median(d_wall) * 1e3:8.2f} ms\n"
            f"{'':8} DuckDB cpu / tidegate cpu: {dc / tc:.1f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
