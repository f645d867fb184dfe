"""The `tidegate` command: parsing, the control endpoint behind `up`, and `status/peek/append`.

The endpoint and the client commands are exercised here over real loopback
HTTP against a small in-test environment (the real ``Environment`` runs in
``tests/e2e/``); ``tidegate demo`` itself runs for real in ``tests/e2e/``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import io
import json
import math
import os
import re
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from tidegate.cli import main
from tidegate.commands.control import (
    ControlClient,
    ControlError,
    ControllerInfo,
    NoController,
    serve_control,
)
from tidegate.commands.ddl import policy_to_json
from tidegate.commands.render import ProgressBar, format_policy, format_table, status_table
from tidegate.commands.service import ControlService, lag_ms
from tidegate.commands.values import RowsError, dumps, parse_rows, row_to_json
from tidegate.dsl import count, table
from tidegate.runtime.catalog import CatalogState, IndexEntry, TableEntry
from tidegate.runtime.controller.driver import ReplicaInfo
from tidegate.runtime.errors import UnknownCatalogObject
from tidegate.runtime.hydration import HydrationInfo
from tidegate.spec.errors import SinceViolation
from tidegate.spec.frontier import Antichain
from tidegate.spec.frontier.read_policy import (
    LagWriteFrontier,
    Multiple,
    NoPolicy,
    ReadPolicy,
    StepBack,
    ValidFrom,
)
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import Schema


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_unknown_commands_are_refused_with_usage(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit:
        main(["frobnicate"])
    assert exit.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_every_product_command_is_registered(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for name in ("up", "status", "peek", "append", "demo", "sim"):
        assert name in out


# -- rows as JSON ------------------------------------------------------------------------------

SCHEMA = Schema.of(
    ("customer", "string", False), ("amount", "int64", False), ("rate", "float64"), ("day", "date")
)


def test_rows_convert_by_column_type_and_pairs_carry_diffs() -> None:
    rows = parse_rows('[["ann", 20, 1, "2024-05-01"], [["bob", 5, null, null], -2]]', SCHEMA)
    assert rows == [(("ann", 20, 1.0, dt.date(2024, 5, 1)), 1), (("bob", 5, None, None), -2)]
    assert row_to_json(rows[0][0]) == ["ann", 20, 1.0, "2024-05-01"]


def test_non_finite_doubles_travel_as_postgresql_s_text_in_strict_json() -> None:
    """JSON has no NaN or infinities: answers write them as ``"NaN"``, ``"Infinity"``,
    ``"-Infinity"`` (as Materialize's HTTP API does), at any depth, and ``float64`` columns of
    rows take those strings back; strings elsewhere stay strings."""
    payload = {"rows": [[["a", math.nan, 1.5], 1], [["b", math.inf, -math.inf], 2]], "t": 3}
    text = dumps(payload)
    assert json.loads(text, parse_constant=lambda c: pytest.fail(f"non-JSON token {c}")) == {
        "rows": [[["a", "NaN", 1.5], 1], [["b", "Infinity", "-Infinity"], 2]],
        "t": 3,
    }
    assert dumps({"a": [1.5, "NaN"]}) == '{"a": [1.5, "NaN"]}'  # finite: as json.dumps
    rows = parse_rows('[["ann", 1, "NaN", null], ["bob", 2, "Infinity", null]]', SCHEMA)
    assert rows[0][0][2] != rows[0][0][2] and rows[1][0][2] == math.inf
    rows = parse_rows('[["ann", 1, "-Infinity", null]]', SCHEMA)
    assert rows[0][0][2] == -math.inf
    with pytest.raises(RowsError, match="NaN"):
        parse_rows('[["NaN", "NaN", 1.0, null]]', SCHEMA)  # a string column's "NaN" is text


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{}", "JSON list"),
        ("[1]", "row 0"),
        ('[["ann", 20, 1.0]]', "3 values for 4 columns"),
        ('[["ann", "x", 1.0, null]]', "not a int64"),
        ("[[null, 1, 1.0, null]]", "NULL in non-nullable"),
        ('[["ann", 1, 1.0, "May 1"]]', "not an ISO date"),
        ('[[["ann", 1, 1.0, null], 0]]', "non-zero integer diff"),
        ("[[", "not valid JSON"),
    ],
)
def test_bad_rows_are_refused_naming_the_problem(text: str, says: str) -> None:
    with pytest.raises(RowsError, match=says):
        parse_rows(text, SCHEMA)


# -- text output -----------------------------------------------------------------------------


def test_tables_align_columns_under_a_rule() -> None:
    text = format_table(["A", "LONGER"], [[1, None], ["wide value", 2]])
    assert text.splitlines() == ["A           LONGER", "----------  ------", "1", "wide value  2"]


def test_status_table_shows_frontiers_lag_and_replicas() -> None:
    text = status_table(
        {
            "collections": [
                {
                    "name": "t",
                    "id": "u1",
                    "kind": "table",
                    "since": [5],
                    "upper": [9],
                    "lag_ms": 1500,
                },
                {
                    "name": "gone",
                    "id": "u2",
                    "kind": "index",
                    "since": [],
                    "upper": [],
                    "lag_ms": None,
                },
            ],
            "replicas": [{"name": "r1", "status": "online"}],
        }
    )
    row = text.splitlines()[2]
    assert row.split()[:3] == ["t", "u1", "table"]
    # Times show their ISO form beside the number; no read policy set: "-".
    assert "5 (1970-01-01T00:00:00.005Z)" in row and "9 (1970-01-01T00:00:00.009Z)" in row
    assert row.rstrip().endswith("1.5 s   -            -")
    assert "closed" in text and "r1    online" in text
    assert "metrics" not in text  # no metrics endpoint: no line about it


@pytest.mark.parametrize(
    ("policy", "shown"),
    [
        (None, "-"),
        (LagWriteFrontier(lag=1000, max_granularity=1000), "lag 1000ms"),
        (LagWriteFrontier(lag=60_000, max_granularity=500), "lag 60000ms/500ms"),
        (ValidFrom(Antichain([42])), "valid-from 42"),
        (ValidFrom(Antichain()), "valid-from []"),
        (StepBack(), "step-back"),
        (NoPolicy(Antichain([5])), "hold [5]"),
        (
            Multiple([StepBack(), ValidFrom(Antichain([3]))]),
            "step-back + valid-from 3",
        ),
    ],
)
def test_read_policies_show_compactly(policy: ReadPolicy | None, shown: str) -> None:
    assert format_policy(None if policy is None else policy_to_json(policy)) == shown


def test_status_table_shows_read_policies_and_the_metrics_address() -> None:
    text = status_table(
        {
            "collections": [
                {
                    "name": "t",
                    "id": "u1",
                    "kind": "table",
                    "since": [5],
                    "upper": [9],
                    "lag_ms": 0,
                    "read_policy": {"kind": "valid-from", "time": 5},
                },
            ],
            "replicas": [],
            "metrics": "127.0.0.1:9464",
        }
    )
    lines = text.splitlines()
    assert lines[0].split() == [
        *("NAME", "ID", "KIND", "SINCE", "UPPER", "LAG", "READ", "POLICY", "HYDRATION")
    ]
    assert lines[2].split() == [
        *("t", "u1", "table", "5", "(1970-01-01T00:00:00.005Z)", "9"),
        *("(1970-01-01T00:00:00.009Z)", "0", "ms", "valid-from", "5", "-"),
    ]
    assert lines[-1] == "metrics: http://127.0.0.1:9464/metrics"


def test_status_table_shows_where_each_replica_serves_metrics() -> None:
    replicas = [
        {"name": "r1", "status": "connected", "metrics": "127.0.0.1:40001"},
        {"name": "r2", "status": "connected", "metrics": None},  # serves none: no line
        {"name": "storage", "status": "connected", "metrics": "127.0.0.1:40002"},
    ]
    running = {"collections": [], "replicas": replicas, "metrics": "127.0.0.1:9464"}
    assert status_table(running).splitlines()[-3:] == [
        "metrics: http://127.0.0.1:9464/metrics",
        "metrics of replica r1: http://127.0.0.1:40001/metrics",
        "metrics of replica storage: http://127.0.0.1:40002/metrics",
    ]
    starting = {"state": "starting", "replicas": replicas[:1], "metrics": None}
    assert status_table(starting).splitlines()[-1] == (
        "metrics of replica r1: http://127.0.0.1:40001/metrics"
    )


@pytest.mark.processes
@pytest.mark.timeout(180)
def test_up_with_metrics_serves_the_replicas_metrics_too(tmp_path: Path) -> None:
    """``tidegate up --metrics``: the managed replica serves its own metrics, on a port of its
    own that ``status`` (text and JSON) shows."""
    data = tmp_path / "data"
    tidegate = [sys.executable, "-m", "tidegate"]
    up = subprocess.Popen(
        [
            *(*tidegate, "up", "--data-dir", str(data)),
            *("--executor", "python", "--metrics", "127.0.0.1:0"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )

    def status(*flags: str) -> str:
        done = subprocess.run(
            [*tidegate, "status", "--data-dir", str(data), *flags],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    try:
        assert up.stdout is not None
        controller = None
        for line in up.stdout:
            if m := re.search(r"metrics on http://(\S+)/metrics", line):
                controller = m.group(1)
            if "control endpoint" in line:
                break
        assert controller is not None, "tidegate up printed no metrics address"
        status("--wait", "--timeout", "120")
        got = json.loads(status("--json"))
        assert got["metrics"] == controller
        (r1,) = [r for r in got["replicas"] if r["name"] == "r1"]
        assert r1["metrics"] is not None and r1["metrics"] != controller
        assert r1["metrics"].startswith("127.0.0.1:")
        with urllib.request.urlopen(f"http://{r1['metrics']}/metrics", timeout=10) as r:
            text = r.read().decode()
        assert "tidegate_replica_commands_total" in text
        assert f"metrics of replica r1: http://{r1['metrics']}/metrics" in status()
    finally:
        up.send_signal(signal.SIGTERM)
        rest, _ = up.communicate(timeout=60)
    assert up.returncode == 0, rest


def test_progress_bar_prints_one_final_line_when_not_a_terminal() -> None:
    out = io.StringIO()
    bar = ProgressBar(4, "load", width=8, out=out)
    for _ in range(4):
        bar.advance()
    bar.finish("done")
    assert out.getvalue() == "load [########] 4/4 100% done\n"


def test_lag_is_wall_clock_minus_the_last_complete_time() -> None:
    assert lag_ms(Antichain([1_000]), 1_500) == 501
    assert lag_ms(Antichain([1_501]), 1_500) == 0
    assert lag_ms(Antichain([2_000]), 1_500) == 0
    assert lag_ms(Antichain(), 1_500) is None


# -- the control endpoint over loopback, against an in-test environment ------------------------------


class ScriptedEnvironment:
    """What ``ControlService`` asks of an environment, over one table and one index, in memory."""

    def __init__(self) -> None:
        self.t = GlobalId.user(1)
        self.i = GlobalId.user(2)
        totals = table(self.t, SCHEMA).group_by("customer").agg(count())
        self.state = CatalogState(
            tables=(TableEntry("orders", self.t, SCHEMA),),
            indexes=(IndexEntry("totals", self.i, totals.plan, (0,)),),
        )
        self.rows: list[tuple[tuple[Any, ...], int, int]] = []
        self.now = 100
        self.waited: list[int] = []
        self.copied: list[tuple[GlobalId, str, int | None]] = []

        self.driver = SimpleNamespace(collection_errors={})
        self.hydrations: list[HydrationInfo] = [HydrationInfo(self.i, "r1", True, 0.25, "totals")]

    def frontiers(self, id: GlobalId) -> tuple[Antichain, Antichain]:
        return Antichain([10]), Antichain([self.now])

    def replicas(self) -> list[ReplicaInfo]:
        return [ReplicaInfo("default", "r1", "connected", 3, "127.0.0.1:9", True, 1, "")]

    def hydration(self) -> list[HydrationInfo]:
        return self.hydrations

    def read_policy(self, id: GlobalId) -> ReadPolicy:
        return self.state.read_policy(id) or LagWriteFrontier(1000, 1000)

    def resolve(self, ref: str) -> GlobalId:
        for e in self.state.entries():
            if ref in (e.name, str(e.id)):
                return e.id
        raise UnknownCatalogObject(f"no catalog object named {ref!r}")

    async def freshest(self, id: GlobalId) -> int:
        return self.now - 1

    async def hold_fresh(self, ids: list[GlobalId]) -> SimpleNamespace:
        return SimpleNamespace(time=self.now - 1, release=lambda: None)

    def schema(self, id: GlobalId) -> Schema:
        return self.state.schema_of(id)

    async def wait_for(self, id: GlobalId, time: int) -> None:
        self.waited.append(time)

    async def append(self, table: str, rows: list[tuple[tuple[Any, ...], int]]) -> int:
        self.now += 1
        self.rows.extend((r, self.now - 1, d) for r, d in rows)
        return self.now - 1

    async def peek(
        self, id: GlobalId, at: int | None = None, key: tuple[Any, ...] | None = None
    ) -> list[tuple[tuple[Any, ...], int]]:
        t = self.now - 1 if at is None else at
        if t < 10:
            raise SinceViolation(id, Antichain([10]), t)
        acc: dict[tuple[Any, ...], int] = {}
        for r, rt, d in self.rows:
            if rt <= t:
                k = r if id == self.t else (r[0],)
                acc[k] = acc.get(k, 0) + d
        if id == self.i:  # the index: count of orders per customer
            acc = {(c, n): 1 for (c,), n in acc.items() if n}
        out = [(r, n) for r, n in sorted(acc.items()) if n]
        if key is not None:
            out = [(r, n) for r, n in out if r[0] == key[0]]
        return out

    async def copy_to(self, id: GlobalId, url: str, *, at: int | None = None) -> int:
        self.copied.append((id, url, at))
        return sum(n for _, n in await self.peek(id, at))


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path


async def _serving(
    env: ScriptedEnvironment,
    data_dir: Path,
    tg: anyio.abc.TaskGroup,
    metrics: str | None = None,
) -> ControllerInfo:
    token = "t0ken"
    service = ControlService(env, clock_ms=lambda: 1_000, metrics=metrics)
    address = await tg.start(serve_control, service.handle, token)
    info = ControllerInfo(address, token, os.getpid(), str(data_dir), metrics)
    info.write()
    return info


def _cli(*argv: str) -> int:
    try:
        return main(list(argv))
    except SystemExit as e:
        return int(e.code or 0)


@pytest.mark.anyio
async def test_status_append_and_peek_commands_talk_to_the_controller(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = ScriptedEnvironment()
    async with anyio.create_task_group() as tg:
        await _serving(env, data_dir, tg)
        d = str(data_dir)
        rows = '[["ann", 20, 1.5, null], ["bob", 5, null, "2024-01-02"], ["ann", 1, null, null]]'
        assert (
            await anyio.to_thread.run_sync(
                _cli, "append", "orders", "--rows", rows, "--data-dir", d
            )
            == 0
        )
        out = capsys.readouterr().out
        assert "appended 3 row(s) to orders at 100 (1970-01-01T00:00:00.100Z) (durable)" in out
        assert env.rows[1] == (("bob", 5, None, dt.date(2024, 1, 2)), 100, 1)

        assert (
            await anyio.to_thread.run_sync(_cli, "peek", "totals", "--data-dir", d, "--json") == 0
        )
        got = json.loads(capsys.readouterr().out)
        assert got["rows"] == [[["ann", 2], 1], [["bob", 1], 1]] and got["id"] == "u2"

        assert (
            await anyio.to_thread.run_sync(_cli, "peek", "u2", "--key", "bob", "--data-dir", d) == 0
        )
        out = capsys.readouterr().out
        assert "totals (u2)" in out and "bob" in out and "ann" not in out

        assert await anyio.to_thread.run_sync(_cli, "status", "--data-dir", d) == 0
        out = capsys.readouterr().out
        assert "orders  u1  table" in out
        assert "r1    connected  default  -     3      127.0.0.1:9" in out
        assert out.splitlines()[0].startswith("controller: running (pid ")
        totals = next(line for line in out.splitlines() if line.startswith("totals"))
        assert totals.endswith("lag 1000ms (default)  r1 0.25 s")  # hydrated on r1 in 0.25 s
        tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_status_shows_read_policies_and_the_metrics_endpoint_in_text_and_json(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = ScriptedEnvironment()
    lag = LagWriteFrontier(lag=60_000, max_granularity=1_000)
    env.state = dataclasses.replace(env.state, read_policies=((env.t, lag),))
    async with anyio.create_task_group() as tg:
        await _serving(env, data_dir, tg, metrics="127.0.0.1:9464")
        d = str(data_dir)
        assert await anyio.to_thread.run_sync(_cli, "status", "--data-dir", d, "--json") == 0
        got = json.loads(capsys.readouterr().out)
        assert got["metrics"] == "127.0.0.1:9464"
        policies = {c["name"]: c["read_policy"] for c in got["collections"]}
        assert policies == {
            "orders": {"kind": "lag", "ms": 60_000, "granularity_ms": 1_000},
            "totals": None,
        }

        assert await anyio.to_thread.run_sync(_cli, "status", "--data-dir", d) == 0
        lines = capsys.readouterr().out.splitlines()
        rows = {line.split()[0]: line for line in lines[4:6]}
        assert rows["orders"].endswith("lag 60000ms           -")  # a table: always readable
        assert rows["totals"].endswith("lag 1000ms (default)  r1 0.25 s")
        assert lines[-1] == "metrics: http://127.0.0.1:9464/metrics"
        tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_status_without_a_metrics_endpoint_says_null(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with anyio.create_task_group() as tg:
        await _serving(ScriptedEnvironment(), data_dir, tg)
        d = str(data_dir)
        assert await anyio.to_thread.run_sync(_cli, "status", "--data-dir", d, "--json") == 0
        assert json.loads(capsys.readouterr().out)["metrics"] is None
        assert await anyio.to_thread.run_sync(_cli, "status", "--data-dir", d) == 0
        assert "metrics" not in capsys.readouterr().out
        tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_refusals_keep_their_type_and_change_nothing(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = ScriptedEnvironment()
    async with anyio.create_task_group() as tg:
        info = await _serving(env, data_dir, tg)
        client = ControlClient(info, timeout=10)
        call = anyio.to_thread.run_sync
        for body, kind in [
            ({"table": "nope", "rows": []}, "UnknownCollection"),
            ({"table": "totals", "rows": []}, "NotATable"),
            ({"table": "orders", "rows": [["ann"]]}, "BadRows"),
            ({"rows": []}, "BadRequest"),
        ]:
            with pytest.raises(ControlError) as e:
                await call(client.call, "POST", "/append", body)
            assert e.value.type == kind
        assert env.rows == []
        with pytest.raises(ControlError) as e:
            await call(client.call, "POST", "/peek", {"name": "orders", "at": 5})
        assert e.value.type == "SinceViolation" and env.waited == [5]

        intruder = ControlClient(ControllerInfo(info.address, "wrong", info.pid, info.data_dir))
        with pytest.raises(ControlError) as e:
            await call(
                intruder.call,
                "POST",
                "/append",
                {"table": "orders", "rows": [["x", 1, None, None]]},
            )
        assert e.value.type == "Unauthenticated" and env.rows == []

        d = str(data_dir)
        assert await call(_cli, "append", "orders", "--rows", "[[", "--data-dir", d) == 2
        assert await call(_cli, "peek", "nothing", "--data-dir", d) == 1
        assert "UnknownCollection" in capsys.readouterr().err
        tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_an_unknown_outcome_is_answered_504_not_as_a_refusal() -> None:
    """An append the controller could not tell the outcome of is neither 200 nor a 4xx refusal:
    504 ``AppendOutcomeUnknown`` (a retry with the same Idempotency-Key tells which)."""
    from tidegate.commands.control import Refusal
    from tidegate.runtime.errors import AppendOutcomeUnknown

    env = ScriptedEnvironment()

    async def unknown(*args: Any, **kwargs: Any) -> int:
        raise AppendOutcomeUnknown("a newer controller took over while it was written")

    env.append = unknown  # type: ignore[method-assign]
    service = ControlService(env)
    with pytest.raises(Refusal) as r:
        await service.handle(
            "POST", "/append", {"table": "orders", "rows": [["ann", 1, None, None]]}
        )
    assert (r.value.status, r.value.type) == (504, "AppendOutcomeUnknown")


def test_commands_without_a_controller_say_how_to_start_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _cli("status", "--data-dir", str(tmp_path)) == 3
    assert "tidegate up --data-dir" in capsys.readouterr().err
    ControllerInfo("127.0.0.1:1", "x", 2**22 + 12345, str(tmp_path)).write()  # a pid that is gone
    with pytest.raises(NoController, match="is gone"):
        ControlClient.for_data_dir(tmp_path)


def test_controller_file_is_private_and_removed_only_by_its_owner(tmp_path: Path) -> None:
    mine = ControllerInfo("127.0.0.1:5", "a", os.getpid(), str(tmp_path))
    mine.write()
    assert ControllerInfo.read(tmp_path) == mine
    assert ControllerInfo.path(tmp_path).stat().st_mode & 0o077 == 0
    other = ControllerInfo("127.0.0.1:6", "b", os.getpid(), str(tmp_path))
    other.remove()  # not its file: left alone
    assert ControllerInfo.read(tmp_path) == mine
    mine.remove()
    assert not ControllerInfo.path(tmp_path).exists()


def test_controller_file_round_trips_the_metrics_address(tmp_path: Path) -> None:
    served = ControllerInfo("127.0.0.1:5", "a", os.getpid(), str(tmp_path), "127.0.0.1:9464")
    served.write()
    assert json.loads(ControllerInfo.path(tmp_path).read_text())["metrics"] == "127.0.0.1:9464"
    assert ControllerInfo.read(tmp_path) == served
    plain = dataclasses.replace(served, metrics=None)
    plain.write()
    assert "metrics" not in json.loads(ControllerInfo.path(tmp_path).read_text())
    assert ControllerInfo.read(tmp_path) == plain


def test_controller_files_from_before_the_metrics_field_still_read(tmp_path: Path) -> None:
    old = {"address": "127.0.0.1:5", "token": "a", "pid": os.getpid(), "data_dir": str(tmp_path)}
    ControllerInfo.path(tmp_path).write_text(json.dumps(old))
    info = ControllerInfo.read(tmp_path)
    assert info == ControllerInfo("127.0.0.1:5", "a", os.getpid(), str(tmp_path))
    assert info.metrics is None
    ControllerInfo.path(tmp_path).write_text(json.dumps({**old, "metrics": None}))
    assert ControllerInfo.read(tmp_path) == info


_GOOD_FILE = '"address": "127.0.0.1:5", "token": "a", "pid": 1, "data_dir": "/d"'


@pytest.mark.parametrize(
    "content",
    ['{"address": "x"}', "[]", "{", "{" + _GOOD_FILE + ', "metrics": 5}'],
    ids=["missing-fields", "not-an-object", "not-json", "metrics-not-a-string"],
)
def test_malformed_controller_files_are_unreadable_not_crashes(
    tmp_path: Path, content: str
) -> None:
    ControllerInfo.path(tmp_path).write_text(content)
    with pytest.raises(NoController, match="unreadable"):
        ControllerInfo.read(tmp_path)


@pytest.mark.anyio
async def test_malformed_requests_get_400_and_the_endpoint_keeps_serving(data_dir: Path) -> None:
    env = ScriptedEnvironment()
    async with anyio.create_task_group() as tg:
        info = await _serving(env, data_dir, tg)
        host, port = info.address.rsplit(":", 1)

        async def raw(request: bytes) -> bytes:
            # One request per connection (the endpoint keeps connections alive otherwise).
            request = request.replace(b"\r\n", b"\r\nConnection: close\r\n", 1)
            async with await anyio.connect_tcp(host, int(port)) as s:
                await s.send(request)
                out = b""
                with contextlib.suppress(anyio.EndOfStream):
                    while True:
                        out += await s.receive()
                return out

        # (Every request names its Host: HTTP/1.1 requires it, and the server refuses one without.)
        garbage = await raw(b"garbage\r\n\r\n")
        assert garbage.startswith(b"HTTP/1.1 400") and b'{"error": {"type": "BadRequest"' in garbage
        assert (await raw(b"GET /health HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 400")
        bad_json = b"POST /append HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer t0ken\r\nContent-Length: 3\r\n\r\n[1]"
        assert b'"BadRequest"' in await raw(bad_json)
        deep = b"[" * 100_000 + b"]" * 100_000  # json.loads raises RecursionError
        too_deep = (
            b"POST /append HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer t0ken\r\n"
            + f"Content-Length: {len(deep)}\r\n\r\n".encode()
            + deep
        )
        assert (await raw(too_deep)).startswith(b"HTTP/1.1 400")
        # A head over 64 KiB, whole or still unfinished, is refused, not buffered.
        big = b"GET /health HTTP/1.1\r\nHost: t\r\nX-Pad: " + b"a" * 70_000 + b"\r\n\r\n"
        reply = await raw(big)
        assert reply.startswith(b"HTTP/1.1 400") and b"request head is over 65536" in reply
        host_, port_ = info.address.rsplit(":", 1)
        async with await anyio.connect_tcp(host_, int(port_)) as s:
            await s.send(b"GET /health HTTP/1.1\r\nX-Pad: " + b"a" * 70_000)  # no line end
            with anyio.fail_after(5):
                assert (await s.receive()).startswith(b"HTTP/1.1 400")
        assert (await raw(b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n")).startswith(b"HTTP/1.1 200")
        # Two requests in one write (pipelined): answered in order.
        health = b"GET /health HTTP/1.1\r\nHost: t\r\n"
        both = await _raw(info.address, health + b"\r\n" + health + b"Connection: close\r\n\r\n")
        assert both.startswith(b"HTTP/1.1 200") and both.count(b"HTTP/1.1 200") == 2
        nowhere = b"GET /nowhere HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer t0ken\r\n\r\n"
        assert (await raw(nowhere)).startswith(b"HTTP/1.1 404")
        tg.cancel_scope.cancel()


def test_the_writes_of_one_step_leave_as_one_send() -> None:
    """uvicorn writes an answer's head and body separately: the endpoint's transport joins
    the writes of one step of the event loop into one send (one system call per answer),
    in order, and flushes them before it closes."""
    import asyncio

    from tidegate.commands.control_server import _Coalescing

    class Socket:
        def __init__(self) -> None:
            self.sent: list[bytes] = []
            self.closed = False

        def write(self, data: bytes) -> None:
            self.sent.append(data)

        def is_closing(self) -> bool:
            return self.closed

        def close(self) -> None:
            self.closed = True

        def get_extra_info(self, name: str) -> object:
            return ("127.0.0.1", 1) if name == "peername" else None

    async def steps() -> None:
        sock = Socket()
        transport = _Coalescing(sock, asyncio.get_running_loop())  # type: ignore[arg-type]
        transport.write(b"HTTP/1.1 200 OK\r\n\r\n")
        transport.writelines([b"{", b"}"])
        assert sock.sent == []  # nothing yet: the step goes on
        await asyncio.sleep(0)
        assert sock.sent == [b"HTTP/1.1 200 OK\r\n\r\n{}"]
        transport.write(b"bye")
        transport.close()
        assert sock.sent[-1] == b"bye" and sock.closed
        assert transport.get_extra_info("peername") == ("127.0.0.1", 1)

    asyncio.run(steps())


async def _raw(address: str, request: bytes) -> bytes:
    host, port = address.rsplit(":", 1)
    async with await anyio.connect_tcp(host, int(port)) as s:
        await s.send(request)
        out = b""
        with anyio.fail_after(10):
            while True:
                try:
                    out += await s.receive()
                except (anyio.EndOfStream, anyio.BrokenResourceError):
                    return out


@pytest.mark.anyio
async def test_the_control_endpoint_authenticates_before_reading_and_bounds_every_request(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 17: the token is checked before the body is read; nesting is limited before
    parsing; a silent client times out; requests beyond the connection limit get 503."""
    import tidegate.commands.control as control

    monkeypatch.setattr(control, "_READ_TIMEOUT_S", 3.0)
    monkeypatch.setattr(control, "_MAX_CONNECTIONS", 2)
    env = ScriptedEnvironment()
    async with anyio.create_task_group() as tg:
        info = await _serving(env, data_dir, tg)
        # A wrong token announcing 60 MiB it never sends: refused at once, not waited for.
        head = b"POST /append HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer wrong\r\nContent-Length: 62914560\r\n\r\n"
        with anyio.fail_after(5):
            assert b" 401 " in (await _raw(info.address, head)).split(b"\r\n")[0]
        # Nesting is counted before json.loads runs.
        body = b"[" * 5_000 + b"]" * 5_000
        auth = f"Authorization: Bearer {info.token}\r\n".encode()
        request = (
            b"POST /peek HTTP/1.1\r\nHost: t\r\n"
            + auth
            + b"Content-Length: %d\r\n\r\n" % len(body)
            + body
        )
        reply = await _raw(info.address, request)
        assert b" 400 " in reply.split(b"\r\n")[0] and b"nests deeper than 600" in reply
        # Two clients whose bodies never finish fill the endpoint: a third is turned away.
        host, port = info.address.rsplit(":", 1)
        stalled = (
            b"POST /append HTTP/1.1\r\nHost: t\r\n"
            + auth
            + b"Expect: 100-continue\r\nContent-Length: 100\r\n\r\n"
        )
        busy = [await anyio.connect_tcp(host, int(port)) for _ in range(2)]
        for s in busy:
            await s.send(stalled)
            with anyio.fail_after(10):  # the head is in: the body is being read
                assert (await s.receive()).startswith(b"HTTP/1.1 100 ")
            await s.send(b"{")
        health = b"GET /health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
        assert b" 503 " in (await _raw(info.address, health)).split(b"\r\n")[0]
        for s in busy:
            with anyio.fail_after(10):
                assert b" 408 " in (await s.receive()).split(b"\r\n")[0]
            await s.aclose()
        # Two silent clients: a third takes the place of the oldest; the other times out.
        silent = [await anyio.connect_tcp(host, int(port)) for _ in range(2)]
        with anyio.fail_after(5):
            assert b" 200 " in (await _raw(info.address, health)).split(b"\r\n")[0]
        with anyio.fail_after(10):
            assert await _received_until_closed(silent[0]) == b""  # closed quietly
            assert b" 408 " in (await silent[1].receive()).split(b"\r\n")[0]
        for s in silent:
            await s.aclose()
        assert env.rows == []
        tg.cancel_scope.cancel()


async def _received_until_closed(stream: anyio.abc.SocketStream) -> bytes:
    out = b""
    while True:
        try:
            out += await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            return out


@pytest.mark.anyio
async def test_half_sent_heads_cannot_lock_out_health_or_other_clients(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slowloris: 64 connections that each send half a request head and never finish used to
    fill the endpoint's 64 places, so ``/health`` and every other client got 503 until their
    heads timed out. Connections waiting for a head now give way to new ones: ``/health`` and
    an authenticated call answer, and the half-sent heads are closed (503) as others need their
    places, or time out (408)."""
    import tidegate.commands.control as control

    monkeypatch.setattr(control, "_READ_TIMEOUT_S", 120.0)  # the heads do not time out here
    env = ScriptedEnvironment()
    async with anyio.create_task_group() as tg:
        info = await _serving(env, data_dir, tg)
        host, port = info.address.rsplit(":", 1)
        half = b"GET /status HTTP/1.1\r\nHost: t\r\nAuthor"
        health = b"GET /health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
        slow = []
        for _ in range(64):
            s = await anyio.connect_tcp(host, int(port))
            await s.send(half)
            slow.append(s)
        with anyio.fail_after(30):
            for _ in range(3):
                assert b" 200 " in (await _raw(info.address, health)).split(b"\r\n")[0]
            client = ControlClient(info)
            assert (await anyio.to_thread.run_sync(client.call, "GET", "/status")) is not None
            client.close()
        closed = 0
        for s in slow:
            with anyio.move_on_after(0.2):  # those closed were answered long before
                reply = await _received_until_closed(s)  # 503, or quietly if no byte was in
                assert reply == b"" or (b" 503 " in reply.split(b"\r\n")[0] and b'"Busy"' in reply)
                closed += 1
            await s.aclose()
        assert closed >= 64 - 16  # one client keeps at most 16 waiting
        tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_the_body_is_bounded_while_it_streams_and_in_time(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An announced body over the limit is refused before it is read; a chunked one as soon as it
    passes the limit; a body that stops arriving after its head times out (408)."""
    import tidegate.commands.control as control

    monkeypatch.setattr(control, "_MAX_BODY", 1_000)
    monkeypatch.setattr(control, "_READ_TIMEOUT_S", 1.0)
    env = ScriptedEnvironment()
    async with anyio.create_task_group() as tg:
        info = await _serving(env, data_dir, tg)
        auth = f"Host: t\r\nAuthorization: Bearer {info.token}\r\n".encode()
        announced = b"POST /append HTTP/1.1\r\n" + auth + b"Content-Length: 1001\r\n\r\n"
        with anyio.fail_after(5):  # refused at once, the body never sent
            reply = await _raw(info.address, announced)
        assert b" 413 " in reply.split(b"\r\n")[0] and b'"BodyTooLarge"' in reply
        host, port = info.address.rsplit(":", 1)
        async with await anyio.connect_tcp(host, int(port)) as s:
            await s.send(
                b"POST /append HTTP/1.1\r\n" + auth + b"Transfer-Encoding: chunked\r\n\r\n"
            )
            chunk = b"[" * 600
            with anyio.fail_after(5):
                for _ in range(3):  # 1,800 bytes in all, never finished
                    await s.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                reply = await s.receive()
            assert b" 413 " in reply.split(b"\r\n")[0]
        stalled = b"POST /append HTTP/1.1\r\n" + auth + b"Content-Length: 100\r\n\r\n{"
        with anyio.fail_after(5):
            reply = await _raw(info.address, stalled)
        assert b" 408 " in reply.split(b"\r\n")[0] and b'"RequestTimeout"' in reply
        assert env.rows == []
        tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_the_client_keeps_one_connection_alive_and_reconnects_when_it_was_closed(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tidegate.commands.control as control
    import tidegate.commands.control_server as control_server

    monkeypatch.setattr(control_server, "_KEEP_ALIVE_S", 1)
    env = ScriptedEnvironment()
    async with anyio.create_task_group() as tg:
        info = await _serving(env, data_dir, tg)
        client = ControlClient(info, timeout=10)
        call = anyio.to_thread.run_sync
        row = {"table": "orders", "rows": [["a", 1, None, None]]}
        assert (await call(client.call, "GET", "/health")) == {"ok": True}
        ((first, _),) = client._idle
        for _ in range(3):
            await call(client.call, "POST", "/append", row)
        ((again, _),) = client._idle
        assert again is first and len(env.rows) == 3  # one connection for every call
        await anyio.sleep(1.5)  # the server closes the idle connection: seen, and replaced
        await call(client.call, "POST", "/append", row)
        ((second, _),) = client._idle
        assert second is not first and len(env.rows) == 4
        # Closed just as it is reused (not seen before the request): retried once, applied once.
        monkeypatch.setattr(control, "_dropped", lambda conn: False)
        await anyio.sleep(1.5)
        await call(client.call, "POST", "/append", row)
        ((third, _),) = client._idle
        assert third is not second and len(env.rows) == 5
        client.close()
        assert client._idle == []
        tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_copy_to_command_asks_the_controller_to_write_parquet(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = ScriptedEnvironment()
    await env.append("orders", [(("ann", 20, 1.5, None), 1), (("bob", 5, None, None), 2)])
    async with anyio.create_task_group() as tg:
        await _serving(env, data_dir, tg)
        d = str(data_dir)
        url = "file:///tmp/exports"
        argv = ("copy-to", "orders", url, "--at", "100", "--data-dir", d)
        assert await anyio.to_thread.run_sync(_cli, *argv) == 0
        assert "orders (u1): 3 row(s) written to file:///tmp/exports" in capsys.readouterr().out
        assert env.copied == [(env.t, url, 100)] and env.waited == [100]
        assert (
            await anyio.to_thread.run_sync(_cli, "copy-to", "u2", url, "--data-dir", d, "--json")
            == 0
        )
        got = json.loads(capsys.readouterr().out)
        assert got == {"name": "totals", "id": "u2", "url": url, "rows": 2}
        assert await anyio.to_thread.run_sync(_cli, "copy-to", "nope", url, "--data-dir", d) != 0
        tg.cancel_scope.cancel()


# -- start-up: the parser is built without the heavy modules ------------------------------------------


@pytest.mark.processes
def test_building_the_parser_imports_none_of_the_heavy_modules() -> None:
    """Issue 19 §2: every command answers within 0.3 s (bench/cli.py times it); this checks the
    cause, not the time: ``import tidegate.cli`` and the parser leave the simulator, the runtime's
    environment, Spark, pytest, gRPC and the server's libraries unimported."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from tidegate.cli import build_parser\n"
        "build_parser().parse_args(['status'])\n"
        "print('\\n'.join(sorted(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    loaded = set(out.split())
    heavy = {
        "tidegate.sim",
        "tidegate.runtime.environment",
        "tidegate.spec.plan",
        "tidegate.spec.sql",
        "pyspark",
        "pyarrow",
        "pytest",
        "grpc",
        "sqlglot",
        "uvicorn",
        "starlette",
        "rich",
    }
    assert not heavy & loaded, sorted(heavy & loaded)


def test_the_cli_s_copies_of_spec_constants_agree_with_the_spec() -> None:
    from tidegate.commands import ddl, render
    from tidegate.spec.plan.schema import ScalarType

    assert tuple(t.value for t in ScalarType) == ddl.SCALAR_TYPES
    assert render.DEFAULT_GRANULARITY_MS == ddl.DEFAULT_GRANULARITY_MS


@pytest.mark.parametrize(
    "text",
    [
        "SELECT 1",
        "  SELECT 1  ",
        "SELECT 1;",
        "SELECT 1;\n",
        "SELECT 1; SELECT 2;",
        "SELECT ';' AS x; SELECT 2",
        "SELECT 1 -- a comment;\n; SELECT 2",
        'SELECT "a;b" FROM t;',
        "SELECT $$;$$;",
        "/* ; */ SELECT 1;",
        ";;",
        "",
        "   ",
    ],
)
def test_the_shell_splits_statements_as_the_sql_front_end_does(text: str) -> None:
    from tidegate.commands.sql import split_statements as shell_split
    from tidegate.spec.sql import split_statements

    assert shell_split(text) == split_statements(text)


def _parsers(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield parser.prog, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):  # aliases share a parser
                yield from _parsers(sub)


def test_every_commands_help_is_plain_text() -> None:
    """--help reuses docstrings written for the API reference: no reST markup reaches a terminal."""
    from tidegate.cli import build_parser
    from tidegate.commands.replicas import build_parser as replica_parser
    from tidegate.sim.cli import build_parser as sim_parser

    markup = re.compile(r"``|:(mod|class|func|meth|data|attr|exc|ref|doc):`")
    seen = 0
    for root in (build_parser(), replica_parser(), sim_parser()):
        for prog, parser in _parsers(root):
            seen += 1
            text = parser.format_help()
            assert not markup.search(text), f"{prog} --help shows markup:\n{text}"
    assert seen > 20


def _helps(parser: argparse.ArgumentParser, path: str) -> Iterator[tuple[str, str]]:
    """``(command, its --help text)`` for ``parser`` and every subcommand under it."""
    yield path, parser.format_help()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _helps(sub, f"{path} {name}")


_RAW_MARKUP = re.compile(r"``|:[a-z]+(?::[a-z]+)?:`|(?<![\w`])`[^`\s][^`\n]*`(?![\w`])|\S::$", re.M)
"""What reStructuredText markup looks like raw: literals, roles, interpreted text, ``::``."""


def test_no_command_s_help_shows_raw_markup() -> None:
    from tidegate.cli import build_parser
    from tidegate.commands.replicas import build_parser as replicas_parser
    from tidegate.commands.replicas import help_text as replica_help
    from tidegate.replica.main import build_parser as replica_process_parser
    from tidegate.sim.cli import build_parser as sim_parser

    helps = [
        *_helps(build_parser(), "tidegate"),
        *_helps(replicas_parser(), "tidegate replica"),
        *_helps(replica_process_parser(), "tidegate replica (process)"),
        *_helps(sim_parser(), "tidegate sim"),
        ("tidegate replica --help", replica_help()),
    ]
    assert len(helps) > 30  # every command, the nested ones too
    raw = [(cmd, m.group(0)) for cmd, text in helps for m in _RAW_MARKUP.finditer(text)]
    assert raw == []
    shown = dict(helps)
    # the docstrings the long helps are made of, as text: roles and literals by their content
    assert "It serves the control endpoint that tidegate status, peek" in shown["tidegate up"]
    assert "tidegate replica --services storage" in shown["tidegate up"]


def test_plain_help_fills_paragraphs_and_keeps_lists_and_examples() -> None:
    from tidegate.commands.help_text import Parser

    p = Parser(
        prog="x",
        description="First ``one``\nwraps :class:`~a.B`.\n\nItems:\n\n* a `first`\n  item\n"
        "* a second\n\nExample::\n\n    x --flag   # kept\n    x -y\n",
    )
    p.add_argument("--flag", help="see `tidegate up`")
    text = p.format_help()
    assert "First one wraps B.\n\nItems:\n\n* a first item\n* a second\n\nExample:\n\n" in text
    assert "    x --flag   # kept\n    x -y\n" in text
    assert "see tidegate up" in text


def test_the_help_text_module_s_examples_hold() -> None:
    import doctest

    from tidegate.commands import help_text

    result = doctest.testmod(help_text)
    assert result.attempted >= 3 and result.failed == 0
