"""What ``tidegate status``, ``describe``, ``subscribe``, ``replica`` and ``up``'s event lines say,
without starting an environment process: readable times, replica states, the event lines, the
endpoint while ``up`` starts, and streamed answers over loopback (asyncio and trio).

The same commands against a real ``tidegate up`` are in ``tests/test_cli_operability.py``.
"""

from __future__ import annotations

import io
import json
import os
import signal
from collections.abc import AsyncIterator, Mapping
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
    Refusal,
    Stream,
    serve_control,
)
from tidegate.commands.events import ReplicaEvents, Reporter
from tidegate.commands.gate import Gate
from tidegate.commands.overview import replica_state
from tidegate.commands.render import describe_text, format_bytes, replicas_table, status_table
from tidegate.commands.times import format_time, iso_frontier, iso_ms
from tidegate.runtime.controller.driver import ReplicaInfo
from tidegate.runtime.orchestrator import ReplicaProcessStatus
from tidegate.spec.compute import ReplicaStatusEvent


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


# -- readable times ------------------------------------------------------------------------------


def test_times_are_iso_8601_in_utc_with_milliseconds_beside_the_number() -> None:
    assert iso_ms(0) == "1970-01-01T00:00:00.000Z"
    assert iso_ms(1_764_312_000_123) == "2025-11-28T06:40:00.123Z"
    assert iso_frontier([5, 1_000]) == ["1970-01-01T00:00:00.005Z", "1970-01-01T00:00:01.000Z"]
    assert format_time(1_764_312_000_123) == "1764312000123 (2025-11-28T06:40:00.123Z)"
    # Not a time a calendar holds (or not an integer): the number alone, no crash.
    for odd in (2**63 - 1, -(2**62), "x", None, 1.5, True):
        assert iso_ms(odd) is None
    assert format_time(2**63 - 1) == str(2**63 - 1)


def test_sizes_read_in_binary_units() -> None:
    assert [format_bytes(n) for n in (None, 999, 2048, 40_000_000, 4 * 2**30)] == [
        "-",
        "999 B",
        "2 KiB",
        "38.1 MiB",
        "4 GiB",
    ]


# -- replica states -------------------------------------------------------------------------------


def _info(status: str, epoch: int, connected: bool, error: str = "") -> ReplicaInfo:
    return ReplicaInfo("default", "r1", status, epoch, "127.0.0.1:9", connected, 1, error)


def _process(
    state: str, restarts: int = 0, exit_code: int | None = None, error: str | None = None
) -> ReplicaProcessStatus:
    return ReplicaProcessStatus(
        "r1", state, 42, "127.0.0.1:9", restarts, exit_code, error, "/d/replicas/r1.log"
    )  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("info", "process", "expected"),
    [
        # Up: healthy, and the last error is gone.
        (_info("connected", 2, True), _process("running", 1, -9), ("connected", None)),
        # First start: the process starts, or runs and the controller is connecting.
        (None, _process("starting"), ("starting", None)),
        (_info("connecting", 1, False), _process("running"), ("starting", None)),
        # Killed: restarting, with why; reconnecting after the process came back too.
        (
            _info("failed", 2, False, "TransportError: refused"),
            _process("restarting", 1, -9),
            ("restarting", "the process was killed by SIGKILL"),
        ),
        (
            _info("rehydrating", 2, False, "stream broken"),
            _process("running", 1, 1),
            ("restarting", "the process exited with status 1"),
        ),
        # The process does not start: failed, with the orchestrator's reason and its log.
        (
            _info("rehydrating", 2, False),
            _process("restarting", 3, 1, "exited with status 1 before it was ready"),
            (
                "failed",
                "exited with status 1 before it was ready (retrying; see /d/replicas/r1.log)",
            ),
        ),
        # A replica the controller does not run: refused is failed; a broken stream restarting.
        (_info("failed", 1, False, "refused"), None, ("failed", "refused")),
        (_info("rehydrating", 3, False, "stream broken"), None, ("restarting", "stream broken")),
        (_info("connecting", 1, False), None, ("starting", None)),
        # Being dropped (or the controller stops).
        (_info("connected", 1, False), _process("stopping"), ("stopping", None)),
    ],
)
def test_replica_states_tell_starting_and_restarting_from_failed(
    info: ReplicaInfo | None, process: ReplicaProcessStatus | None, expected: tuple[str, Any]
) -> None:
    assert replica_state(info, process) == expected


