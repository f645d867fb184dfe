"""``tidegate spark``: a local Spark standalone cluster for ``--spark-master``, from the pyspark
package's own scripts.

::

    tidegate spark start-master                 # prints spark://127.0.0.1:7077 and its UI
    tidegate spark start-worker --cores 2       # registers with that master
    tidegate up --spark-master spark://127.0.0.1:7077
    tidegate spark stop                         # stops the workers, then the master

The master and the workers are Spark's own daemons (``org.apache.spark.deploy.master.Master``
and ``...worker.Worker``, run with ``spark-class`` from the installed pyspark), bound to
127.0.0.1 unless ``--host`` says otherwise, detached from the terminal. Each records
itself in ``DIR`` (default ``DATA_DIR/spark``): ``master.json`` / ``worker-N.json``
(pid, URL, web UI), its log ``master.log`` / ``worker-N.log``, and the executors' work
directories under ``work/``. ``start-worker`` without a master URL joins the master of
``DIR``. A command returns once the daemon says it is up (the master listening, the worker
registered), or fails with the log's end. ``stop`` ends what ``DIR`` records (SIGTERM,
then SIGKILL after ``--timeout``), checking each pid is still that daemon. ``status``
says what runs.

Each replica ``tidegate up`` starts names its Spark application after the environment and
the replica (``tidegate tidegate-data r1``: the data directory's name, then the replica's),
so the master's UI tells them apart; with
``--spark-ui`` each one's own UI is in ``tidegate status``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from tidegate.runtime.defaults import default_data_dir

__all__ = ["Daemon", "SparkError", "add_parser", "running", "start_master", "start_worker", "stop"]

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
_MASTER_UP = re.compile(r"Starting Spark master at (spark://\S+)")
_WORKER_UP = re.compile(r"Successfully registered with master (spark://\S+)")
_WEB_UI = re.compile(r"Bound \w+WebUI to \S+, and started at (https?://\S+)")


class SparkError(Exception):
    """A daemon did not start (its log's end says why), or Spark is not installed."""


@dataclass(frozen=True)
class Daemon:
    """A master or worker this command started: what ``DIR/<name>.json`` records."""

    name: str
    pid: int
    url: str
    """The master's URL (a worker's: the master it registered with)."""
    web_ui: str | None
    log: str


def spark_home() -> str:
    """The pyspark package's directory, which holds Spark's ``bin/spark-class`` [SparkError]."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise SparkError("pyspark is not installed")
    return str(next(iter(spec.submodule_search_locations)))


def start_master(
    dir: Path,
    *,
    host: str = "127.0.0.1",
    port: int = 7077,
    webui_port: int = 8080,
    memory: str = "256m",
    timeout_s: float = 120.0,
) -> Daemon:
    """Start a standalone master bound to ``host`` (port 0: any free one) and record it in
    ``dir``; it returns once the master listens [SparkError]."""
    args = ("--host", host, "--port", str(port), "--webui-port", str(webui_port))
    return _start(dir, "master", MASTER_CLASS, args, host, memory, _MASTER_UP, timeout_s)


def start_worker(
    dir: Path,
    master: str | None = None,
    *,
    host: str = "127.0.0.1",
    cores: int | None = None,
    memory: str | None = None,
    webui_port: int = 0,
    daemon_memory: str = "256m",
    timeout_s: float = 120.0,
) -> Daemon:
    """Start a worker of ``master`` (default: the master ``dir`` records) with ``cores`` and
    ``memory`` for executors (default: Spark's, all of the machine's); it returns once the
    worker has registered [SparkError]."""
    if master is None:
        recorded = _read(dir / "master.json")
        if recorded is None:
            raise SparkError(f"no master recorded in {dir}: give its URL, or start-master first")
        master = recorded.url
    args = [master, "--host", host, "--webui-port", str(webui_port)]
    if cores is not None:
        args += ["--cores", str(cores)]
    if memory is not None:
        args += ["--memory", memory]
    n = 1
    while (dir / f"worker-{n}.json").exists():
        n += 1
    return _start(
        dir, f"worker-{n}", WORKER_CLASS, tuple(args), host, daemon_memory, _WORKER_UP, timeout_s
    )


def running(dir: Path) -> list[Daemon]:
    """The daemons ``dir`` records that still run (records of others are removed)."""
    out = []
    for path in sorted(dir.glob("*.json")):
        d = _read(path)
        if d is None:
            continue
        if _alive(d.pid):
            out.append(d)
        else:
            path.unlink(missing_ok=True)
    return out


def stop(dir: Path, *, timeout_s: float = 30.0) -> list[Daemon]:
    """Stop the daemons ``dir`` records, workers first (SIGTERM to each one's process group,
    SIGKILL after ``timeout_s``); those it stopped."""
    daemons = sorted(running(dir), key=lambda d: d.name == "master")
    for d in daemons:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(d.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    for d in daemons:
        while _alive(d.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _alive(d.pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(d.pid, signal.SIGKILL)
            while _alive(d.pid):
                time.sleep(0.05)
        (dir / f"{d.name}.json").unlink(missing_ok=True)
    return daemons


def _start(
    dir: Path,
    name: str,
    cls: str,
    args: tuple[str, ...],
    host: str,
    daemon_memory: str,
    up: re.Pattern[str],
    timeout_s: float,
) -> Daemon:
    home = spark_home()
    dir = dir.absolute()
    dir.mkdir(parents=True, exist_ok=True)
    log = dir / f"{name}.log"
    env = {
        **os.environ,
        "SPARK_HOME": home,
        "SPARK_LOCAL_IP": host,
        "SPARK_LOCAL_HOSTNAME": host,  # the address its URLs show
        "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
        "SPARK_DAEMON_MEMORY": daemon_memory,
        "SPARK_WORKER_DIR": str(dir / "work"),
        "SPARK_LOG_DIR": str(dir),
    }
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [os.path.join(home, "bin", "spark-class"), cls, *args],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # detached: a terminal's Ctrl-C does not reach it
        )
    deadline = time.monotonic() + timeout_s
    while True:
        text = log.read_text(errors="replace")
        m = up.search(text)
        ui = _WEB_UI.search(text)
        if m is not None and (ui is not None or name != "master"):  # the master's UI: next
            daemon = Daemon(name, proc.pid, m.group(1), ui.group(1) if ui else None, str(log))
            (dir / f"{name}.json").write_text(json.dumps(asdict(daemon)) + "\n")
            return daemon
        if proc.poll() is not None or time.monotonic() > deadline:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            why = "exited" if proc.returncode != -signal.SIGKILL else "did not start in time"
            tail = "\n".join(text.splitlines()[-15:])
            raise SparkError(f"the Spark {name} {why}; the end of {log}:\n{tail}")
        time.sleep(0.2)


def _read(path: Path) -> Daemon | None:
    try:
        return Daemon(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def _alive(pid: int) -> bool:
    """Whether ``pid`` is one of Spark's daemons (not a pid reused by something else)."""
    with contextlib.suppress(ChildProcessError):  # ours (started in this process): reap it
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"org.apache.spark.deploy." in cmdline


# -- the command ---------------------------------------------------------------------------


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "spark",
        help="a local Spark standalone cluster (master, workers) for --spark-master",
        description=__doc__,
    )
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")

    def common(q: argparse.ArgumentParser) -> None:
        q.add_argument(
            "--data-dir",
            default=default_data_dir(),
            help="default: $TIDEGATE_DATA_DIR, else ./tidegate-data",
        )
        q.add_argument("--dir", help="where the daemons' records and logs go (DATA_DIR/spark)")
        q.add_argument("--timeout", type=float, default=120.0, help="seconds to wait")
        q.add_argument("--json", action="store_true", help="print the records as JSON")

    m = actions.add_parser("start-master", help="start a master (on 127.0.0.1:7077)")
    m.add_argument("--host", default="127.0.0.1", help="the address it binds to")
    m.add_argument("--port", type=int, default=7077, help="its port (0: any free one)")
    m.add_argument("--webui-port", type=int, default=8080, help="its UI's port (0: any)")
    common(m)
    w = actions.add_parser("start-worker", help="start a worker of a master")
    w.add_argument("master", nargs="?", help="spark://HOST:PORT (default: the recorded master)")
    w.add_argument("--host", default="127.0.0.1", help="the address it binds to")
    w.add_argument("--cores", type=int, help="cores for executors (default: all)")
    w.add_argument("--memory", help="memory for executors, like 2g (default: all but 1 GiB)")
    w.add_argument("--webui-port", type=int, default=0, help="its UI's port (0: any)")
    common(w)
    s = actions.add_parser("stop", help="stop the workers and the master started here")
    common(s)
    st = actions.add_parser("status", help="the master and workers started here that run")
    common(st)
    p.set_defaults(func=run_spark)


