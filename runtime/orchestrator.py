"""The orchestrator: keeps the managed replica processes running, as local child processes.

For each managed replica it runs ``python -m tidegate replica --listen
127.0.0.1:PORT --storage DATA_DIR --executor ... --spark-master ...
--exit-with-parent`` and waits for the replica's ready line (one JSON line
``{"event": "listening", "address": ...}`` on stdout). A replica that serves
only the storage protocol (``services=("storage",)``: the storage instance's
replica, ingestions and sinks) runs ``... --services storage`` instead of the
executor's options, and starts no Spark; a replica may have a token of its own
(``ensure(..., token=...)``) and arguments of its own (``extra_args``). A supervisor task per
replica restarts it when it exits, with capped exponential backoff, until it
is stopped. Written against anyio: it runs under asyncio and trio.

Files under ``DATA_DIR/replicas/``:

* ``NAME.log`` -- the child's stdout and stderr (appended across restarts; JSON
  lines: a ``replica_starting`` record of the orchestrator's before each start,
  then the replica's ready line and its structured logs),
  rotated to ``NAME.log.1`` ... ``NAME.log.K`` once it passes ``log_max_bytes``
  (checked before each start and about once a second while the child runs;
  copy-then-truncate, because the child keeps writing to its open descriptor,
  so a line written during the copy may be lost);
* ``NAME.pid`` -- the child's pid, a plain integer and a newline, while it runs
  (``kill $(cat replicas/r1.pid)``);
* ``NAME.port`` -- the port it listened on, reused at the next start when free,
  so a replica's address stays stable across restarts of it and of the
  orchestrator (the first start takes port 0 and records what the child got);
* ``NAME.metrics-port`` -- with ``metrics_host`` set, the port its Prometheus
  metrics were served on (the replica's ``--metrics HOST:PORT``), kept the
  same way; the address the child reports in its ready line is its status's
  ``metrics``, after every start.

No orphans: every child gets ``--exit-with-parent`` (a parent-death signal
plus a parent-pid watchdog in the child), and :meth:`Orchestrator.start`
reaps processes left behind by an earlier orchestrator, using the pidfiles --
only a live process whose ``/proc/PID/cmdline`` is a replica command of this
orchestrator's (its command prefix, and ``--storage`` naming this data
directory), so a recycled pid is never signalled. Each child leads its own process group (so Spark's JVM goes with it),
and :meth:`~Orchestrator.stop` / :meth:`~Orchestrator.kill` signal the group.

Children are forked from the event loop's thread on purpose: Linux delivers
the parent-death signal when the *thread* that forked the child ends, and
worker threads (trio forks in one) come and go.
"""

from __future__ import annotations

import itertools
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import IO, Literal, TypeAlias

import anyio
import anyio.abc
import anyio.to_thread

from .errors import OrchestratorError, ReplicaStartFailed, UnknownManagedReplica
from .files import PRIVATE_UMASK, mkdir_private, write_private

__all__ = [
    "SERVICES",
    "Orchestrator",
    "ReplicaProcessState",
    "ReplicaProcessStatus",
    "TlsFiles",
    "check_replica_name",
    "default_replica_command",
    "read_pidfile",
]

ReplicaProcessState: TypeAlias = Literal["starting", "running", "restarting", "stopping", "stopped"]

_POLL_S = 0.05
_ROTATE_EVERY_POLLS = 20  # about once a second
_LOOPBACK = "127.0.0.1"
_PORT = ".port"
_METRICS_PORT = ".metrics-port"


def default_replica_command(python: str = sys.executable) -> tuple[str, ...]:
    """The argv prefix that runs a replica process: ``python -m tidegate replica``."""
    return (python, "-m", "tidegate", "replica")


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """PEM files for the replicas' gRPC servers (``client_ca`` set: mutual TLS)."""

    cert: str
    key: str
    client_ca: str | None = None