# -- text ------------------------------------------------------------------------------------


def test_status_while_starting_shows_the_replica_processes() -> None:
    text = status_table(
        {
            "state": "starting",
            "controller": {"state": "starting", "pid": 7, "started_ms": 1_000},
            "now_ms": 13_500,
            "collections": [],
            "replicas": [
                {"name": "r1", "status": "starting", "pid": 9, "restarts": 0, "objects": None}
            ],
        }
    )
    lines = text.splitlines()
    assert lines[0].startswith(
        "controller: starting (pid 7, started 1000 (1970-01-01T00:00:01.000Z)"
    )
    assert "12.5 s ago); collections are listed once the replicas have started" in lines[0]
    assert lines[2].split()[:2] == ["NAME", "STATUS"] and lines[4].split()[:2] == ["r1", "starting"]
    empty = status_table({"state": "starting", "controller": {"pid": 7}, "collections": []})
    assert empty.splitlines()[-1] == "replicas: none started yet"


def test_status_shows_memory_limits_hydration_last_errors_and_errored_collections() -> None:
    status = {
        "state": "running",
        "collections": [
            {
                "name": "big",
                "id": "u2",
                "kind": "index",
                "since": [5],
                "upper": [9],
                "lag_ms": 0,
                "read_policy": None,
                "read_policy_effective": {"kind": "lag", "ms": 1000, "granularity_ms": 1000},
                "hydration": [
                    {"replica": "r1", "hydrated": True, "seconds": 1.25},
                    {"replica": "r2", "hydrated": False, "seconds": None},
                ],
                "error": {
                    "message": "dataflow u2 exceeded the replica's memory limit: ...",
                    "source": "peek",
                    "seen_ms": 10,
                    "seen_iso": iso_ms(10),
                    "at": 8,
                    "at_iso": iso_ms(8),
                },
            }
        ],
        "replicas": [
            {
                "name": "r1",
                "status": "connected",
                "epoch": 2,
                "address": "127.0.0.1:9",
                "pid": 42,
                "restarts": 1,
                "memory_limit": 4 * 2**30,
                "objects_hydrated": 1,
                "objects": 1,
                "last_error": None,
            },
            {
                "name": "r2",
                "status": "restarting",
                "epoch": 3,
                "address": "127.0.0.1:10",
                "pid": None,
                "restarts": 2,
                "memory_limit": 4 * 2**30,
                "objects_hydrated": 0,
                "objects": 1,
                "last_error": "the process was killed by SIGKILL",
            },
        ],
    }
    lines = status_table(status).splitlines()
    assert lines[2].endswith("lag 1000ms (default)  r1 1.25 s, r2 hydrating")
    assert lines[6].split() == [
        *("r1", "connected", "-", "-", "2", "127.0.0.1:9", "42", "1", "4", "GiB", "1/1", "-")
    ]  # no cluster or size in these rows: "-"
    assert lines[7].split()[:10] == [
        *("r2", "restarting", "-", "-", "3", "127.0.0.1:10", "-", "2", "4", "GiB")
    ]
    assert lines[7].endswith("0/1       the process was killed by SIGKILL")
    assert lines[9] == "errors (the last error each collection answered):"
    assert lines[10] == (
        "  big (u2): dataflow u2 exceeded the replica's memory limit: ... [a peek answered it at "
        "8 (1970-01-01T00:00:00.008Z); seen 1970-01-01T00:00:00.010Z]"
    )


def test_replica_list_says_what_runs_each_replica_and_where_it_serves_metrics() -> None:
    rows = [
        {"name": "r1", "status": "connected", "managed": True, "executor": "spark"},
        {"name": "r2", "status": "failed", "managed": False, "last_error": "refused"},
    ]
    rows[0]["spark_master"] = "local[2]"
    rows[0]["metrics"] = "127.0.0.1:9101"
    lines = replicas_table(rows, detail=True).splitlines()
    assert lines[0].split()[-4:] == ["RUNS", "METRICS", "LAST", "ERROR"]
    assert lines[2].split()[-4:] == ["spark", "local[2]", "127.0.0.1:9101", "-"]
    assert lines[3].split()[-3:] == ["unmanaged", "-", "refused"]


