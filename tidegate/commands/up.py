"""``tidegate up``: the controller, its managed replicas and the shard store, until Ctrl-C/SIGTERM.

It serves the control endpoint (:mod:`.control`) that ``tidegate status``,
``peek`` and the other commands talk to, and writes ``DATA_DIR/controller.json``,
first: while the replicas start (seconds on Spark) ``status`` answers
``starting`` with their processes, and the other commands wait (:mod:`.gate`).
Then it opens an ``Environment`` on the data directory (embedded defaults: a
file blob store and a SQLite consensus in ``DATA_DIR``, managed replica
processes on local Spark) and serves it. With ``--metrics HOST:PORT`` it also
serves the controller's Prometheus metrics (:mod:`tidegate.runtime.metrics`)
on ``http://HOST:PORT/metrics``, records that address in ``controller.json``
and shows it in ``tidegate status``; and every managed replica (the storage
replica too) serves its own, on HOST and a free port of its own (kept across
its restarts while free), which ``tidegate status`` shows beside its name
(``metrics`` of each replica in ``status --json``).

What it does goes to stderr for people (:mod:`.events`): its own lines
(``tidegate up: ...``), a spinner while it starts (on a terminal), then one
line per replica event -- started, connected, failed (once per outage, with
its reason), restarting, rehydrated (with the time it took), dropped. Its logs
are JSON lines on stderr as well (:mod:`tidegate.runtime.logs`).

On SIGINT or SIGTERM (during start-up too) it refuses new requests, gives
those in flight up to 3 s, closes the environment (which stops its replicas),
stops serving and removes the file; a second signal exits at once.
"""

from __future__ import annotations

import argparse
import os
import signal
import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tidegate.runtime.defaults import default_data_dir

from .control import ControllerInfo, NoController, stored_token

if TYPE_CHECKING:
    from .events import ReplicaEvents, Reporter
    from .gate import Gate

__all__ = ["add_parser", "run_up"]


def _host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host or "127.0.0.1", int(port)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "up",
        help="run the controller, managed replicas and the shard store until Ctrl-C",
        description=__doc__,
    )
    p.add_argument(
        "--data-dir",
        default=default_data_dir(),
        help="default: $TIDEGATE_DATA_DIR, else ./tidegate-data",
    )
    p.add_argument(
        "--replicas",
        type=int,
        default=None,
        help="managed replica processes r1..rN (default: those recorded in the data dir, else 1)",
    )
    p.add_argument("--spark-master", default="local[1]", help="Spark master of each replica")
    p.add_argument(
        "--executor", default="spark", choices=["spark", "python"], help="replica executor"
    )
    p.add_argument(
        "--listen-api",
        type=_host_port,
        default=("127.0.0.1", 0),
        metavar="HOST:PORT",
        help="where the control endpoint listens (default: loopback, a free port)",
    )
    p.add_argument(
        "--replica-memory-limit",
        type=_byte_size,
        default=None,
        metavar="SIZE",
        help="memory limit of each replica (e.g. 4GiB): above it the replica fails the dataflow "
        "holding the most state, whose collections then answer an error (default: none)",
    )
    p.add_argument(
        "--replica-sizes",
        type=_replica_sizes,
        default=None,
        metavar="FILE",
        help="replica sizes beside small, medium and large: a JSON object of size name to "
        '{"cores", "executor_memory", "driver_memory", "state_memory_rows", "memory_limit" '
        '(bytes, or "2GiB"), "spark_master"} (any may be left out)',
    )
    p.add_argument(
        "--default-replica-size",
        default=None,
        metavar="SIZE",
        help="the size of a cluster's replicas when CREATE CLUSTER names none (default: the "
        "environment's own replica settings, as the default cluster's replicas have)",
    )
    p.add_argument(
        "--spark-conf",
        type=_spark_conf_pair,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark property of every replica's session (repeatable)",
    )
    p.add_argument("--spark-ui", action="store_true", help="replicas serve Spark's web UI")
    p.add_argument(
        "--storage-replica",
        metavar="HOST:PORT",
        default=None,
        help="where the storage replica (sources and sinks) listens, a `tidegate replica "
        "--services storage` you run (default: a managed one, started with the first source "
        "or sink)",
    )
    p.add_argument(
        "--sql-listen",
        type=_sql_listen,
        default=None,
        metavar="HOST:PORT",
        help="where the PostgreSQL wire protocol listens, for psql, drivers and dbt (default: "
        "127.0.0.1:6875, or a free port if that one is taken; 'off': not served)",
    )
    p.add_argument(
        "--sql-auth",
        choices=["scram-sha-256", "password", "trust"],
        default="scram-sha-256",
        help="how SQL clients authenticate: SCRAM-SHA-256 (the default), a cleartext password "
        "(over TLS only; plain connections fall back to SCRAM), or trust (anyone, any user). "
        "The password is $TIDEGATE_SQL_PASSWORD, else the control endpoint's token; "
        "DATA_DIR/pgpass holds it for psql (PGPASSFILE)",
    )
    p.add_argument(
        "--rotate-token",
        action="store_true",
        help="give the control endpoint (and SQL, where it is the password) a new token; "
        "without it, up keeps the token of the last up on this data directory "
        "(DATA_DIR/control-token), so clients keep working across a restart",
    )
    p.add_argument("--tls-cert", default=None, help="certificate (PEM) for TLS on the SQL port")
    p.add_argument("--tls-key", default=None, help="its private key (PEM)")
    p.add_argument(
        "--metrics",
        type=_host_port,
        default=None,
        metavar="HOST:PORT",
        help="serve the controller's Prometheus metrics on http://HOST:PORT/metrics (0: a free "
        "port); each managed replica serves its own on HOST, a free port each (`tidegate status` "
        "shows where)",
    )
    p.set_defaults(func=run_up)