@dataclass(frozen=True, slots=True)
class ReplicaProcessStatus:
    """One managed replica, as the orchestrator sees it.

    ``restarts`` counts starts after the first; ``last_exit_code`` is the last
    exit status (negative: killed by that signal); ``last_error`` says why the
    last start attempt failed, if it did.
    """

    name: str
    state: ReplicaProcessState
    pid: int | None
    address: str | None
    restarts: int
    last_exit_code: int | None
    last_error: str | None
    log_path: str
    services: tuple[str, ...] = ("compute",)
    """The protocols it serves (``("storage",)``: the storage instance's replica)."""
    metrics: str | None = None
    """``HOST:PORT`` of its Prometheus metrics (``http://HOST:PORT/metrics``), as its last
    start reported (``None``: it serves none; the orchestrator has no ``metrics_host``)."""
    spark_ui: str | None = None
    """The URL of its Spark web UI, as its last start reported (``None``: it serves none,
    without ``spark_ui`` or on the Python executor)."""


@dataclass(eq=False)
class _Replica:
    name: str
    executor: str
    spark_master: str
    services: tuple[str, ...] = ("compute",)
    token: str | None = None
    """Its own token (else the orchestrator's)."""
    extra_args: tuple[str, ...] | None = None
    """Its own extra arguments (else the orchestrator's)."""
    desired_running: bool = True
    state: ReplicaProcessState = "starting"
    popen: subprocess.Popen[bytes] | None = None
    port: int | None = None
    metrics_port: int | None = None
    """Where its metrics were served last (with ``metrics_host``; reused when free)."""
    metrics: str | None = None
    """The metrics address its last ready line reported."""
    spark_ui: str | None = None
    """The Spark UI URL its last ready line reported."""
    restarts: int = 0
    starts: int = 0
    last_exit_code: int | None = None
    last_error: str | None = None
    failed_attempt: int = 0
    """The number (``starts``) of the last start attempt that failed."""
    changed: anyio.Event = field(default_factory=anyio.Event)
    """Set (and replaced) at every state change."""
    wake: anyio.Event = field(default_factory=anyio.Event)
    """Set to cut a backoff sleep short (stop)."""
    done: anyio.Event = field(default_factory=anyio.Event)
    """Set when the supervisor task has ended."""