def test_describe_names_columns_keys_plan_dependencies_policy_and_frontiers() -> None:
    text = describe_text(
        {
            "name": "by_customer",
            "id": "u3",
            "kind": "index",
            "columns": [
                {"name": "customer", "type": "string", "nullable": False},
                {"name": "n", "type": "int64", "nullable": True},
            ],
            "keys": ["customer"],
            "on": {"name": "totals", "id": "u2", "kind": "materialized-view"},
            "plan": "Get u2 (customer: string, n: int64?)",
            "definition": None,
            "dependencies": [{"name": "totals", "id": "u2", "kind": "materialized-view"}],
            "dependents": [],
            "read_policy_effective": {"kind": "lag", "ms": 1000, "granularity_ms": 1000},
            "read_policy_default": True,
            "since": [5],
            "upper": [9],
            "lag_ms": 12,
            "hydration": [{"replica": "r1", "hydrated": True, "seconds": 0.5}],
            "error": None,
        }
    )
    assert text.splitlines() == [
        "index by_customer (u3)",
        "",
        "COLUMN    TYPE    NULLABLE",
        "--------  ------  --------",
        "customer  string  no",
        "n         int64   yes",
        "",
        "keys: customer of totals (u2)",
        "",
        "reads: totals (u2, materialized-view)",
        "read by: -",
        "read policy: lag 1000ms (default)",
        "since: 5 (1970-01-01T00:00:00.005Z)",
        "upper: 9 (1970-01-01T00:00:00.009Z)",
        "lag: 12 ms",
        "hydration: r1 0.50 s",
        "",
        "plan:",
        "  Get u2 (customer: string, n: int64?)",
    ]


# -- up's event lines ------------------------------------------------------------------------------


class _Env:
    """What :class:`ReplicaEvents` reads of an environment: its replicas and hydration."""

    def __init__(self) -> None:
        self.hydrations: list[Any] = []
        self.hydration_tracker = SimpleNamespace(listeners=[])

    def replicas(self) -> list[Any]:
        return []

    def hydration(self) -> list[Any]:
        return self.hydrations


def test_up_prints_one_line_per_replica_event_and_a_failure_once_not_per_retry() -> None:
    out = io.StringIO()
    now = [0.0]
    events = ReplicaEvents(Reporter(out, clock_ms=lambda: 1_000), monotonic=lambda: now[0])
    env = _Env()
    events.attach(env)
    ev = ReplicaStatusEvent
    events.on_process(_process("starting"))
    now[0] = 8.0
    events.on_process(_process("running"))
    events.on_event(ev("default", "r1", "connecting", 1))
    events.on_event(ev("default", "r1", "connected", 1))
    # A kill: the process exits, the stream breaks, the controller retries several times.
    now[0] = 100.0
    events.on_process(_process("restarting", 1, -9))
    events.on_event(ev("default", "r1", "failed", 1, "stream broken: UNAVAILABLE"))
    events.on_event(ev("default", "r1", "rehydrating", 2))
    for _ in range(5):
        events.on_event(ev("default", "r1", "failed", 2, "TransportError: connection refused"))
    now[0] = 101.0
    events.on_process(_process("starting", 1))
    now[0] = 108.5
    events.on_process(_process("running", 1))
    now[0] = 109.0
    two = [SimpleNamespace(replica="r1", hydrated=False, seconds=None)] * 2
    env.hydrations = two
    events.on_event(ev("default", "r1", "connected", 2))
    env.hydrations = [SimpleNamespace(replica="r1", hydrated=True, seconds=s) for s in (0.5, 1.25)]
    (listener,) = env.hydration_tracker.listeners
    listener("r1", "u2", 1.25)
    listener("r1", "u3", 0.5)  # said once
    events.on_event(ev("default", "r1", "dropped", 2))
    events.on_process(_process("stopped", 1))
    lines = [line.split(" ", 1)[1] for line in out.getvalue().splitlines()]
    assert all(line.startswith("1970-01-01T00:00:01.000Z ") for line in out.getvalue().splitlines())
    assert lines == [
        "r1 starting a replica process",
        "r1 process ready on 127.0.0.1:9 (pid 42, 8.0 s)",
        "r1 connected (epoch 1)",
        "r1 the process was killed by SIGKILL; restarting",
        "r1 failed: stream broken: UNAVAILABLE",
        "r1 process ready on 127.0.0.1:9 (pid 42, 7.5 s)",
        "r1 connected again (epoch 2, down 9.0 s)",
        "r1 rehydrated 2 object(s) in 1.25 s",
        "r1 dropped",
        "r1 stopped",
    ]


