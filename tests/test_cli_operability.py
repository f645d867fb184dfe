"""Living with ``tidegate up``, with real processes: what it says while it starts and as replicas
come and go, ``status`` (starting, restarting, failed; hydration; memory limits; errors),
``describe``, ``subscribe``, ``replica add/list/drop`` and readable times.

One ``tidegate up --executor python`` serves the module (starting one costs seconds); the
tests run in order against it, the replica kill last. The memory limit has an ``up`` of its own.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio
import pytest

from tidegate.commands.control import ControlClient, ControlError, ControllerInfo, serve_control

pytestmark = [pytest.mark.processes, pytest.mark.timeout(300)]

TIDEGATE = [sys.executable, "-m", "tidegate"]
_ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


@dataclass
class Up:
    data: Path
    proc: subprocess.Popen[str]
    stderr: Path
    first_status: dict[str, Any]
    """``status --json`` as soon as the controller answered: while its replica starts."""

    def run(self, *argv: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*TIDEGATE, *argv, "--data-dir", str(self.data)],
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def ok(self, *argv: str) -> str:
        done = self.run(*argv)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def status(self) -> dict[str, Any]:
        return json.loads(self.ok("status", "--json"))  # type: ignore[no-any-return]

    def log(self) -> str:
        return self.stderr.read_text()


def _until(what: str, check: Callable[[], Any], timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@contextlib.contextmanager
def _start(data: Path, stderr: Path, *extra: str) -> Iterator[Up]:
    """``tidegate up --executor python`` on ``data``, once its replica is connected; stopped
    (SIGTERM, exit 0, ``controller.json`` removed) when the block ends."""
    with open(stderr, "w") as err:
        proc = subprocess.Popen(
            [*TIDEGATE, "up", "--data-dir", str(data), "--executor", "python", *extra],
            stdout=subprocess.DEVNULL,
            stderr=err,
            text=True,
        )
        try:

            def answered() -> dict[str, Any] | None:
                assert proc.poll() is None, stderr.read_text()[-3000:]
                if not ControllerInfo.path(data).exists():
                    return None
                with ControlClient.for_data_dir(data, timeout=10) as client:
                    status: dict[str, Any] = client.call("GET", "/status")
                    return status

            first = _until("the controller to answer", answered, 120)
            up = Up(data, proc, stderr, first)
            ready = up.run("status", "--wait", "--timeout", "120")
            assert ready.returncode == 0, ready.stdout + ready.stderr
            yield up
        finally:
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(60)
    assert code == 0, stderr.read_text()[-3000:]
    assert not ControllerInfo.path(data).exists()


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    root = tmp_path_factory.mktemp("up")
    with _start(root / "data", root / "up.stderr") as up:
        yield up


def test_up_answers_status_while_starting_then_says_what_happened(up: Up) -> None:
    first = up.first_status
    assert first["state"] == "starting" and first["collections"] == []
    assert all(r["status"] == "starting" for r in first["replicas"])  # r1, once it is asked for
    assert up.status()["state"] == "running"
    log = up.log()
    lines = [line for line in log.splitlines() if not line.startswith("{")]  # not the JSON logs
    says = "\n".join(lines)
    assert re.search(
        r"tidegate up: controller pid \d+, data in .*; `tidegate status` answers", says
    )
    assert re.search(rf"{_ISO.pattern} r1 starting a replica process", says)
    assert re.search(r"r1 process ready on 127\.0\.0\.1:\d+ \(pid \d+, [\d.]+ s\)", says)
    assert re.search(r"tidegate up: ready in [\d.]+ s: control endpoint http://", says)
    assert re.search(rf"{_ISO.pattern} r1 connected \(epoch 1\)", says)
    assert "Traceback" not in log
    # Not a terminal: plain lines, no colour codes or redrawing.
    assert "\x1b[" not in log and "\r" not in log


def test_objects_show_hydration_descriptions_and_readable_times(up: Up) -> None:
    up.ok("create-table", "orders", "customer:string", "amount:int64")
    appended = json.loads(
        up.ok("append", "orders", "--rows", '[["ann", 20], ["bob", 5], ["ann", 7]]', "--json")
    )
    assert _ISO.fullmatch(appended["time_iso"])
    up.ok(
        "sql",
        "-c",
        "CREATE MATERIALIZED VIEW totals AS "
        "SELECT customer, count(*) AS n, sum(amount) AS total FROM orders GROUP BY customer",
    )
    up.ok("create-index", "totals", "--key", "customer", "--name", "by_customer")

    def hydrated() -> dict[str, Any] | None:
        s = up.status()
        rows = {c["name"]: c for c in s["collections"]}
        ok = all(h["hydrated"] for n in ("totals", "by_customer") for h in rows[n]["hydration"])
        return s if ok and rows["by_customer"]["hydration"] else None

    status = _until("hydration", hydrated)
    assert _ISO.fullmatch(status["now_iso"])
    rows = {c["name"]: c for c in status["collections"]}
    for c in rows.values():
        assert [_ISO.fullmatch(t) is not None for t in c["since_iso"]] == [True]
        assert c["columns"] and "dependencies" in c and "read_policy_effective" in c  # described
    assert rows["orders"]["hydration"] == [] and rows["orders"]["plan"] is None
    (h,) = rows["by_customer"]["hydration"]
    assert h["replica"] == "r1" and h["hydrated"] and 0 <= h["seconds"] < 60
    assert rows["by_customer"]["keys"] == ["customer"]
    assert [d["name"] for d in rows["by_customer"]["dependencies"]] == ["totals"]
    assert "Reduce" in rows["totals"]["plan"]
    (r1,) = status["replicas"]
    assert (r1["objects_hydrated"], r1["objects"]) == (2, 2)

    text = up.ok("status")
    by_customer = next(line for line in text.splitlines() if line.startswith("by_customer"))
    assert _ISO.search(by_customer) and re.search(r"r1 [\d.]+ s$", by_customer)
    assert "lag 1000ms (default)" in by_customer

    described = up.ok("describe", "totals")
    assert described.startswith("materialized-view totals (u2)\n")
    for expected in (
        "customer  string  no",
        "reads: orders (u1, table)",
        "read by: by_customer (u3, index)",
        "read policy: lag 1000ms (default)",
        "plan:",
        "definition:",
    ):
        assert expected in described, described
    assert re.search(rf"since: \d+ \({_ISO.pattern}\)", described)
    assert re.search(r"hydration: r1 [\d.]+ s", described)
    as_json = json.loads(up.ok("describe", "by_customer", "--json"))
    assert as_json["keys"] == ["customer"] and as_json["on"]["name"] == "totals"
    missing = up.run("describe", "nothing")
    assert missing.returncode == 1 and "UnknownCollection" in missing.stderr

    peeked = up.ok("peek", "totals")
    assert re.match(
        rf"totals \(u2\) at \d+ \({_ISO.pattern}\) \(the freshest time\): 2 row", peeked
    )


def test_subscribe_streams_batches_as_they_arrive_until_interrupted(up: Up) -> None:
    sub = subprocess.Popen(
        [*TIDEGATE, "subscribe", "totals", "--json", "--data-dir", str(up.data)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert sub.stdout is not None
        header = json.loads(sub.stdout.readline())
        assert header["subscribe"] == "totals" and header["columns"] == ["customer", "n", "total"]
        assert _ISO.fullmatch(header["as_of_iso"])
        snapshot = json.loads(sub.stdout.readline())
        assert sorted(u["row"] for u in snapshot["updates"]) == [["ann", 2, 27], ["bob", 1, 5]]
        assert {u["time"] for u in snapshot["updates"]} == {header["as_of"]}
        seen: list[dict[str, Any]] = []
        for rows in ('[["cat", 1]]', '[[["bob", 5], -1]]'):
            up.ok("append", "orders", "--rows", rows)
            while True:  # progress batches (no updates) come in between, each second
                batch = json.loads(sub.stdout.readline())
                assert batch["lower"] == (seen[-1]["upper"] if seen else snapshot["upper"])
                seen.append(batch)
                if batch["updates"]:
                    break
        changes = [(u["row"], u["diff"]) for b in seen for u in b["updates"]]
        assert changes == [(["cat", 1, 1], 1), (["bob", 1, 5], -1)]
        assert all(_ISO.fullmatch(u["time_iso"]) for b in seen for u in b["updates"])
        sub.send_signal(signal.SIGINT)  # Ctrl-C
        _, err = sub.communicate(timeout=30)
    finally:
        if sub.poll() is None:
            sub.kill()
    assert sub.returncode == 0, err
    assert (
        re.search(r"stopped after \d+ batch\(es\), 4 change\(s\)", err) and "Traceback" not in err
    )


class _CtrlCAfterFirstBatch(io.StringIO):
    """A stdout on which Ctrl-C lands just after the first batch of changes was shown."""

    def flush(self) -> None:
        super().flush()
        if '"updates": [{' in self.getvalue():
            raise KeyboardInterrupt


def test_a_batch_shown_just_before_ctrl_c_is_counted(
    up: Up, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tidegate.cli import main

    monkeypatch.setattr(sys, "stdout", _CtrlCAfterFirstBatch())
    assert main(["subscribe", "totals", "--json", "--data-dir", str(up.data)]) == 0
    # The snapshot: two rows. CI once said "1 batch(es)" for what it had shown as 2.
    assert "stopped after 1 batch(es), 2 change(s)" in capsys.readouterr().err


def test_subscribe_prints_changes_as_lines_and_refuses_bad_requests(up: Up) -> None:
    sub = subprocess.Popen(
        [*TIDEGATE, "subscribe", "by_customer", "--data-dir", str(up.data)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert sub.stdout is not None
        assert sub.stdout.readline().split() == ["TIME", "DIFF", "customer", "n", "total"]
        first = sorted(sub.stdout.readline().split()[2:] for _ in range(2))
        assert first == [["+1", "ann", "2", "27"], ["+1", "cat", "1", "1"]]
        sub.send_signal(signal.SIGINT)
        _, err = sub.communicate(timeout=30)
    finally:
        if sub.poll() is None:
            sub.kill()
    assert sub.returncode == 0 and "subscribe by_customer (u3) as of" in err
    early = up.run("subscribe", "totals", "--as-of", "1")
    assert early.returncode == 1 and "SinceViolation" in early.stderr
    nothing = up.run("subscribe", "nothing")
    assert nothing.returncode == 1 and "UnknownCollection" in nothing.stderr


def test_replicas_are_added_listed_and_dropped_from_the_cli(up: Up) -> None:
    added = json.loads(up.ok("replica", "add", "r2", "--wait", "--json"))
    assert (added["name"], added["status"], added["managed"]) == ("r2", "connected", True)
    assert added["executor"] == "python"  # the environment's, not spark
    listed = up.ok("replica", "list")
    rows = {line.split()[0]: line for line in listed.splitlines()[2:]}
    assert set(rows) == {"r1", "r2"} and " connected " in rows["r2"] and "python" in rows["r2"]
    again = up.run("replica", "add", "r2")
    assert again.returncode == 1 and "DuplicateCatalogName" in again.stderr
    bad = up.run("replica", "add", "no good")
    assert bad.returncode == 1 and "OrchestratorError" in bad.stderr
    assert "no good" not in up.ok("replica", "list")  # refused: nothing recorded

    # A replica at an address where nothing listens: failed, its reason said once.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again below: refused
    up.ok("replica", "add", "r9", "--address", f"127.0.0.1:{port}")

    def r9_failed() -> dict[str, Any] | None:
        r = next(r for r in up.status()["replicas"] if r["name"] == "r9")
        return r if r["status"] == "failed" else None

    r9 = _until("r9 to fail", r9_failed)
    assert r9["address"] == f"127.0.0.1:{port}" and r9["last_error"] and not r9["managed"]
    time.sleep(2)  # several retries
    assert len(re.findall(r" r9 failed: ", up.log())) == 1

    up.ok("replica", "drop", "r9")
    dropped = up.ok("replica", "drop", "r2")
    assert dropped.strip() == "dropped replica r2 (its process stopped)"
    assert [r["name"] for r in up.status()["replicas"]] == ["r1"]
    unknown = up.run("replica", "drop", "r2")
    assert unknown.returncode == 1 and "UnknownReplica" in unknown.stderr
    log = up.log()
    for line in (
        "r2 connected (epoch 1)",
        "r2 hydrated 2 object(s) in",
        "r2 dropped",
        "r2 stopped",
    ):
        assert line in log


def test_uvicorn_s_own_log_lines_are_structured_json(up: Up) -> None:
    host, port = ControllerInfo.read(up.data).address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(b"NOT HTTP\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 400")

    def logged() -> dict[str, Any] | None:
        for line in up.log().splitlines():
            if line.startswith("{") and '"uvicorn.error"' in line:
                record: dict[str, Any] = json.loads(line)
                return record
        return None

    record = _until("uvicorn's log line", logged, 10)
    assert record["event"] == "Invalid HTTP request received."
    assert (record["level"], record["component"]) == ("warning", "controller")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT[\d:.]+Z", record["ts"])
    assert not any(line.startswith("WARNING") for line in up.log().splitlines())


class _Terminal:
    """``tidegate sql`` on a pseudo-terminal (so it runs its interactive shell), read as a user
    reads it."""

    def __init__(self, up: Up) -> None:
        import pty

        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen(
            [*TIDEGATE, "sql", "--data-dir", str(up.data)],
            stdin=slave,
            stdout=slave,
            stderr=slave,
        )
        os.close(slave)
        self.seen = ""

    def type(self, line: str) -> None:
        os.write(self.master, line.encode() + b"\n")

    def wait_for(self, pattern: str, timeout: float = 60) -> re.Match[str]:
        """The first match of ``pattern`` in what the terminal showed since the last match."""
        deadline = time.monotonic() + timeout
        while not (m := re.search(pattern, self.seen)):
            left = deadline - time.monotonic()
            assert left > 0, f"timed out waiting for {pattern!r}; the terminal shows:\n{self.seen}"
            ready, _, _ = select.select([self.master], [], [], min(left, 1.0))
            if ready:
                try:
                    self.seen += os.read(self.master, 65536).decode(errors="replace")
                except OSError:  # the shell exited: nothing more will come
                    assert re.search(pattern, self.seen), self.seen
        self.seen = self.seen[m.end() :]
        return m

    def close(self) -> int:
        try:
            return self.proc.wait(30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            os.close(self.master)


def test_subscribe_in_the_sql_shell_streams_until_ctrl_c_and_the_shell_goes_on(up: Up) -> None:
    term = _Terminal(up)
    try:
        term.wait_for("tidegate=> ")
        term.type("CREATE TABLE shell_t (x int NOT NULL, s text);")
        term.wait_for(r"\nCREATE TABLE\r?\n")  # its answer, after the echoed statement
        up.ok("sql", "-c", "INSERT INTO shell_t VALUES (1, 'one')")
        term.type("SUBSCRIBE shell_t WITH (PROGRESS);")
        term.wait_for(r"mz_timestamp\tmz_progressed\tmz_diff\tx\ts\r?\n")
        term.wait_for(r"\d+\tfalse\t1\t1\tone\r?\n")  # the snapshot
        term.wait_for(r"\d+\ttrue\tNULL\tNULL\tNULL\r?\n")  # progress, as it moves
        up.ok("sql", "-c", "INSERT INTO shell_t VALUES (2, NULL)")
        term.wait_for(r"\d+\tfalse\t1\t2\tNULL\r?\n")  # shown as it happens
        term.proc.send_signal(signal.SIGINT)  # Ctrl-C
        term.wait_for(r"SUBSCRIBE stopped \(Ctrl-C\) after \d+ row\(s\)")
        term.type("SELECT count(*) AS n FROM shell_t;")  # the shell goes on
        term.wait_for(r"\(1 row\)")
        term.type("\\q")
        assert term.close() == 0
    finally:
        if term.proc.poll() is None:
            term.proc.kill()
    assert "Traceback" not in term.seen

    # A script: Ctrl-C ends the subscribe, and the script goes on with its next statement.
    script = ["-c", "SUBSCRIBE (SELECT x FROM shell_t WHERE x > 1)", "-c", "SELECT 7 AS seven"]
    sub = subprocess.Popen(
        [*TIDEGATE, "sql", "--json", "--data-dir", str(up.data), *script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert sub.stdout is not None
        row = json.loads(sub.stdout.readline())
        assert set(row) == {"mz_timestamp", "mz_diff", "x"} and (row["mz_diff"], row["x"]) == (1, 2)
        sub.send_signal(signal.SIGINT)
        out, err = sub.communicate(timeout=30)
    finally:
        if sub.poll() is None:
            sub.kill()
    assert sub.returncode == 0, err
    assert json.loads(out)["rows"] == [[7]] and "after 1 row(s)" in err


def test_half_sent_heads_and_startups_and_a_huge_statement_leave_the_controller_answering(
    up: Up,
) -> None:
    """Issue 37: 64 half-sent request heads used to take every place of the control endpoint
    (``/health`` got 503), half-sent startup packets held wire connections for ever, and a
    10 MB statement made the controller deaf for minutes. Now ``/health``, an authenticated
    call and a wire session answer through all three, and the statement is refused typed."""
    import psycopg

    info = ControllerInfo.read(up.data)
    host, port = info.address.rsplit(":", 1)
    assert info.sql is not None
    sql_host, sql_port = info.sql.rsplit(":", 1)
    health = b"GET /health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"

    def ask_health() -> bytes:
        with socket.create_connection((host, int(port)), timeout=60) as s:
            s.sendall(health)
            out = b""
            while chunk := s.recv(65536):
                out += chunk
            return out

    held: list[socket.socket] = []
    try:
        for _ in range(64):
            s = socket.create_connection((host, int(port)), timeout=60)
            s.sendall(b"GET /status HTTP/1.1\r\nHost: t\r\nAuthor")
            held.append(s)
            w = socket.create_connection((sql_host, int(sql_port)), timeout=60)
            w.sendall(struct.pack(">ii", 80, 196608) + b"user\x00mat")
            held.append(w)
        assert b" 200 " in ask_health().split(b"\r\n")[0]
        with ControlClient(info, timeout=60) as client:
            assert client.call("GET", "/status") is not None
            huge = "SELECT " + "+".join(["1"] * 5_000_000)
            with pytest.raises(ControlError) as refused:
                client.call("POST", "/sql", {"sql": huge})
            assert refused.value.type == "ProgramLimitExceeded"
            assert "statement of 10000006 bytes" in refused.value.message
        with psycopg.connect(
            host=sql_host,
            port=int(sql_port),
            user="materialize",
            password=os.environ.get("TIDEGATE_SQL_PASSWORD") or info.token,
            dbname="materialize",
            autocommit=True,
            connect_timeout=60,
        ) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        assert b" 200 " in ask_health().split(b"\r\n")[0]
    finally:
        for s in held:
            s.close()


def test_a_killed_replica_is_restarting_not_failed_and_its_error_clears_once_back(up: Up) -> None:
    pid = int((up.data / "replicas" / "r1.pid").read_text())
    before = len(re.findall(r" r1 failed: ", up.log()))
    os.kill(pid, signal.SIGKILL)
    seen: list[tuple[str, str | None]] = []

    def back() -> dict[str, Any] | None:
        (r1,) = up.status()["replicas"]
        seen.append((r1["status"], r1["last_error"]))
        return r1 if r1["status"] == "connected" and r1["epoch"] == 2 else None

    r1 = _until("r1 to come back", back, 120)
    down = [s for s in seen if s[0] != "connected"]
    assert down and all(status == "restarting" for status, _ in down), seen
    assert any("SIGKILL" in (error or "") for _, error in down), seen
    assert r1["last_error"] is None and r1["restarts"] == 1

    def rehydrated() -> str | None:
        log = up.log()
        return log if "r1 rehydrated 2 object(s) in" in log else None

    log = _until("rehydration", rehydrated)
    assert "r1 the process was killed by SIGKILL; restarting" in log
    assert re.search(r" r1 connected again \(epoch 2, down [\d.]+ s\)", log)
    assert len(re.findall(r" r1 failed: ", log)) == before + 1  # once, not per retry
    assert up.status()["replicas"][0]["objects_hydrated"] == 2


# -- the memory limit, and the errors collections answer ------------------------------------


def test_the_memory_limit_and_what_failed_over_it_show_in_status(tmp_path: Path) -> None:
    with _start(tmp_path / "data", tmp_path / "up.stderr", "--replica-memory-limit", "40MB") as up:
        (r1,) = up.status()["replicas"]
        assert r1["memory_limit"] == 40_000_000
        up.ok("create-table", "t", "k:int64", "v:string")
        rows = json.dumps([[i, "x" * 50] for i in range(1_000)])
        done = subprocess.run(
            [*TIDEGATE, "append", "t", "--rows", "-", "--data-dir", str(up.data)],
            input=rows,
            capture_output=True,
            text=True,
            timeout=90,
        )
        assert done.returncode == 0, done.stderr
        up.ok("create-index", "t", "--key", "k", "--name", "t_by_k")

        def refused() -> str | None:
            peek = up.run("peek", "t_by_k", "--key", "5")
            return peek.stderr if peek.returncode == 1 else None

        why = _until("the index to fail over the limit", refused)
        assert "exceeded the replica's memory limit" in why
        status = up.status()
        errors = {c["name"]: c["error"] for c in status["collections"]}
        assert errors["t"] is None
        assert "exceeded the replica's memory limit" in errors["t_by_k"]["message"]
        assert errors["t_by_k"]["source"] == "peek" and _ISO.fullmatch(errors["t_by_k"]["seen_iso"])
        text = up.ok("status")
        assert "38.1 MiB" in text
        assert re.search(r"  t_by_k \(u2\): dataflow u2 exceeded the replica's memory limit", text)


# -- a subscribe ended by its client is dropped in the controller ---------------------------


def test_a_subscribe_ended_by_its_client_is_dropped(tmp_path: Path) -> None:
    from tidegate.commands.service import ControlService
    from tidegate.replica.testing import in_process_replica
    from tidegate.runtime import Environment
    from tidegate.spec.plan import Schema

    async def main() -> None:
        with in_process_replica(tmp_path) as address, anyio.fail_after(120):
            async with Environment.open(tmp_path, replicas={"r1": address}) as env:
                await env.create_table("t", Schema.of(("x", "int64", False)))
                await env.append("t", [(1,)])
                service = ControlService(env)
                async with anyio.create_task_group() as tg:
                    served = await tg.start(serve_control, service.handle, "tok")
                    info = ControllerInfo(served, "tok", os.getpid(), str(tmp_path))
                    client = ControlClient(info, timeout=30)
                    lines = client.stream("POST", "/subscribe", {"name": "t"})
                    header = await anyio.to_thread.run_sync(next, lines)
                    batch = await anyio.to_thread.run_sync(next, lines)
                    assert header["columns"] == ["x"] and batch["updates"][0]["row"] == [1]
                    view = env.driver.ctl.compute.instance("default")
                    transient = [g for g in view.collection_ids() if g.namespace == "t"]
                    assert len(transient) == 1  # the subscribe
                    lines.close()
                    while [g for g in view.collection_ids() if g.namespace == "t"]:
                        await anyio.sleep(0.05)
                    tg.cancel_scope.cancel()

    anyio.run(main)


# -- a replica that cannot start is not recorded ------------------------------------------


def test_a_managed_replica_that_does_not_start_is_refused_and_not_recorded(tmp_path: Path) -> None:
    """``replica add`` of a replica whose process exits before it is ready: a typed refusal,
    and nothing changed (no catalog record, no orchestrator retrying behind the error)."""
    from tidegate.commands.control import Refusal
    from tidegate.commands.service import ControlService
    from tidegate.replica.testing import in_process_replica
    from tidegate.runtime import Environment
    from tidegate.runtime.orchestrator import Orchestrator

    failing = [sys.executable, "-c", "import sys; print('no', file=sys.stderr); sys.exit(3)"]

    async def main() -> None:
        with in_process_replica(tmp_path) as address, anyio.fail_after(120):
            async with (
                Orchestrator(tmp_path, command=failing, backoff_initial_s=0.05) as orchestrator,
                Environment.open(
                    tmp_path, replicas={"r1": address}, orchestrator=orchestrator
                ) as env,
            ):
                service = ControlService(env, orchestrator=orchestrator)
                with pytest.raises(Refusal) as refused:
                    await service.handle("POST", "/replica-add", {"name": "r2"})
                assert refused.value.type == "ReplicaStartFailed"
                assert "status 3" in refused.value.message
                assert [r.name for r in env.state.replicas] == ["r1"]
                assert orchestrator.status()["r2"].state == "stopped"
                assert [r["name"] for r in service.replicas()] == ["r1"]

    anyio.run(main)


def test_a_restarted_up_keeps_its_token_so_clients_keep_working(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with _start(data, tmp_path / "first.stderr"):
        token = ControllerInfo.read(data).token
    with _start(data, tmp_path / "second.stderr"):
        info = ControllerInfo.read(data)
        assert info.token == token
        # A client that read the token before the restart is let in with it.
        with ControlClient(replace(info, token=token), timeout=10) as c:
            assert "replicas" in c.call("GET", "/status")