class Orchestrator:
    """Starts, supervises, restarts and stops managed replica processes (see the module docstring).

    Use ``async with Orchestrator(data_dir) as orch:`` or ``await orch.start()``
    ... ``await orch.aclose()``. Without a ``task_group`` argument, :meth:`start`
    opens its own, so :meth:`start` and :meth:`aclose` must then be awaited by
    the same task, like entering and leaving any anyio task group.

    ``command`` replaces the argv prefix ``python -m tidegate replica`` (tests
    use a stand-in); the orchestrator appends ``--listen``, ``--storage``,
    ``--executor``, ``--spark-master``, ``--exit-with-parent``, a ``--spark-conf``
    per ``spark_conf`` property, ``--spark-ui`` if ``spark_ui``, ``--spark-app-name``
    (:meth:`app_name`), ``--metrics
    HOST:PORT`` if ``metrics_host``, TLS options and ``extra_args``. The token
    (``token``, else a fresh one: see :attr:`token`) travels in the ``TIDEGATE_TOKEN``
    environment variable, not on the command line.

    ``metrics_host`` set, every replica (storage-only ones too) serves its
    Prometheus metrics on that host, on a port of its own: the one it had
    before when that is free, else any free one; :meth:`status` says where.
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        *,
        executor: str = "spark",
        spark_master: str = "local[1]",
        python: str = sys.executable,
        token: str | None = None,
        tls: TlsFiles | None = None,
        extra_args: Sequence[str] = (),
        command: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        ready_timeout_s: float = 180.0,
        stop_grace_s: float = 10.0,
        backoff_initial_s: float = 0.5,
        backoff_max_s: float = 30.0,
        on_status: Callable[[ReplicaProcessStatus], None] | None = None,
        log_max_bytes: int | None = 64 * 1024 * 1024,
        log_backups: int = 3,
        replicas_dir: str | os.PathLike[str] | None = None,
        spark_conf: Mapping[str, str] | None = None,
        spark_ui: bool = False,
        metrics_host: str | None = None,
    ) -> None:
        if log_max_bytes is not None and log_max_bytes <= 0:
            raise OrchestratorError(f"log_max_bytes must be positive or None, got {log_max_bytes}")
        if log_backups < 1:
            raise OrchestratorError(f"log_backups must be at least 1, got {log_backups}")
        if metrics_host is not None and (
            not isinstance(metrics_host, str)
            or not metrics_host
            or any(c.isspace() or c in ":/" for c in metrics_host)
        ):
            raise OrchestratorError(
                f"metrics_host must be a host name or IPv4 address, or None, got {metrics_host!r}"
            )
        self.data_dir = Path(data_dir).absolute()
        self.replicas_dir = (
            self.data_dir / "replicas" if replicas_dir is None else Path(replicas_dir).absolute()
        )
        """Where the logs, pidfiles and ports live (default ``DATA_DIR/replicas``); two
        orchestrators on one data dir (a read-only environment beside the writer) need two."""
        self.executor = executor
        self.spark_master = spark_master
        self.token: str = token if token is not None else secrets.token_urlsafe(24)
        """The bearer token managed replicas require (``TIDEGATE_TOKEN``): the one given, else a
        fresh one. Managed replicas are always authenticated, whoever builds the orchestrator;
        a controller connects with :attr:`token` (``Environment.open`` takes it from here)."""
        self.tls = tls
        self.extra_args = tuple(extra_args)
        self.spark_conf = dict(spark_conf or {})
        """Spark properties every replica gets (``--spark-conf KEY=VALUE`` each)."""
        self.spark_ui = spark_ui
        """Whether replicas serve Spark's web UI (``--spark-ui``)."""
        self.metrics_host = metrics_host
        """Where replicas serve Prometheus metrics, a free port each (``None``: they do not)."""
        self.command = tuple(command) if command is not None else default_replica_command(python)
        self.env = dict(env) if env is not None else None
        self.ready_timeout_s = ready_timeout_s
        self.stop_grace_s = stop_grace_s
        self.backoff_initial_s = backoff_initial_s
        self.backoff_max_s = backoff_max_s
        self.on_status = on_status
        self.log_max_bytes = log_max_bytes
        """Rotate ``NAME.log`` once it is larger than this (``None``: never)."""
        self.log_backups = log_backups
        """How many rotated logs (``NAME.log.1`` newest ... ``NAME.log.K``) are kept."""
        self.reaped: list[int] = []
        """Pids of leftover replica processes :meth:`start` terminated."""
        self._replicas: dict[str, _Replica] = {}
        self._tg: anyio.abc.TaskGroup | None = None
        self._own_tg = False
        self._closed = False

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self, task_group: anyio.abc.TaskGroup | None = None) -> None:
        """Reap leftovers of an earlier orchestrator and get ready to run replicas.

        Supervisor tasks run in ``task_group`` if given, else in a task group of
        the orchestrator's own (closed by :meth:`aclose`).
        """
        if self._tg is not None:
            raise OrchestratorError("orchestrator already started")
        if self._closed:
            raise OrchestratorError("orchestrator is closed")
        mkdir_private(self.replicas_dir)
        await self._reap_leftovers()
        if task_group is None:
            tg = anyio.create_task_group()
            await tg.__aenter__()
            self._own_tg = True
            self._tg = tg
        else:
            self._tg = task_group

    async def aclose(self) -> None:
        """Stop every replica (SIGTERM, then SIGKILL after the grace) and the supervisors."""
        if self._closed:
            return
        self._closed = True
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as tg:
                for name in list(self._replicas):
                    tg.start_soon(self._stop, name)
        tg_own, self._tg = (self._tg if self._own_tg else None), None
        if tg_own is not None:  # the supervisors have ended; this only closes the group
            tg_own.cancel_scope.cancel()
            await tg_own.__aexit__(None, None, None)

    async def __aenter__(self) -> Orchestrator:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- replicas --------------------------------------------------------------------------

    async def ensure(
        self,
        name: str,
        *,
        executor: str | None = None,
        spark_master: str | None = None,
        services: Sequence[str] | None = None,
        token: str | None = None,
        extra_args: Sequence[str] | None = None,
    ) -> str:
        """Make sure replica ``name`` runs; returns its address once it is listening.

        Starts it (and its supervisor) if it is not running; if it is starting
        or restarting, waits for that attempt. Raises :class:`ReplicaStartFailed`
        if the attempt fails (the supervisor keeps retrying with backoff until
        :meth:`stop`). ``executor`` and ``spark_master`` override the
        orchestrator's defaults for this replica (taking effect at its next start).
        ``services`` are the protocols it serves (``("compute",)`` by default;
        ``("storage",)``: a storage replica, no executor); ``token`` and
        ``extra_args`` replace the orchestrator's for it (when it is first started).
        """
        wanted = _check_services(services)
        check_replica_name(name)
        if self._tg is None or self._closed:
            raise OrchestratorError("orchestrator is not started (call start() first)")
        r = self._replicas.get(name)
        if r is not None and not r.done.is_set():
            if executor is not None:
                r.executor = executor
            if spark_master is not None:
                r.spark_master = spark_master
            if r.state == "stopping":
                await r.done.wait()
            else:
                return await self._running(r)
        r = _Replica(
            name,
            executor or self.executor,
            spark_master or self.spark_master,
            wanted,
            token,
            None if extra_args is None else tuple(extra_args),
        )
        r.port = self._recorded_port(name)
        r.metrics_port = self._recorded_port(name, _METRICS_PORT)
        self._replicas[name] = r
        self._tg.start_soon(self._supervise, r)
        return await self._running(r)

    async def _running(self, r: _Replica) -> str:
        """Wait until ``r`` runs (its address) or the attempt in progress, or the next, fails."""
        first = r.starts if r.state == "starting" and r.starts else r.starts + 1
        while True:
            p = r.popen
            if r.state == "running" and r.port is not None and p is not None and p.poll() is None:
                return f"{_LOOPBACK}:{r.port}"
            if r.done.is_set() or r.failed_attempt >= first:
                reason = r.last_error or "stopped"
                raise ReplicaStartFailed(r.name, reason, str(self._log_path(r.name)))
            await r.changed.wait()

    def address(self, name: str) -> str:
        """The address replica ``name`` listens on (or will, at its next start).

        Stable across restarts while its port stays free: the port recorded at
        its first start is reused, also by a new orchestrator on the same data dir.
        """
        check_replica_name(name)
        r = self._replicas.get(name)
        port = r.port if r is not None and r.port is not None else self._recorded_port(name)
        if port is None:
            raise UnknownManagedReplica(f"replica {name!r} was never started here")
        return f"{_LOOPBACK}:{port}"

    async def stop(self, name: str) -> None:
        """Stop replica ``name`` for good: SIGTERM, SIGKILL after the grace; no restart."""
        if name not in self._replicas:
            raise UnknownManagedReplica(f"no managed replica named {name!r}")
        await self._stop(name)

    async def kill(self, name: str) -> None:
        """SIGKILL replica ``name``'s process group now, like a crash: the supervisor restarts it.

        Returns once the process has exited (a no-op if it is not running).
        """
        r = self._replicas.get(name)
        if r is None:
            raise UnknownManagedReplica(f"no managed replica named {name!r}")
        p = r.popen
        if p is None or p.poll() is not None:
            return
        _kill_group(p.pid, signal.SIGKILL)
        while r.popen is p:  # until the supervisor has seen the exit
            await anyio.sleep(_POLL_S)

    def status(self) -> dict[str, ReplicaProcessStatus]:
        """Every replica this orchestrator manages (stopped ones included), by name."""
        return {name: self._status(r) for name, r in sorted(self._replicas.items())}

    def _status(self, r: _Replica) -> ReplicaProcessStatus:
        p = r.popen
        pid = p.pid if p is not None and p.poll() is None else None
        address = None if r.port is None else f"{_LOOPBACK}:{r.port}"
        return ReplicaProcessStatus(
            r.name,
            r.state,
            pid,
            address,
            r.restarts,
            r.last_exit_code,
            r.last_error,
            str(self._log_path(r.name)),
            r.services,
            r.metrics,
            r.spark_ui,
        )

    # -- supervision -------------------------------------------------------------------------

    def _set_state(self, r: _Replica, state: ReplicaProcessState) -> None:
        r.state = state
        r.changed.set()
        r.changed = anyio.Event()
        if self.on_status is not None:
            self.on_status(self._status(r))

    async def _supervise(self, r: _Replica) -> None:
        backoff = self.backoff_initial_s
        try:
            while r.desired_running:
                if r.starts:
                    r.restarts += 1
                r.starts += 1
                self._set_state(r, "starting")
                started = await self._launch(r)
                if not started:
                    r.failed_attempt = r.starts
                else:
                    began = anyio.current_time()
                    self._set_state(r, "running")
                    await self._wait_exit(r)
                    if anyio.current_time() - began >= self.backoff_max_s:
                        backoff = self.backoff_initial_s
                if not r.desired_running:
                    break
                self._set_state(r, "restarting")
                with anyio.move_on_after(backoff):
                    await r.wake.wait()
                backoff = min(backoff * 2, self.backoff_max_s)
        finally:
            with anyio.CancelScope(shield=True):
                p = r.popen
                if p is not None and p.poll() is None:  # cancelled: do not leave the child behind
                    await self._terminate(p)
                if p is not None:
                    self._exited(r, p)
                r.done.set()
                self._set_state(r, "stopped")

    async def _launch(self, r: _Replica) -> bool:
        """Start the child and wait for its ready line; False (with ``last_error``) on failure."""
        log_path = self._log_path(r.name)
        await self._rotate_log(r.name)
        port = r.port if r.port is not None and _port_free(r.port) else 0
        metrics_port = None
        if self.metrics_host is not None:
            metrics_port = r.metrics_port
            if metrics_port is None or not _port_free(metrics_port, self.metrics_host):
                metrics_port = 0
        argv = [*self.command, *self._args(r, port, metrics_port)]
        with _open_log(log_path) as log:
            log.write(_start_record(r.name, argv))
            log.flush()
            offset = log.tell()
            try:
                p = _spawn(argv, log, self._child_env(r))
            except OSError as e:
                r.last_error = f"cannot run {argv[0]!r}: {e}"
                return False
        r.popen = p
        self._write_pidfile(r.name, p.pid)
        ready = None
        with anyio.move_on_after(self.ready_timeout_s):
            while ready is None and p.poll() is None:
                await anyio.sleep(_POLL_S)
                ready, offset = _scan_ready(log_path, offset)
            if ready is None:  # exited: the ready line may still be in the log
                ready, offset = _scan_ready(log_path, offset)
        if ready is not None and p.poll() is None:
            r.port, r.metrics, r.spark_ui = ready
            r.last_error = None
            self._record_port(r.name, r.port)
            if self.metrics_host is not None:
                served = _port_of(r.metrics)
                if served is not None:
                    r.metrics_port = served
                    self._record_port(r.name, served, _METRICS_PORT)
            return True
        if p.poll() is None:
            r.last_error = f"no ready line within {self.ready_timeout_s:g}s"
            await self._terminate(p)
        else:
            r.last_error = f"exited with status {p.returncode} before it was ready"
        self._exited(r, p)
        return False

    async def _wait_exit(self, r: _Replica) -> None:
        p = r.popen
        polls = 0
        while p is not None and p.poll() is None:
            await anyio.sleep(_POLL_S)
            polls += 1
            if polls % _ROTATE_EVERY_POLLS == 0:
                await self._rotate_log(r.name)
        if p is not None:
            self._exited(r, p)

    async def _rotate_log(self, name: str) -> None:
        limit = self.log_max_bytes
        if limit is None:
            return
        path = self._log_path(name)
        with suppress(OSError):
            if path.stat().st_size > limit:
                await anyio.to_thread.run_sync(_copy_truncate, path, self.log_backups)

    def _exited(self, r: _Replica, p: subprocess.Popen[bytes]) -> None:
        if r.popen is p:
            r.last_exit_code = p.returncode
            r.popen = None
            self._remove_pidfile(r.name, p.pid)

    async def _stop(self, name: str) -> None:
        r = self._replicas[name]
        r.desired_running = False
        r.wake.set()
        p = r.popen
        if p is not None and p.poll() is None:
            self._set_state(r, "stopping")
            await self._terminate(p)
        await r.done.wait()

    async def _terminate(self, p: subprocess.Popen[bytes]) -> None:
        """SIGTERM the child's group; SIGKILL it after the grace period; wait for the exit."""
        _kill_group(p.pid, signal.SIGTERM)
        with anyio.move_on_after(self.stop_grace_s):
            while p.poll() is None:
                await anyio.sleep(_POLL_S)
        if p.poll() is None:
            _kill_group(p.pid, signal.SIGKILL)
            while p.poll() is None:
                await anyio.sleep(_POLL_S)

    # -- command line and files -----------------------------------------------------------------

    def _args(self, r: _Replica, port: int, metrics_port: int | None = None) -> list[str]:
        args = ["--listen", f"{_LOOPBACK}:{port}", "--storage", str(self.data_dir)]
        if metrics_port is not None:
            args += ["--metrics", f"{self.metrics_host}:{metrics_port}"]
        computing = "compute" in r.services
        if r.services != ("compute",):
            args += ["--services", ",".join(r.services)]
        if computing:
            args += ["--executor", r.executor, "--spark-master", r.spark_master]
        args.append("--exit-with-parent")
        if computing:
            for key, value in self.spark_conf.items():
                args += ["--spark-conf", f"{key}={value}"]
            if self.spark_ui:
                args.append("--spark-ui")
            args += ["--spark-app-name", self.app_name(r.name)]
        if self.tls is not None:
            args += ["--tls-cert", self.tls.cert, "--tls-key", self.tls.key]
            if self.tls.client_ca is not None:
                args += ["--tls-client-ca", self.tls.client_ca]
        extra = self.extra_args if r.extra_args is None else r.extra_args
        return [*args, *extra]

    def app_name(self, name: str) -> str:
        """The Spark application name of replica ``name``: ``tidegate ENV NAME``, ENV the
        data directory's name and NAME the process's (``r1``, ``CLUSTER.REPLICA`` outside the
        default cluster), so a standalone master's UI tells the replicas apart."""
        return f"tidegate {self.data_dir.name} {name}"

    def _child_env(self, r: _Replica) -> dict[str, str]:
        env = dict(os.environ if self.env is None else self.env)
        env["PYTHONUNBUFFERED"] = "1"
        env["TIDEGATE_PARENT_PID"] = str(os.getpid())
        token = r.token if r.token is not None else self.token
        if token is not None:
            env["TIDEGATE_TOKEN"] = token
        if "compute" in r.services and r.executor == "spark":
            # Spark's driver, and its web UI, on loopback unless the environment says otherwise
            env.setdefault("SPARK_LOCAL_IP", _LOOPBACK)
            env.setdefault("SPARK_LOCAL_HOSTNAME", env["SPARK_LOCAL_IP"])
        return env

    def _log_path(self, name: str) -> Path:
        return self.replicas_dir / f"{name}.log"

    def _pid_path(self, name: str) -> Path:
        return self.replicas_dir / f"{name}.pid"

    def _port_path(self, name: str, suffix: str = _PORT) -> Path:
        return self.replicas_dir / f"{name}{suffix}"

    def _recorded_port(self, name: str, suffix: str = _PORT) -> int | None:
        try:
            port = int(self._port_path(name, suffix).read_text().strip())
        except (OSError, ValueError):
            return None
        return port if 0 < port < 65536 else None

    def _record_port(self, name: str, port: int, suffix: str = _PORT) -> None:
        if self._recorded_port(name, suffix) != port:
            _write_atomic(self._port_path(name, suffix), f"{port}\n")

    def _write_pidfile(self, name: str, pid: int) -> None:
        _write_atomic(self._pid_path(name), f"{pid}\n")

    def _remove_pidfile(self, name: str, pid: int) -> None:
        path = self._pid_path(name)
        if read_pidfile(path) == pid:
            with suppress(OSError):
                path.unlink()

    def _ours(self, cmdline: Sequence[str] | None) -> bool:
        """Whether ``cmdline`` is a replica this orchestrator (or an earlier one here) started."""
        if not cmdline or list(cmdline[: len(self.command)]) != list(self.command):
            return False
        args = list(cmdline[len(self.command) :])
        return any(
            a == "--storage" and b == str(self.data_dir) for a, b in itertools.pairwise(args)
        )

    async def _reap_leftovers(self) -> None:
        """Terminate replica processes an earlier orchestrator left running; drop stale pidfiles."""
        for path in sorted(self.replicas_dir.glob("*.pid")):
            pid = read_pidfile(path)
            if pid is not None and self._ours(_cmdline(pid)):
                _signal_group(pid, signal.SIGTERM)
                with anyio.move_on_after(self.stop_grace_s):
                    while _alive(pid):
                        await anyio.sleep(_POLL_S)
                if _alive(pid):
                    _signal_group(pid, signal.SIGKILL)
                    while _alive(pid):
                        await anyio.sleep(_POLL_S)
                self.reaped.append(pid)
            with suppress(OSError):
                path.unlink()


