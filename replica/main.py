"""``tidegate replica``: the replica process (gRPC server, replica services, metrics).

``--services`` says which protocols it serves on its one port, as
Materialize's clusterd hosts compute and storage: ``compute`` (the default:
the compute service over Spark or the Python executor), ``storage`` (the
storage service: ingestions and sinks, :mod:`tidegate.replica.storage`), or
``compute,storage``. A storage-only process starts no executor -- no Spark,
no JVM: storage needs neither -- so ``--executor`` and the Spark options do
not apply to it.

Prints one JSON line to stdout when it serves::

    {"event": "listening", "address": "127.0.0.1:7001", "metrics": "127.0.0.1:9101",
     "spark_ui": "http://127.0.0.1:4040", "pid": 1234, "services": ["compute"]}

(``metrics`` is ``null`` without ``--metrics``, ``spark_ui`` without ``--spark-ui``);
everything else is a JSON
log line on stderr, rendered by structlog: the replica's own records, other
libraries' and every other line that reaches stderr (the JVM's log4j output,
Spark's first lines), which the process captures from its stderr descriptor
and wraps (see :mod:`tidegate.runtime.logs`). ``--spark-conf KEY=VALUE``
(repeatable) sets Spark properties of the session, read back and logged as
one ``spark_conf`` record; ``--spark-ui`` turns Spark's web UI on (logged as
``spark_ui`` with its address, which the ready line says too); ``--spark-app-name``
names the Spark application (``tidegate up`` names each managed replica's after
the environment and the replica, so a standalone master's UI tells them apart). SIGTERM or SIGINT shut it down gracefully: health turns
``NOT_SERVING``, the current stream ends with ``UNAVAILABLE``, storage reads
stop, exit status 0. An incompatible ``CreateInstance`` on reconnect halts
it with status 2 (a fresh process starts over). ``--exit-with-parent`` also
shuts it down when its parent process dies.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType
from typing import Any

__all__ = ["HALT_EXIT_CODE", "SERVICES", "build_parser", "main", "services"]

HALT_EXIT_CODE = 2
"""Exit status after a halt demanded by the protocol (docs/reference/compute.md §6.2)."""

_PR_SET_PDEATHSIG = 1

SERVICES = ("compute", "storage")
"""The protocols a replica process can serve (``--services``)."""


def services(text: str) -> tuple[str, ...]:
    """``"compute,storage"``: the services to run, in :data:`SERVICES` order, each once."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in SERVICES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"expected a comma-separated list of {', '.join(SERVICES)}, got {text!r}"
        )
    return tuple(n for n in SERVICES if n in names)


def _host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9}
_UNITS.update({"KIB": 2**10, "MIB": 2**20, "GIB": 2**30})


def byte_size(text: str) -> int:
    """``"2GiB"``, ``"500MB"``, ``"1048576"``: a number of bytes (positive)."""
    number = text.strip().upper().rstrip()
    unit = number.lstrip("0123456789.")
    digits = number[: len(number) - len(unit)]
    factor = _UNITS.get(unit.strip())
    try:
        value = int(float(digits) * factor) if factor is not None and digits else 0
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(
            f"expected a size such as 2GiB, 500MB or 1048576 (bytes), got {text!r}"
        )
    return value