def test_a_process_that_keeps_failing_to_start_is_reported_once_per_reason() -> None:
    out = io.StringIO()
    events = ReplicaEvents(Reporter(out), monotonic=lambda: 0.0)
    why = "exited with status 1 before it was ready"
    for _ in range(3):
        events.on_process(_process("starting"))
        events.on_process(_process("restarting", 0, 1, why))
    events.on_process(_process("restarting", 0, None, "no ready line within 180s"))
    text = out.getvalue()
    assert text.count("failed to start: exited with status 1 before it was ready") == 1
    assert text.count("failed to start: no ready line within 180s") == 1
    assert "(log: /d/replicas/r1.log)" in text
    assert text.count("starting a replica process") == 1


# -- the endpoint while up starts, and the clients that wait for it -------------------------------


@pytest.mark.anyio
async def test_while_starting_status_answers_and_other_requests_wait(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    processes = {"r1": _process("starting")}
    gate = Gate(orchestrator=SimpleNamespace(status=lambda: processes))
    ran: list[tuple[str, str]] = []

    class Service:
        async def handle(self, method: str, path: str, body: Mapping[str, Any]) -> Any:
            ran.append((method, path))
            return {"table": "t", "time": 5, "time_iso": iso_ms(5), "rows": 1}

    watching = False
    client_waits = anyio.Event()

    async def handle(method: str, path: str, body: Mapping[str, Any]) -> Any:
        """The gate, noting when it turns an append away while ``watching``."""
        try:
            return await gate.handle(method, path, body)
        except Refusal as e:
            if watching and e.type == "Starting" and path == "/append":
                client_waits.set()
            raise

    async with anyio.create_task_group() as tg:
        address = await tg.start(serve_control, handle, "tok")
        info = ControllerInfo(address, "tok", os.getpid(), str(tmp_path))
        info.write()
        client = ControlClient(info, timeout=10)
        call = anyio.to_thread.run_sync
        status = await call(client.call, "GET", "/status")
        assert status["state"] == "starting" and status["controller"]["pid"] == os.getpid()
        assert [(r["name"], r["status"], r["pid"]) for r in status["replicas"]] == [
            ("r1", "starting", 42)
        ]
        assert await call(client.call, "GET", "/health") == {"ok": True, "state": "starting"}
        with pytest.raises(ControlError) as e:
            await call(client.call, "POST", "/append", {})
        assert e.value.type == "Starting" and ran == []

        # A client command waits for the controller to start, then goes through.
        async def start_soon() -> None:
            await client_waits.wait()
            gate.run(Service())

        watching = True
        tg.start_soon(start_soon)
        argv = ["append", "t", "--rows", "[[1]]", "--data-dir", str(tmp_path), "--timeout", "20"]
        assert await call(main, argv) == 0
        captured = capsys.readouterr()
        assert "waiting for the controller to start" in captured.err
        assert "appended 1 row(s) to t at 5 (1970-01-01T00:00:00.005Z)" in captured.out
        assert ran == [("POST", "/append")]

        await gate.stop(grace_s=0.1)
        assert (await call(client.call, "GET", "/status"))["state"] == "stopping"
        with pytest.raises(ControlError) as e:
            await call(client.call, "POST", "/append", {})
        assert e.value.type == "Stopping"
        tg.cancel_scope.cancel()


# -- streamed answers ------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_streamed_answer_arrives_line_by_line_and_the_client_ends_it(
    tmp_path: Path,
) -> None:
    """Lines arrive as the handler produces them (each before the next exists); a client that
    stops reading closes the connection, and the server closes the stream (asyncio and trio)."""
    send, receive = anyio.create_memory_object_stream[dict[str, Any]](10)
    closed = anyio.Event()

    async def items() -> AsyncIterator[dict[str, Any]]:
        async with receive:
            async for item in receive:
                yield item

    async def close() -> None:
        closed.set()

    async def handler(method: str, path: str, body: Mapping[str, Any]) -> Any:
        if path == "/bad":
            from tidegate.commands.control import Refusal

            raise Refusal(404, "UnknownCollection", "no such thing")
        return Stream(items(), close)

    async with anyio.create_task_group() as tg:
        address = await tg.start(serve_control, handler, "tok")
        client = ControlClient(ControllerInfo(address, "tok", os.getpid(), str(tmp_path)))
        lines = client.stream("POST", "/subscribe", {"name": "x"})
        for i in range(3):
            await send.send({"n": i})
            got = await anyio.to_thread.run_sync(next, lines)
            assert got == {"n": i}
        lines.close()  # what Ctrl-C does to the client
        with anyio.fail_after(10):
            await closed.wait()
        with pytest.raises(ControlError) as e:
            await anyio.to_thread.run_sync(next, client.stream("POST", "/bad", {}))
        assert e.value.type == "UnknownCollection"
        tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_a_stream_that_breaks_says_why_in_its_last_line(tmp_path: Path) -> None:
    async def items() -> AsyncIterator[dict[str, Any]]:
        yield {"n": 0}
        raise RuntimeError("boom")

    async def handler(method: str, path: str, body: Mapping[str, Any]) -> Any:
        return Stream(items())

    async with anyio.create_task_group() as tg:
        address = await tg.start(serve_control, handler, "tok")
        client = ControlClient(ControllerInfo(address, "tok", os.getpid(), str(tmp_path)))
        got = await anyio.to_thread.run_sync(list, client.stream("POST", "/s", {}))
        assert got == [{"n": 0}, {"error": {"type": "RuntimeError", "message": "boom"}}]
        tg.cancel_scope.cancel()