# -- process helpers ---------------------------------------------------------------------------------


SERVICES = ("compute", "storage")
"""The protocols a replica process can serve (its ``--services``)."""


def _check_services(services: Sequence[str] | None) -> tuple[str, ...]:
    """``services`` in :data:`SERVICES` order, each once (default: compute) [OrchestratorError]."""
    if services is None:
        return ("compute",)
    names = set(services)
    if not names or not names <= set(SERVICES) or isinstance(services, str):
        raise OrchestratorError(f"services must be some of {SERVICES}, got {services!r}")
    return tuple(n for n in SERVICES if n in names)


def check_replica_name(name: object) -> None:
    """Refuse a name the orchestrator cannot run a replica under [OrchestratorError]: its files
    are named after it, so it is ``[A-Za-z0-9._-]+`` (and not ``.`` or ``..``)."""
    ok = (
        isinstance(name, str)
        and name
        and all(c.isascii() and (c.isalnum() or c in "-_.") for c in name)
    )
    if not ok or name in (".", ".."):
        raise OrchestratorError(f"replica names are [A-Za-z0-9._-]+, got {name!r}")


def _copy_truncate(path: Path, backups: int) -> None:
    """Shift ``path.1 .. path.(backups-1)`` up by one, copy ``path`` to ``path.1``, empty ``path``.

    Writers keep their descriptors (opened for appending, so they go on at the
    new end); what they write between the copy and the truncation is lost.
    """
    for i in range(backups - 1, 0, -1):
        older = path.with_name(f"{path.name}.{i}")
        if older.exists():
            older.replace(path.with_name(f"{path.name}.{i + 1}"))
    fd = os.open(path.with_name(f"{path.name}.1"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with open(path, "rb") as src, os.fdopen(fd, "wb") as dst:
        shutil.copyfileobj(src, dst, 1024 * 1024)
    os.truncate(path, 0)


def _spawn(argv: Sequence[str], log: IO[bytes], env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=dict(env),
        close_fds=True,
        start_new_session=True,
        umask=PRIVATE_UMASK,  # what the replica (and its JVM) creates is private
    )


def _open_log(path: Path) -> IO[bytes]:
    """A replica's log, opened for appending (created 0600: logs may quote data)."""
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "ab")


def _kill_group(pgid: int, sig: int) -> None:
    """Signal process group ``pgid``: our children lead their own (called before they are reaped)."""
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _signal_group(pid: int, sig: int) -> None:
    """Signal the process group ``pid`` leads (or just ``pid`` if it leads none)."""
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, sig)
            return
    except ProcessLookupError:
        return
    except PermissionError:
        pass
    with suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