def spark_conf_pair(text: str) -> tuple[str, str]:
    """``"spark.sql.shuffle.partitions=4"``: a Spark property and its value."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key or any(c.isspace() for c in key):
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE (a Spark property), got {text!r}")
    return key, value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tidegate replica",
        description="Serve the compute protocol (dataflows on Spark or the Python reference "
        "executor) and/or the storage protocol (ingestions and sinks) over gRPC.",
    )
    p.add_argument("--listen", required=True, help="HOST:PORT to serve gRPC on (port 0: any)")
    p.add_argument(
        "--services",
        type=services,
        default=("compute",),
        metavar="compute,storage",
        help="the protocols to serve on the port: compute (default), storage, or both; "
        "a storage-only replica starts no Spark",
    )
    p.add_argument(
        "--storage",
        help="shard store root: a directory (or file:// URL) holding blob/ and consensus.db",
    )
    p.add_argument("--blob", help="Blob store URL (overrides --storage's)")
    p.add_argument("--consensus", help="Consensus store URL (overrides --storage's)")
    p.add_argument("--executor", choices=("spark", "python"), default="spark")
    p.add_argument("--spark-master", default="local[2]", help="any Spark master URL")
    p.add_argument("--workers", type=int, default=None, help="Spark parallelism (partitions)")
    p.add_argument(
        "--index-memory-rows",
        type=int,
        default=None,
        help="an index with more rows keeps its history in Spark, not the driver (default 1000000)",
    )
    p.add_argument(
        "--state-memory-rows",
        type=int,
        default=None,
        help="a stateful operator keeps at most this many arrangement entries in the driver, "
        "the rest in Spark (default 1000000; a replica size sets it)",
    )
    p.add_argument(
        "--memory-limit",
        type=byte_size,
        default=None,
        help="resident memory (this process and its JVM) above which the dataflow holding the "
        "most state is failed with an error, e.g. 2GiB or 500MB (default: no limit)",
    )
    p.add_argument(
        "--spark-conf",
        type=spark_conf_pair,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark property of the replica's session (repeatable; overrides the defaults)",
    )
    p.add_argument("--spark-ui", action="store_true", help="serve Spark's web UI (default: off)")
    p.add_argument(
        "--spark-app-name",
        default="tidegate-replica",
        metavar="NAME",
        help="its Spark application's name, as a standalone master's UI lists it (tidegate up "
        "names each managed replica's after the environment and the replica)",
    )
    p.add_argument("--metrics", help="HOST:PORT to serve Prometheus /metrics on (port 0: any)")
    p.add_argument("--token", default=os.environ.get("TIDEGATE_TOKEN"), help="shared bearer token")
    p.add_argument("--tls-cert", help="PEM certificate chain (enables TLS)")
    p.add_argument("--tls-key", help="PEM private key")
    p.add_argument("--tls-client-ca", help="PEM CA for client certificates (mutual TLS)")
    p.add_argument("--tick-ms", type=int, default=50, help="periodic step interval (compute)")
    p.add_argument(
        "--storage-tick-ms",
        type=int,
        default=100,
        help="how often the storage service mints bindings and commits sinks",
    )
    p.add_argument("--exit-with-parent", action="store_true", help="exit when the parent dies")
    p.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    return p


def _storage_urls(args: argparse.Namespace) -> tuple[str, str]:
    from tidegate.runtime.storage import default_urls

    blob, consensus = args.blob, args.consensus
    if args.storage:
        root = args.storage
        if root.startswith("file://"):
            root = root[len("file://") :]
        elif "://" in root:
            raise SystemExit(
                f"--storage takes a directory or file:// URL, got {args.storage!r}; "
                "use --blob and --consensus for other backends"
            )
        d_blob, d_consensus = default_urls(root)
        blob, consensus = blob or d_blob, consensus or d_consensus
    if not blob or not consensus:
        raise SystemExit("give --storage DIR, or both --blob URL and --consensus URL")
    return blob, consensus


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _die_with_parent(stop: threading.Event) -> None:
    """Shut down when the parent dies: SIGTERM by ``prctl(PR_SET_PDEATHSIG)`` on Linux, and a
    watchdog on the parent pid everywhere (``TIDEGATE_PARENT_PID``, if set, names the process
    to outlive no longer than, e.g. the orchestrator behind a wrapper)."""
    parent = os.getppid()
    named = os.environ.get("TIDEGATE_PARENT_PID", "")
    watched = int(named) if named.isdigit() else None
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)

    def orphaned() -> bool:
        return os.getppid() != parent or (watched is not None and not _alive(watched))

    if orphaned():  # the parent died before the death signal was armed
        stop.set()
        return

    def watch() -> None:
        while not stop.wait(0.5):
            if orphaned():
                stop.set()

    threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()


def _log_spark(log: logging.Logger, conf: dict[str, str], ui: bool) -> str | None:
    """Log the ``--spark-conf`` properties as the session reads them back, and the UI's address
    (which it returns: the ready line says it too)."""
    from pyspark.sql import SparkSession

    from ._logs import log_event

    session = SparkSession.getActiveSession()
    if session is None:
        return None
    if conf:
        effective = {key: session.conf.get(key, None) for key in conf}
        log_event(log, "spark_conf", conf=effective)
    if not ui:
        return None
    url: str | None = session.sparkContext.uiWebUrl
    log_event(log, "spark_ui", url=url, app_name=session.sparkContext.appName)
    return url


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    from tidegate.runtime.files import PRIVATE_UMASK

    from ._logs import capture_stderr, configure_logging

    os.umask(PRIVATE_UMASK)  # what the replica and its JVM create in the data dir is private

    captured = capture_stderr()  # before the JVM starts: it inherits the captured descriptor
    log = configure_logging(getattr(logging, args.log_level.upper()), captured.original)
    try:
        return _serve(args, log)
    finally:
        captured.close()


def _serve(args: argparse.Namespace, log: logging.Logger) -> int:
    from ._logs import log_event

    blob_url, consensus_url = _storage_urls(args)
    listen_host, _ = _host_port(args.listen)
    metrics_addr = _host_port(args.metrics) if args.metrics else None
    wanted: tuple[str, ...] = args.services
    computing, storing = "compute" in wanted, "storage" in wanted

    stop = threading.Event()
    halted: list[str] = []
    signalled: list[int] = []

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        # No locks here: the handler runs in the main thread, which may be inside
        # ``stop.wait``/``stop.set`` holding the event's lock (a deadlock, seen under load).
        signalled.append(signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if args.exit_with_parent:
        _die_with_parent(stop)

    from prometheus_client import CollectorRegistry

    from tidegate.runtime.storage import ShardStore
    from tidegate.runtime.transport.grpc_server import ReplicaServer, ServerTls

    tls = None
    if args.tls_cert or args.tls_key:
        if not (args.tls_cert and args.tls_key):
            raise SystemExit("--tls-cert and --tls-key go together")
        tls = ServerTls.from_files(args.tls_cert, args.tls_key, args.tls_client_ca)

    log_event(
        log,
        "starting",
        services=list(wanted),
        executor=args.executor if computing else None,
        blob=blob_url,
        consensus=consensus_url,
    )
    executor: Any = None
    try:
        store = ShardStore.open(blob_url, consensus_url)
        if computing:
            from ._executors import make_executor

            executor = make_executor(
                args.executor,
                spark_master=args.spark_master,
                workers=args.workers,
                index_memory_rows=args.index_memory_rows,
                state_memory_rows=args.state_memory_rows,
                spark_conf=dict(args.spark_conf),
                spark_ui=args.spark_ui,
                spark_app_name=args.spark_app_name,
            )
    except Exception as e:
        log_event(log, "startup_failed", level=logging.CRITICAL, error=repr(e), exc_info=True)
        return 1
    spark = computing and args.executor == "spark"
    spark_ui = _log_spark(log, dict(args.spark_conf), args.spark_ui) if spark else None
    registry = CollectorRegistry()

    def on_halt(reason: str) -> None:
        halted.append(reason)
        stop.set()

    compute: Any = None
    storage: Any = None
    if computing:
        from ._metrics import ReplicaMetrics
        from .service import ReplicaService

        compute = ReplicaService(
            executor,
            store,
            tick_s=args.tick_ms / 1000,
            metrics=ReplicaMetrics(registry),
            logger=log,
            on_halt=on_halt,
            memory_limit=args.memory_limit,
        ).start()
    if storing:
        from .storage.metrics import StorageMetrics
        from .storage.service import StorageService

        storage = StorageService(
            store,
            tick_s=args.storage_tick_ms / 1000,
            metrics=StorageMetrics(registry, defaults=not computing),
            logger=log,
        ).start()
    running = [s for s in (compute, storage) if s is not None]
    metrics_server: Any = None
    try:
        server = ReplicaServer(
            args.listen, compute=compute, storage=storage, token=args.token, tls=tls
        ).start()
        metrics_at = None
        if metrics_addr is not None:
            from prometheus_client import start_http_server

            metrics_server, _thread = start_http_server(
                metrics_addr[1], addr=metrics_addr[0], registry=registry
            )
            metrics_at = f"{metrics_addr[0]}:{metrics_server.server_port}"
    except Exception as e:  # e.g. the address is taken
        log_event(log, "startup_failed", level=logging.CRITICAL, error=repr(e))
        for service in running:
            service.stop()
        store.close()
        return 1
    from tidegate.runtime.heap import freeze_startup_heap

    frozen = freeze_startup_heap()  # before anyone is told where to connect
    address = f"{listen_host}:{server.port}"
    print(
        json.dumps(
            {
                "event": "listening",
                "address": address,
                "metrics": metrics_at,
                "spark_ui": spark_ui,
                "pid": os.getpid(),
                "services": list(wanted),
            }
        ),
        flush=True,
    )
    log_event(
        log,
        "listening",
        address=address,
        metrics=metrics_at,
        spark_ui=spark_ui,
        services=list(wanted),
        executor=args.executor if computing else None,
        frozen_objects=frozen,
    )

    while not signalled and not stop.wait(0.2):
        pass
    log_event(log, "shutting_down", halt=halted[0] if halted else None)
    server.stop(grace=1.0)
    for service in running:
        service.stop()
    store.close()
    if metrics_server is not None:
        metrics_server.shutdown()
        metrics_server.server_close()
    if spark:
        with contextlib.suppress(Exception):
            stop_spark = getattr(executor, "close", None) or getattr(executor, "stop", None)
            if callable(stop_spark):
                stop_spark()
    log_event(log, "stopped", exit_code=HALT_EXIT_CODE if halted else 0)
    return HALT_EXIT_CODE if halted else 0


if __name__ == "__main__":
    sys.exit(main())