def run_spark(args: argparse.Namespace) -> int:
    dir = Path(args.dir) if args.dir else Path(args.data_dir) / "spark"
    try:
        if args.action == "start-master":
            done = [
                start_master(
                    dir,
                    host=args.host,
                    port=args.port,
                    webui_port=args.webui_port,
                    timeout_s=args.timeout,
                )
            ]
        elif args.action == "start-worker":
            done = [
                start_worker(
                    dir,
                    args.master,
                    host=args.host,
                    cores=args.cores,
                    memory=args.memory,
                    webui_port=args.webui_port,
                    timeout_s=args.timeout,
                )
            ]
        elif args.action == "stop":
            done = stop(dir, timeout_s=args.timeout)
        else:
            done = running(dir)
    except SparkError as e:
        print(f"tidegate spark: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps([asdict(d) for d in done]))
        return 0
    verb = {"stop": "stopped", "status": "running"}.get(args.action, "started")
    if not done and args.action in ("stop", "status"):
        print(f"no Spark daemon recorded in {dir} runs")
    for d in done:
        print(_line(d, verb))
    if args.action == "start-master":
        print(f"use it with: tidegate up --spark-master {done[0].url}")
    return 0


def _line(d: Daemon, verb: str) -> str:
    role = "master" if d.name == "master" else f"worker {d.name} of"
    ui = f", UI {d.web_ui}" if d.web_ui else ""
    return f"{verb} Spark {role} {d.url} (pid {d.pid}{ui}); log {d.log}"