_Ready: TypeAlias = tuple[int, str | None, str | None]
"""What a ready line says: the port the replica listens on, its metrics address and its Spark
UI's URL, if any."""


def _scan_ready(log_path: Path, offset: int) -> tuple[_Ready | None, int]:
    """Look for the ready line in the log past ``offset``: (what it says or None, new offset).

    Only complete lines are consumed, so a line written in two pieces is read whole.
    """
    try:
        with open(log_path, "rb") as f:
            f.seek(offset)
            chunk = f.read()
    except OSError:
        return None, offset
    end = chunk.rfind(b"\n")
    if end < 0:
        return None, offset
    for line in chunk[: end + 1].splitlines():
        ready = _ready(line)
        if ready is not None:
            return ready, offset + end + 1
    return None, offset + end + 1


def _ready(line: bytes) -> _Ready | None:
    if b"listening" not in line:
        return None
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    if not isinstance(obj, dict) or obj.get("event") != "listening":
        return None
    port = _port_of(obj.get("address"))
    if port is None:
        return None
    metrics = obj.get("metrics")
    ui = obj.get("spark_ui")
    return (
        port,
        metrics if _port_of(metrics) is not None else None,
        ui if isinstance(ui, str) and ui.startswith(("http://", "https://")) else None,
    )


