"""Arrow tables, record batches and pandas DataFrames in (append) and out (peek, subscribe)."""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path

import anyio
import pandas as pd
import pyarrow as pa
import pytest

from tidegate.dsl import Schema
from tidegate.replica.testing import in_process_replica as replica
from tidegate.runtime import Environment, SyncEnvironment
from tidegate.runtime.frames import PandasMissing, PeekAnswer, SubscribeChanges, frame_updates
from tidegate.spec.compute import SubscribeBatchOut
from tidegate.spec.errors import ArityMismatch, TypeMismatch
from tidegate.spec.frontier import Antichain
from tidegate.spec.ids import GlobalId

pytestmark = pytest.mark.timeout(120)

ORDERS = Schema.of(
    ("id", "int64", False),
    ("who", "string"),
    ("amount", "float64"),
    ("day", "date"),
    ("at", "timestamp"),
    ("paid", "bool"),
)
DAY = dt.date(2024, 1, 2)
AT = dt.datetime(2024, 1, 2, 3, 4, 5)


def _arrow() -> pa.Table:
    return pa.table(
        {
            "id": pa.array([1, 2], pa.int64()),
            "who": ["ann", None],
            "amount": [1.5, 2.0],
            "day": pa.array([DAY, DAY], pa.date32()),
            "at": pa.array([AT, AT], pa.timestamp("us")),
            "paid": [True, False],
        }
    )


ROWS = [(1, "ann", 1.5, DAY, AT, True), (2, None, 2.0, DAY, AT, False)]


# -- checking frames (no environment) -----------------------------------------------------------------


def test_a_table_a_batch_and_a_dataframe_become_updates() -> None:
    table = _arrow()
    assert frame_updates(ORDERS, table, "orders") == [(r, 1) for r in ROWS]
    (batch,) = table.to_batches()
    assert frame_updates(ORDERS, batch, "orders") == [(r, 1) for r in ROWS]
    # columns by name, in any order; a diff column gives each row's diff
    df = table.to_pandas()[["paid", "at", "day", "amount", "who", "id"]].assign(diff=[3, -1])
    got = frame_updates(ORDERS, df, "orders")
    assert [(r[0], r[1], d) for r, d in got] == [(1, "ann", 3), (2, None, -1)]
    assert got[0][0][4] == AT and got[0][0][3] == DAY


@pytest.mark.parametrize(
    ("change", "error", "says"),
    [
        (lambda t: t.drop_columns(["paid"]), ArityMismatch, "5 columns"),
        (lambda t: t.append_column("extra", pa.array([1, 2])), ArityMismatch, "7 columns"),
        (lambda t: t.rename_columns([*t.column_names[:-1], "payed"]), TypeMismatch, "payed"),
        (
            lambda t: t.set_column(0, "id", pa.array(["1", "2"])),
            TypeMismatch,
            "column 'id' is Arrow string",
        ),
        (
            lambda t: t.set_column(0, "id", pa.array([1, None], pa.int64())),
            TypeMismatch,
            "NULL in non-nullable column 'id'",
        ),
        (
            lambda t: t.set_column(4, "at", pa.array([AT, AT], pa.timestamp("us", tz="UTC"))),
            TypeMismatch,
            "column 'at'",
        ),
        (lambda t: t.append_column("diff", pa.array([1.0, 2.0])), TypeMismatch, "'diff'"),
        (
            lambda t: t.set_column(0, "id", pa.array([1, 2**64 - 1], pa.uint64())),
            TypeMismatch,
            "is not a int64",
        ),
    ],
)
def test_a_frame_that_does_not_fit_the_schema_is_refused(change, error, says) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error, match=says):
        frame_updates(ORDERS, change(_arrow()), "orders")


def test_results_compare_equal_to_lists_and_convert() -> None:
    result = PeekAnswer([(r, 1) for r in ROWS], ORDERS)
    assert result == [(r, 1) for r in ROWS] and isinstance(result, list)
    table = result.to_arrow()
    assert table.column_names == [*ORDERS.names, "count"]
    assert table.schema.field("id").type == pa.int64() and not table.schema.field("id").nullable
    df = result.to_pandas()
    assert df["who"][0] == "ann" and df["who"].isna().tolist() == [False, True]
    assert list(df["count"]) == [1, 1]
    plain = SubscribeBatchOut(
        "default", GlobalId.transient(1), Antichain([1]), Antichain([2]), ((1, ROWS[0], 1),)
    )
    batch = SubscribeChanges.of(plain, ORDERS)
    assert batch == plain and plain == batch
    assert batch.to_arrow().column_names == ["time", *ORDERS.names, "diff"]
    assert batch.to_pandas()["diff"].tolist() == [1]


def test_to_pandas_without_pandas_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas now raises ImportError
    result = PeekAnswer([(ROWS[0], 1)], ORDERS)
    assert result.to_arrow().num_rows == 1  # Arrow needs no pandas
    with pytest.raises(PandasMissing, match=r"pip install 'tidegate\[pandas\]'"):
        result.to_pandas()


# -- through an environment -------------------------------------------------------------------------


def test_append_frames_then_peek_and_subscribe_as_frames(tmp_path: Path) -> None:
    async def main() -> None:
        with replica(tmp_path) as address, anyio.fail_after(90):
            async with Environment.open(tmp_path, replicas={"r1": address}, tick_ms=50) as env:
                await env.create_table("orders", ORDERS)
                await env.append("orders", _arrow())
                df = pd.DataFrame({"id": [3], "who": ["cy"], "amount": [4.0], "day": [DAY]})
                df["at"] = pd.Series([AT], dtype="datetime64[us]")
                df["paid"] = [True]
                await env.append_many([("orders", df), ("orders", _arrow().slice(0, 1))])
                with pytest.raises(ArityMismatch):
                    await env.append("orders", df.drop(columns=["paid"]))
                idx = await env.create_index(env.table("orders"), ["id"])
                got = await env.peek(idx)
                assert isinstance(got, PeekAnswer)
                assert sorted(got) == [
                    (ROWS[0], 2),
                    (ROWS[1], 1),
                    ((3, "cy", 4.0, DAY, AT, True), 1),
                ]
                table = got.to_arrow()
                assert table.num_rows == 3 and sorted(table.column("count").to_pylist()) == [
                    1,
                    1,
                    2,
                ]
                frame = (await env.peek("orders")).to_pandas()
                assert sorted(frame["id"]) == [1, 2, 3]
                sub = await env.subscribe("orders")
                async with sub:
                    first = await sub.__anext__()
                    assert isinstance(first, SubscribeChanges)
                    snap = first.to_pandas()
                    assert sorted(zip(snap["id"], snap["diff"], strict=True)) == [
                        (1, 2),
                        (2, 1),
                        (3, 1),
                    ]

    anyio.run(main)


def test_the_sync_environment_appends_a_dataframe(tmp_path: Path) -> None:
    with (
        replica(tmp_path) as address,
        SyncEnvironment.open(tmp_path, replicas={"r1": address}, tick_ms=50) as env,
    ):
        env.create_table("t", Schema.of(("x", "int64", False)))
        env.append("t", pd.DataFrame({"x": [1, 2, 2], "diff": [1, 1, -1]}))
        env.append_many([("t", pa.table({"x": pa.array([5], pa.int32())}))])
        got = env.peek("t")
        assert sorted(got) == [((1,), 1), ((5,), 1)]
        assert sorted(got.to_pandas()["x"]) == [1, 5]