def _sql_listen(text: str) -> tuple[str, int] | bool:
    """``HOST:PORT``, or False for ``off``."""
    if text.lower() in ("off", "none", "no"):
        return False
    return _host_port(text)


def _spark_conf_pair(text: str) -> tuple[str, str]:
    from tidegate.replica.main import spark_conf_pair

    return spark_conf_pair(text)


def _replica_sizes(path: str) -> dict[str, Any]:
    """``--replica-sizes FILE``: sizes by name, each a :class:`ReplicaSize` [argparse error]."""
    import json

    from tidegate.runtime.sizes import ReplicaSize

    try:
        with open(path) as f:
            raw = json.load(f)
        if not isinstance(raw, dict):
            raise ValueError("the file holds a JSON object of size name to size")
        out = {}
        for name, spec in raw.items():
            spec = dict(spec)
            if isinstance(spec.get("memory_limit"), str):
                spec["memory_limit"] = _byte_size(spec["memory_limit"])
            out[str(name)] = ReplicaSize(**spec)
        return out
    except (OSError, ValueError, TypeError) as e:
        raise argparse.ArgumentTypeError(f"--replica-sizes {path}: {e}") from None


def _byte_size(text: str) -> int:
    from tidegate.replica.main import byte_size

    return byte_size(text)


def _refuse_if_running(data_dir: Path) -> None:
    try:
        info = ControllerInfo.read(data_dir)
    except NoController:
        return
    if info.alive():
        raise SystemExit(
            f"tidegate up: a controller (pid {info.pid}) already serves {data_dir} at {info.address}"
        )


async def _up(args: argparse.Namespace, reporter: Reporter) -> None:
    import anyio

    from tidegate.runtime.files import mkdir_private
    from tidegate.runtime.orchestrator import Orchestrator

    from .control import serve_control
    from .events import ReplicaEvents
    from .gate import Gate

    began = time.monotonic()
    data_dir = Path(args.data_dir)
    mkdir_private(data_dir)
    _refuse_if_running(data_dir)
    events = ReplicaEvents(reporter)
    orchestrator = Orchestrator(
        data_dir,
        executor=args.executor,
        spark_master=args.spark_master,
        extra_args=_memory_limit_args(args.replica_memory_limit),
        spark_conf=dict(args.spark_conf),
        spark_ui=args.spark_ui,
        metrics_host=None if args.metrics is None else args.metrics[0],
        on_status=events.on_process,
    )
    gate = Gate(orchestrator=orchestrator, replica_memory_limit=args.replica_memory_limit)
    token = stored_token(data_dir, rotate=args.rotate_token)
    host, port = args.listen_api
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with anyio.create_task_group() as server:
            address = await server.start(
                partial(serve_control, host=host, port=port), gate.handle, token
            )
            written = [ControllerInfo(address, token, os.getpid(), str(data_dir.resolve()))]
            written[0].write()
            reporter.say(
                f"controller pid {os.getpid()}, data in {data_dir.resolve()}; "
                f"`tidegate status` answers at http://{address} while replicas start"
            )
            try:
                with anyio.CancelScope() as running:
                    # Beside the server, not inside ``running``: a second signal still counts.
                    server.start_soon(_on_signals, signals, gate, running, reporter, written)
                    await _run(args, gate, orchestrator, events, reporter, written, began)
            finally:
                reporter.waiting(None)
                written[-1].remove()
                server.cancel_scope.cancel()
    reporter.say("stopped")