def _port_of(address: object) -> int | None:
    """The port of a ``HOST:PORT`` address (``None`` if it is not one)."""
    if not isinstance(address, str):
        return None
    _, _, port = address.rpartition(":")
    return int(port) if port.isdigit() and 0 < int(port) < 65536 else None


def _start_record(name: str, argv: Sequence[str]) -> bytes:
    """The log line the orchestrator writes before each start: JSON, like the replica's own."""
    ts = datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
    record = {
        "event": "replica_starting",
        "level": "info",
        "logger": "tidegate.runtime.orchestrator",
        "ts": ts,
        "component": "orchestrator",
        "replica": name,
        "argv": list(argv),
    }
    return (json.dumps(record) + "\n").encode()


def _port_free(port: int, host: str = _LOOPBACK) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _write_atomic(path: Path, text: str) -> None:
    write_private(path, text.encode())


def read_pidfile(path: str | os.PathLike[str]) -> int | None:
    """The pid a pidfile holds (a plain integer), or ``None`` if it is missing or malformed."""
    try:
        text = Path(path).read_text().strip()
    except OSError:
        return None
    if not text.isdigit():
        return None
    pid = int(text)
    return pid if pid > 1 else None


def _cmdline(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    if not raw:
        return None  # a zombie, or a kernel thread
    return [a.decode(errors="surrogateescape") for a in raw.rstrip(b"\0").split(b"\0")]


def _alive(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] != ["Z"]
