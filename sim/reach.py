"""How much of the product a campaign ran: line coverage of ``runtime/``, ``replica/`` and
``spec/`` from simulation alone, against the scope the simulator is meant to reach.

``tidegate sim campaign --lines`` measures the lines every seed ran (coverage.py, in
each worker process); :func:`reach_report` sums them by package and names the modules
run least, so an unreached part of the product is visible. What the simulator leaves
out on purpose is :data:`LEFT_OUT`, each with its reason; it is reported apart and not
counted against the scope.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LEFT_OUT", "PACKAGES", "Reach", "measure_reach", "reach_report"]

PACKAGES = ("runtime", "replica", "spec")
"""The packages the simulator is meant to reach (paths below the ``tidegate`` package)."""

LEFT_OUT: dict[str, str] = {
    "replica/spark/": "the Spark executor: a JVM per seed is too slow; the differential tests "
    "hold it to the reference evaluator (tests/replica/spark)",
    "replica/main.py": "the replica process's entry point (arguments, gRPC server, metrics)",
    "replica/testing.py": "test helpers: replicas served in-process for the gRPC tests",
    "runtime/orchestrator.py": "starts and reaps operating-system processes; the world starts "
    "simulated ones",
    "runtime/storage/_s3_blob.py": "a blob store on S3: the simulated disk stands in for every "
    "store, with the same contract and its faults",
    "runtime/storage/_file_blob.py": "blobs in files: the simulated disk stands in",
    "runtime/storage/_sqlite_consensus.py": "consensus in SQLite: the simulated disk stands in",
    "runtime/storage/_postgres_consensus.py": "consensus in PostgreSQL: the simulated disk "
    "stands in",
    "runtime/transport/grpc_client.py": "gRPC itself: the simulated network carries the same "
    "encoded messages (runtime/wire) between the processes",
    "runtime/transport/grpc_server.py": "gRPC itself (as above)",
    "runtime/transport/aio_thread.py": "the event loop thread gRPC's client runs on",
    "runtime/wire/gen/": "generated protobuf classes",
    "spec/testing/": "the test kit users' own suites drive (state machines, contract tests): "
    "it checks a system rather than being one; tests/spec runs it",
    "spec/strategies/": "Hypothesis strategies for users' property tests (tests/spec runs them)",
}
"""Paths (below ``tidegate/``; a trailing ``/`` is a folder) left out on purpose, and why."""


@dataclass(frozen=True)
class Reach:
    """One file's statements and the ones a campaign ran."""

    path: str
    """Below the ``tidegate`` package, e.g. ``runtime/oracle.py``."""
    statements: int
    run: int

    @property
    def package(self) -> str:
        return self.path.split("/", 1)[0]

    def left_out(self) -> str | None:
        """Why the simulator leaves this file out (``None``: it is in scope)."""
        for prefix, why in LEFT_OUT.items():
            if self.path == prefix or (prefix.endswith("/") and self.path.startswith(prefix)):
                return why
        return None


def measure_reach(lines: Mapping[str, set[int]]) -> list[Reach]:
    """Each measured file's :class:`Reach`, by coverage.py's own analysis of its statements."""
    import coverage

    cov = coverage.Coverage(data_file=None)
    data = cov.get_data()
    data.add_lines({f: sorted(ls) for f, ls in lines.items()})
    out: list[Reach] = []
    for f in sorted(lines):
        try:
            _name, statements, _excluded, missing, _text = cov.analysis2(f)
        except Exception:  # a file that is gone or not Python: nothing to say about it
            continue
        path = _below_package(f)
        if not statements or path is None or path.split("/", 1)[0] not in PACKAGES:
            continue
        out.append(Reach(path, len(statements), len(statements) - len(missing)))
    return out


def _below_package(path: str) -> str | None:
    parts = Path(path).parts
    for i in range(len(parts) - 1, -1, -1):
        if parts[i] in PACKAGES and i > 0:
            return "/".join(parts[i:])
    return None


def reach_report(lines: Mapping[str, set[int]], *, worst: int = 12) -> str:
    """The lines a campaign ran, by package (in scope: :data:`LEFT_OUT` apart), and the
    ``worst`` in-scope modules by share run."""
    files = measure_reach(lines)
    scope = [r for r in files if r.left_out() is None]
    out = ["package    statements      run   share"]
    for pkg in PACKAGES:
        mine = [r for r in scope if r.package == pkg]
        out.append(_row(pkg, sum(r.statements for r in mine), sum(r.run for r in mine)))
    out.append(_row("in scope", sum(r.statements for r in scope), sum(r.run for r in scope)))
    left = [r for r in files if r.left_out() is not None]
    out.append(_row("left out", sum(r.statements for r in left), sum(r.run for r in left)))
    least = sorted(scope, key=lambda r: (r.run / r.statements, -r.statements))[:worst]
    out.append("least run in scope: " + ", ".join(
        f"{r.path} {100 * r.run / r.statements:.0f}% of {r.statements}" for r in least
    ))  # fmt: skip
    return "\n".join(out)


def _row(name: str, statements: int, run: int) -> str:
    share = f"{100 * run / statements:5.1f}%" if statements else "    -"
    return f"{name:<10} {statements:>10} {run:>8}  {share}"
