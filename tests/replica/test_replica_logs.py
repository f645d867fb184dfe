"""The replica's logs are JSON lines (structlog), the JVM's stderr included; ``--spark-conf``
reaches the session; the capture and the log4j wrapping on their own."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from replica_harness import replica_process
from spark_cluster import LOOPBACK_ENV

from tidegate.runtime.logs import wrap_line

pytestmark = pytest.mark.timeout(300)


def _records(text: str) -> list[dict[str, object]]:
    """Every line of ``text`` as JSON (fails on a line that is not one JSON object)."""
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        doc = json.loads(line)
        assert isinstance(doc, dict), line
        out.append(doc)
    return out


@pytest.mark.processes
def test_a_python_replica_logs_json_only(tmp_path: Path) -> None:
    with replica_process(tmp_path) as replica:
        assert replica.terminate(30) == 0
    records = _records(replica.stderr_path.read_text())
    events = [r["event"] for r in records]
    assert events[0] == "starting" and "listening" in events and events[-1] == "stopped"
    for r in records:
        assert {"event", "level", "logger", "ts", "component"} <= r.keys(), r
        assert r["component"] == "replica"
    (listening,) = (r for r in records if r["event"] == "listening")
    assert listening["logger"] == "tidegate.replica" and listening["level"] == "info"
    assert str(listening["ts"]).endswith("Z")


@pytest.mark.processes
@pytest.mark.slow
def test_spark_conf_reaches_the_session_and_the_jvm_lines_are_json(tmp_path: Path) -> None:
    with replica_process(
        tmp_path,
        *("--spark-master", "local[1]"),
        *("--spark-conf", "spark.sql.shuffle.partitions=3"),
        *("--spark-conf", "spark.tidegate.probe=hello world"),
        executor="spark",
        env=LOOPBACK_ENV,
        ready_timeout=180,
    ) as replica:
        assert replica.terminate(60) == 0
    records = _records(replica.stderr_path.read_text())  # every line (the JVM's too) is JSON
    (conf,) = (r for r in records if r["event"] == "spark_conf")
    assert conf["conf"] == {
        "spark.sql.shuffle.partitions": "3",
        "spark.tidegate.probe": "hello world",
    }
    # Spark's first lines (printed before log4j is set up) and log4j's, wrapped.
    captured = [r for r in records if r.get("stream") == "stderr"]
    assert captured, "no line of the JVM was captured"
    assert any("log4j" in str(r["event"]) for r in captured)
    for r in captured:
        assert str(r["logger"]) == "stderr" or str(r["logger"]).startswith("jvm."), r
    assert not any(r["event"] == "spark_ui" for r in records)  # the UI is off by default


def test_log4j_lines_keep_their_level_and_class() -> None:
    line = "25/11/25 09:00:00 WARN NativeCodeLoader: Unable to load native-hadoop library\n"
    assert wrap_line(line) == (
        "jvm.NativeCodeLoader",
        logging.WARNING,
        "Unable to load native-hadoop library",
        {"stream": "stderr", "jvm_ts": "25/11/25 09:00:00"},
    )
    assert wrap_line('Setting default log level to "WARN".\n') == (
        "stderr",
        logging.INFO,
        'Setting default log level to "WARN".',
        {"stream": "stderr"},
    )
    assert wrap_line('{"event": "x"}\n') is None  # JSON already: passed through


@pytest.mark.processes
def test_the_capture_wraps_a_child_process_stderr(tmp_path: Path) -> None:
    """What a child (the JVM) writes to the inherited descriptor 2 comes out as JSON lines."""
    script = textwrap.dedent(
        """
        import subprocess, sys
        from tidegate.runtime.logs import capture_stderr, configure_logging, log_event
        cap = capture_stderr()
        log = configure_logging(stream=cap.original, static={"component": "test"})
        log_event(log, "before", n=1)
        subprocess.run(["sh", "-c", "echo '25/11/25 09:00:00 ERROR Boom: it broke' >&2; echo plain >&2"])
        print("stray", file=sys.stderr, flush=True)
        cap.close()
        log_event(log, "after")
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert out.returncode == 0, out.stderr
    records = _records(out.stderr)
    by_event = {r["event"]: r for r in records}
    assert by_event["before"]["n"] == 1 and by_event["before"]["component"] == "test"
    assert by_event["it broke"]["logger"] == "jvm.Boom"
    assert by_event["it broke"]["level"] == "error"
    assert by_event["plain"]["logger"] == "stderr"
    assert by_event["stray"]["logger"] == "stderr"
    assert "after" in by_event