async def _on_signals(
    signals: Any,
    gate: Gate,
    running: Any,
    reporter: Reporter,
    written: list[ControllerInfo],
) -> None:
    """The first SIGINT/SIGTERM shuts down gracefully; a second one exits at once."""
    async for signum in signals:
        reporter.say(f"{signal.Signals(signum).name}, shutting down")
        break
    else:  # pragma: no cover - the receiver never ends by itself
        return
    await gate.stop()
    running.cancel()
    async for signum in signals:
        reporter.say(f"{signal.Signals(signum).name} again: exiting now")
        written[-1].remove()
        os._exit(130)  # managed replicas follow their parent out (--exit-with-parent)


async def _run(
    args: argparse.Namespace,
    gate: Gate,
    orchestrator: Any,
    events: ReplicaEvents,
    reporter: Reporter,
    written: list[ControllerInfo],
    began: float,
) -> None:
    """Open the environment (its replicas starting), then serve it until cancelled."""
    import anyio

    from tidegate.runtime.environment import Environment
    from tidegate.runtime.heap import freeze_startup_heap

    from .service import ControlService

    waiting = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(_show_waiting, reporter, orchestrator, began, waiting)
        try:
            async with (
                orchestrator,
                Environment.open(
                    args.data_dir,
                    replicas=args.replicas,
                    spark_master=args.spark_master,
                    executor=args.executor,
                    orchestrator=orchestrator,
                    storage_replica=args.storage_replica,
                    replica_metrics=args.metrics is not None,
                    replica_sizes=args.replica_sizes,
                    default_replica_size=args.default_replica_size,
                ) as env,
            ):
                waiting.set()
                reporter.waiting(None)
                metrics_address = _serve_metrics(args, env, tg, reporter)
                if metrics_address is not None:
                    info = written[-1]
                    written.append(
                        ControllerInfo(
                            info.address, info.token, info.pid, info.data_dir, metrics_address
                        )
                    )
                    written[-1].write()
                service = ControlService(
                    env,
                    orchestrator=orchestrator,
                    metrics=metrics_address,
                    replica_memory_limit=args.replica_memory_limit,
                    started_ms=gate.started_ms,
                )
                gate.run(service)
                sql_address = await _serve_sql(args, env, tg, reporter, written)
                if sql_address is not None:
                    info = written[-1]
                    written.append(
                        ControllerInfo(
                            info.address,
                            info.token,
                            info.pid,
                            info.data_dir,
                            info.metrics,
                            sql_address,
                        )
                    )
                    written[-1].write()
                events.attach(env)
                tg.start_soon(events.follow)
                freeze_startup_heap()
                where = ControllerInfo.path(Path(args.data_dir).resolve())
                reporter.say(
                    f"ready in {time.monotonic() - began:.1f} s: control endpoint "
                    f"http://{written[-1].address} (see {where}); Ctrl-C to stop"
                )
                await anyio.sleep_forever()
        finally:
            waiting.set()
            tg.cancel_scope.cancel()


DEFAULT_SQL_PORT = 6875
"""Materialize's SQL port."""


