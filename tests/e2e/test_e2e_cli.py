"""The command line for real: ``tidegate up`` with ``status/append/peek`` against it, and ``tidegate demo``."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tidegate.commands.control import ControllerInfo

pytestmark = [pytest.mark.processes, pytest.mark.timeout(300)]

TIDEGATE = [sys.executable, "-m", "tidegate"]


def run(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*TIDEGATE, *argv], capture_output=True, text=True, timeout=timeout)


def wait_for_controller(data_dir: Path, proc: subprocess.Popen[str], timeout: float) -> None:
    """Until ``tidegate up`` runs with its replicas connected (``status --wait``)."""
    deadline = time.monotonic() + timeout
    while not ControllerInfo.path(data_dir).exists():
        assert proc.poll() is None, f"tidegate up exited with {proc.returncode}"
        assert time.monotonic() < deadline, "tidegate up did not write controller.json"
        time.sleep(0.2)
    ready = run("status", "--data-dir", str(data_dir), "--wait", "--timeout", str(timeout))
    assert ready.returncode == 0, ready.stdout + ready.stderr


def test_up_serves_status_append_and_peek_until_sigterm(e2e: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    log = open(tmp_path / "up.log", "w")  # noqa: SIM115
    up = subprocess.Popen(
        [*TIDEGATE, "up", "--data-dir", str(data), "--executor", "python", "--metrics", ":0"],
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_for_controller(data, up, 120)
        d = ["--data-dir", str(data)]
        # A second `up` on the same directory is refused while the first runs.
        second = run("up", *d, "--executor", "python", timeout=30)
        assert second.returncode != 0 and "already serves" in second.stderr

        status = run("status", *d, "--json")
        assert status.returncode == 0, status.stderr
        got = json.loads(status.stdout)
        assert got["collections"] == []
        assert [r["name"] for r in got["replicas"]] == ["r1"]
        # The metrics address is in controller.json and in status, and serves metrics.
        metrics = ControllerInfo.read(data).metrics
        assert metrics is not None and got["metrics"] == metrics
        assert f"metrics: http://{metrics}/metrics" in run("status", *d).stdout
        with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=30) as scraped:
            assert b"tidegate_controller_" in scraped.read()

        missing = run("append", "orders", "--rows", "[[1]]", *d)
        assert missing.returncode == 1 and "UnknownCollection" in missing.stderr
    finally:
        up.send_signal(signal.SIGTERM)
        code = up.wait(60)
        log.close()
    assert code == 0, (tmp_path / "up.log").read_text()[-2000:]
    assert not ControllerInfo.path(data).exists()
    pids = [int(p.read_text()) for p in (data / "replicas").glob("*.pid")]
    assert not any(e2e.pid_alive(p) for p in pids)


def test_up_then_append_and_peek_a_table_and_its_index(e2e: Any, tmp_path: Path) -> None:
    """Tables and indexes made with the embedding API, then served by `up` to the CLI."""
    data = tmp_path / "data"
    with e2e.open_live(data, "cli", 1, executor="python") as live:
        from tidegate.dsl import Schema, count, sum_
        from tidegate.spec.frontier import LagWriteFrontier

        schema = Schema.of(("customer", "string", False), ("amount", "int64", False))
        live.call(lambda: live.env.create_table("orders", schema))
        totals = (
            live.sync(lambda: live.env.table("orders"))
            .group_by("customer")
            .agg(count(), sum_("amount"))
        )
        live.call(lambda: live.env.create_index(totals, ["customer"], name="totals"))
        # Peeks below at the append's time, seconds later: keep a minute of history
        # (the default keeps one second, as Materialize's does). Read policies are
        # in the catalog, so `up` keeps them.
        history = LagWriteFrontier(lag=60_000, max_granularity=1000)
        for name in ("orders", "totals"):
            live.call(live.env.set_read_policy, name, history)
    up = subprocess.Popen(
        [*TIDEGATE, "up", "--data-dir", str(data), "--executor", "python"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        wait_for_controller(data, up, 120)
        d = ["--data-dir", str(data)]
        a = run("append", "orders", "--rows", '[["ann", 20], ["bob", 5], ["ann", 7]]', *d, "--json")
        assert a.returncode == 0, a.stderr
        ts = json.loads(a.stdout)["time"]
        p = run("peek", "totals", "--at", str(ts), *d, "--json")
        assert p.returncode == 0, p.stderr
        assert sorted(map(tuple, (r for r, _ in json.loads(p.stdout)["rows"]))) == [
            ("ann", 2, 27),
            ("bob", 1, 5),
        ]
        k = run("peek", "totals", "--at", str(ts), "--key", "bob", *d)
        assert k.returncode == 0 and "bob" in k.stdout and "ann" not in k.stdout
        r = run("append", "orders", "--rows", '[[["ann", 20], -1]]', *d, "--json")
        ts2 = json.loads(r.stdout)["time"]
        p2 = json.loads(run("peek", "totals", "--at", str(ts2), *d, "--json").stdout)
        assert [["ann", 1, 7], 1] in p2["rows"]
        t = run("peek", "orders", "--at", str(ts2), *d)
        assert t.returncode == 0 and f"orders (u1) at {ts2} (" in t.stdout
        assert "Z): 2 row(s)" in t.stdout  # the time, and its ISO 8601 form beside it
        fresh = json.loads(run("peek", "totals", *d, "--json").stdout)  # the freshest time
        assert fresh["freshest"] and fresh["time"] >= ts2 and fresh["time_iso"].endswith("Z")
        assert [["bob", 1, 5], 1] in fresh["rows"]
        s = run("status", *d)
        assert s.returncode == 0
        for word in ("orders", "totals", "table", "index", "r1", "connected"):
            assert word in s.stdout
    finally:
        up.send_signal(signal.SIGINT)
        assert up.wait(60) == 0


@pytest.mark.slow
def test_demo_runs_end_to_end_on_spark_and_passes(tmp_path: Path) -> None:
    """What `make run` runs: two Spark replicas, a load-generator source, a kill, a controller
    restart; under 3 minutes."""
    t0 = time.monotonic()
    done = subprocess.run(
        [*TIDEGATE, "demo", "--data-dir", str(tmp_path / "demo")],
        capture_output=True,
        text=True,
        timeout=280,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    took = time.monotonic() - t0
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    out = done.stdout
    assert "PASS: every answer matched the reference" in out
    assert "= reference ✓" in out and "0 violation(s)" in out
    # r1's outage, said once (not once per retry of the controller), and its end
    assert out.count("event: r1 failed") == 1, out
    assert "event: r1 connected again" in out and "catalog restored" in out
    # the source: running, read twice with more bids the second time, each read equal to the
    # load generator's bids at the offsets of its time; running again after the restart
    reads = re.findall(
        r"peek bids_by_item_idx at .*: (\d+) bids? \(offsets \[0, (\d+)\)\) = load generator ✓",
        out,
    )
    assert len(reads) == 2, out
    (n1, b1), (n2, b2) = ((int(n), int(b)) for n, b in reads)
    assert n1 == b1 < b2 == n2  # a bid per offset
    assert len(re.findall(r"\bbids\s+load-generator\s+running\b", out)) == 2
    assert "1970-01-01" not in out  # a source's upper is shown once it holds data
    assert "!= load generator" not in out
    assert re.search(r"source bids running again: offsets \[0, (\d+)\)", out)
    assert re.search(r"source reads checked against the load generator\s+3\b", out)
    print(f"tidegate demo took {took:.0f} s")


def test_ddl_through_the_cli_against_up(tmp_path: Path) -> None:
    """A CLI user builds everything: create-table, append, create-index, create-view, peek, drop."""
    data = tmp_path / "data"
    up = subprocess.Popen(
        [*TIDEGATE, "up", "--data-dir", str(data), "--executor", "python"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        wait_for_controller(data, up, 120)
        d = ["--data-dir", str(data)]
        t = run("create-table", "orders", "customer:string", "amount:int64", *d)
        assert t.returncode == 0 and "created table orders (u1)" in t.stdout, t.stderr
        a = run("append", "orders", "--rows", '[["ann", 20], ["bob", 5], ["ann", 7]]', *d, "--json")
        assert a.returncode == 0, a.stderr
        i = run("create-index", "orders", "--key", "customer", "--name", "by_customer", *d)
        assert i.returncode == 0 and "on orders (customer)" in i.stdout, i.stderr
        plan = tmp_path / "big.json"
        plan.write_text(
            json.dumps(
                {
                    "op": "filter",
                    "input": {"op": "get", "name": "orders"},
                    "predicates": [
                        {
                            "kind": "binary",
                            "func": "gt",
                            "left": {"kind": "column", "index": 1},
                            "right": {"kind": "literal", "value": 6, "type": "int64"},
                        }
                    ],
                }
            )
        )
        v = run("create-view", "big", "--plan", str(plan), *d)
        assert v.returncode == 0, v.stderr
        # Created after the append: their since is later; the freshest time sees every append.
        k = run("peek", "by_customer", "--key", "ann", *d, "--json")
        assert k.returncode == 0, k.stderr
        assert sorted(r for r, _ in json.loads(k.stdout)["rows"]) == [["ann", 7], ["ann", 20]]
        b = run("peek", "big", *d, "--json")
        assert sorted(r for r, _ in json.loads(b.stdout)["rows"]) == [["ann", 7], ["ann", 20]]
        refused = run("drop", "orders", *d)
        assert refused.returncode == 1 and "HasDependents" in refused.stderr
        dropped = run("drop", "orders", "--cascade", *d, "--json")
        assert dropped.returncode == 0, dropped.stderr
        names = {x["name"] for x in json.loads(dropped.stdout)["dropped"]}
        assert names == {"orders", "by_customer", "big"}
        s = json.loads(run("status", *d, "--json").stdout)
        assert s["collections"] == []
    finally:
        up.send_signal(signal.SIGINT)
        assert up.wait(60) == 0