# -- the replica command: managing and running ------------------------------------------------


def test_replica_help_describes_managing_and_running(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replica", "--help"]) == 0
    out = capsys.readouterr().out
    assert "tidegate replica {list,add,drop}" in out and "tidegate replica --listen" in out
    assert "tidegate replica add NAME --address HOST:PORT" in out
    assert "--memory-limit" in out  # the replica process's own options follow
    assert main(["replica"]) == 2
    assert "tidegate replica {list,add,drop}" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit:
        main(["replica", "add", "--help"])
    assert exit.value.code == 0 and "--address HOST:PORT" in capsys.readouterr().out


def test_replica_commands_without_a_controller_say_how_to_start_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (["list"], ["add", "r2"], ["drop", "r2"]):
        with pytest.raises(SystemExit) as exit:
            main(["replica", *argv, "--data-dir", str(tmp_path)])
        assert exit.value.code == 3
        assert "tidegate up --data-dir" in capsys.readouterr().err


@pytest.mark.processes
def test_a_replica_process_still_runs_from_tidegate_replica(tmp_path: Path) -> None:
    """``tidegate replica --listen ...`` is the replica process, as before: it serves, prints its
    ready line and stops on SIGTERM."""
    import subprocess
    import sys

    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "tidegate", "replica", "--listen", "127.0.0.1:0"),
            *("--storage", str(tmp_path), "--executor", "python"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        ready = json.loads(proc.stdout.readline())
        assert ready["event"] == "listening" and ready["address"].startswith("127.0.0.1:")
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0


def test_the_demo_says_an_outage_once_as_up_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tidegate.commands.demo import Demo, DemoOptions

    demo = Demo(DemoOptions(), tmp_path)
    ev = ReplicaStatusEvent
    demo.replica_events.on_event(ev("default", "r1", "connected", 1))  # not shown yet
    demo.show_events = True
    demo.replica_events.on_event(ev("default", "r1", "failed", 1, "stream broken"))
    demo.replica_events.on_event(ev("default", "r1", "rehydrating", 2))
    for _ in range(7):  # one per retry of the controller
        demo.replica_events.on_event(ev("default", "r1", "failed", 2, "connection refused"))
    demo.replica_events.on_event(ev("default", "r1", "connected", 2))
    out = [line.strip() for line in capsys.readouterr().out.splitlines()]
    assert out[0] == "event: r1 failed: stream broken"
    assert out[1].startswith("event: r1 connected again (epoch 2, down ")
    assert len(out) == 2
