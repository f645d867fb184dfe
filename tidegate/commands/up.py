"""``tidegate up``: the controller, its managed replicas and the shard store, until Ctrl-C/SIGTERM.

It opens an ``Environment`` on the data directory (embedded defaults: a file
blob store and a SQLite consensus in ``DATA_DIR``, managed replica processes on
local Spark), serves the control endpoint (:mod:`.control`) that ``tidegate
status/peek/append`` talk to, and writes ``DATA_DIR/controller.json``. With
``--metrics HOST:PORT`` it also serves the controller's Prometheus metrics
(:mod:`tidegate.runtime.metrics`) on ``http://HOST:PORT/metrics``, records
that address in ``controller.json`` and shows it in ``tidegate status``. On
SIGINT or SIGTERM it stops serving (requests in flight get up to 3 s to finish), closes
the environment (which stops its replicas) and removes the file.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from functools import partial
from pathlib import Path

from tidegate.runtime.defaults import default_data_dir

from .control import ControllerInfo, NoController, new_token

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
        formatter_class=argparse.RawDescriptionHelpFormatter,
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
        "--spark-conf",
        type=_spark_conf_pair,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark property of every replica's session (repeatable)",
    )
    p.add_argument("--spark-ui", action="store_true", help="replicas serve Spark's web UI")
    p.add_argument(
        "--metrics",
        type=_host_port,
        default=None,
        metavar="HOST:PORT",
        help="serve the controller's Prometheus metrics on http://HOST:PORT/metrics (0: a free port)",
    )
    p.set_defaults(func=run_up)


def _spark_conf_pair(text: str) -> tuple[str, str]:
    from tidegate.replica.main import spark_conf_pair

    return spark_conf_pair(text)


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


async def _up(args: argparse.Namespace) -> None:
    import anyio

    from tidegate.runtime.environment import Environment
    from tidegate.runtime.orchestrator import Orchestrator

    from .control import serve_control
    from .service import ControlService

    data_dir = Path(args.data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    _refuse_if_running(data_dir)
    how_many = "the recorded" if args.replicas is None else str(args.replicas)
    print(f"tidegate up: data in {data_dir.resolve()}; starting {how_many} replica(s)...")
    limit = (
        ()
        if args.replica_memory_limit is None
        else ("--memory-limit", str(args.replica_memory_limit))
    )
    orchestrator = Orchestrator(
        data_dir,
        executor=args.executor,
        spark_master=args.spark_master,
        extra_args=limit,
        spark_conf=dict(args.spark_conf),
        spark_ui=args.spark_ui,
    )
    async with (
        orchestrator,
        Environment.open(
            data_dir,
            replicas=args.replicas,
            spark_master=args.spark_master,
            executor=args.executor,
            orchestrator=orchestrator,
        ) as env,
    ):
        token = new_token()
        host, port = args.listen_api
        metrics = None
        metrics_address = None
        if args.metrics is not None:
            from tidegate.runtime.metrics import ControllerMetrics

            metrics = ControllerMetrics(env)
            m_host, m_port = metrics.serve(*args.metrics)
            metrics_address = f"{m_host}:{m_port}"
            print(f"tidegate up: metrics on http://{metrics_address}/metrics", flush=True)
        service = ControlService(env, orchestrator=orchestrator, metrics=metrics_address)
        with (
            contextlib.ExitStack() as serving,
            anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals,
        ):
            if metrics is not None:
                serving.callback(metrics.close)
            async with anyio.create_task_group() as tg:
                address = await tg.start(
                    partial(serve_control, host=host, port=port), service.handle, token
                )
                info = ControllerInfo(
                    address, token, os.getpid(), str(data_dir.resolve()), metrics_address
                )
                info.write()
                print(
                    f"tidegate up: controller pid {info.pid}, control endpoint http://{address} "
                    f"(see {ControllerInfo.path(data_dir)}); Ctrl-C to stop",
                    flush=True,
                )
                try:
                    async for signum in signals:
                        name = signal.Signals(signum).name
                        print(f"tidegate up: {name}, shutting down", flush=True)
                        break
                finally:
                    info.remove()
                    tg.cancel_scope.cancel()
    print("tidegate up: stopped")


def run_up(args: argparse.Namespace) -> int:
    import anyio

    from tidegate.runtime.logs import configure_logging

    configure_logging(loggers=("tidegate",), static={"component": "controller"})  # JSON on stderr

    try:
        anyio.run(_up, args)
    except KeyboardInterrupt:  # a second Ctrl-C during shutdown
        print("tidegate up: interrupted", file=sys.stderr)
        return 130
    return 0