async def _serve_sql(
    args: argparse.Namespace,
    env: Any,
    tg: Any,
    reporter: Reporter,
    written: list[ControllerInfo],
) -> str | None:
    """Serve the PostgreSQL wire protocol (until the task group ends); its ``HOST:PORT``."""
    import errno

    from tidegate.runtime.pgwire import AuthConfig, PgwireOptions, PgwireServer, tls_context

    given = getattr(args, "sql_listen", None)
    if given is False:
        return None
    explicit = given is not None
    listen = given if explicit else ("127.0.0.1", DEFAULT_SQL_PORT)
    password = os.environ.get("TIDEGATE_SQL_PASSWORD") or written[-1].token
    method = getattr(args, "sql_auth", "scram-sha-256")
    auth = AuthConfig.trust() if method == "trust" else AuthConfig(password, method)  # type: ignore[arg-type]
    tls = None
    if args.tls_cert or args.tls_key:
        if not (args.tls_cert and args.tls_key):
            raise SystemExit("tidegate up: --tls-cert and --tls-key go together")
        tls = tls_context(args.tls_cert, args.tls_key)
    server = PgwireServer(env, PgwireOptions(auth, tls))
    assert isinstance(listen, tuple)
    host, port = listen
    try:
        bound = await tg.start(partial(server.serve, host, port))
    except OSError as e:
        if explicit or e.errno != errno.EADDRINUSE:
            raise
        reporter.say(f"port {port} is taken; the SQL port is a free one instead")
        bound = await tg.start(partial(server.serve, host, 0))
    address = f"{bound[0]}:{bound[1]}"
    _write_pgpass(Path(args.data_dir), bound, password)
    reporter.say(
        f"SQL (PostgreSQL protocol) on {address}: "
        f"PGPASSFILE={Path(args.data_dir).resolve() / 'pgpass'} "
        f"psql -h {bound[0]} -p {bound[1]} -U materialize materialize"
    )
    return address


def _write_pgpass(data_dir: Path, bound: tuple[str, int], password: str) -> None:
    """``DATA_DIR/pgpass``: the SQL password in libpq's password file format (mode 0600)."""
    escaped = password.replace("\\", "\\\\").replace(":", "\\:")
    target = data_dir / "pgpass"
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(f"{bound[0]}:{bound[1]}:*:*:{escaped}\nlocalhost:{bound[1]}:*:*:{escaped}\n")


def _serve_metrics(args: argparse.Namespace, env: Any, tg: Any, reporter: Reporter) -> str | None:
    """With ``--metrics``, serve the controller's metrics (until the task group ends)."""
    if args.metrics is None:
        return None
    import anyio

    from tidegate.runtime.metrics import ControllerMetrics

    metrics = ControllerMetrics(env)
    m_host, m_port = metrics.serve(*args.metrics)

    async def close_when_cancelled() -> None:
        try:
            await anyio.sleep_forever()
        finally:
            metrics.close()

    tg.start_soon(close_when_cancelled)
    address = f"{m_host}:{m_port}"
    reporter.say(f"metrics on http://{address}/metrics")
    return address


async def _show_waiting(reporter: Reporter, orchestrator: Any, began: float, done: Any) -> None:
    """On a terminal, a spinner saying which replica processes start-up is waiting for."""
    import anyio

    if not reporter.tty:
        return
    try:
        while not done.is_set():
            processes = orchestrator.status()
            pending = [
                f"{name} {p.state}" + (f" (pid {p.pid})" if p.pid else "")
                for name, p in processes.items()
                if p.state != "running"
            ]
            if not processes:
                what = "opening the shard store and the catalog"
            elif pending:
                what = ", ".join(pending)
            else:
                what = "restoring the catalog's objects"
            reporter.waiting(f"starting: {what}; {time.monotonic() - began:.0f} s")
            with anyio.move_on_after(0.25):
                await done.wait()
    finally:
        reporter.waiting(None)


def _memory_limit_args(limit: int | None) -> tuple[str, ...]:
    return () if limit is None else ("--memory-limit", str(limit))


def run_up(args: argparse.Namespace) -> int:
    import anyio

    from tidegate.runtime.files import PRIVATE_UMASK
    from tidegate.runtime.logs import configure_logging
    from tidegate.spec.errors import TidegateError

    from .events import Reporter

    os.umask(PRIVATE_UMASK)  # what the controller and its libraries create is its owner's only
    # JSON on stderr, for every logger of the process (uvicorn's too; see tidegate.runtime.logs)
    configure_logging(loggers=("tidegate",), static={"component": "controller"})
    reporter = Reporter()
    try:
        anyio.run(_up, args, reporter)
    except KeyboardInterrupt:  # before the signal handlers were set up
        reporter.say("interrupted")
        return 130
    except Exception as e:
        typed = _typed(e, TidegateError)
        if typed is None:
            raise
        reporter.waiting(None)
        reporter.say(f"could not start: {type(typed).__name__}: {typed}")
        return 1
    return 0


def _typed(error: BaseException, kind: type[BaseException]) -> BaseException | None:
    """``error``, or the first error of ``kind`` inside it if it is an exception group."""
    if isinstance(error, kind):
        return error
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            found = _typed(inner, kind)
            if found is not None:
                return found
    return None
