"""The replica process: the spec's compute replica served over gRPC, running dataflows on Spark.

The public names are re-exported here and imported on first use (they load
grpc, pyarrow or Spark), so ``import tidegate.replica`` stays light:

* :class:`ReplicaService` -- the replica core driven with real IO (storage
  reads and writes, the stream's responses), a gRPC ``ReplicaHandler``;
  :class:`ServiceStopped` when it has stopped;
* :func:`make_executor` (Spark or the Python reference) and
  :class:`GuardedExecutor`, the guard that turns executor failures into typed answers;
* :class:`ReplicaMetrics` -- the Prometheus metrics of one service.

Modules with more:

* :mod:`.main` -- ``tidegate replica`` (the process: CLI, signals, ready line);
* :mod:`.host` -- where a service runs: its clock and scheduling (threads, or the simulator);
* :mod:`.testing` -- an in-process replica for tests;
* :mod:`.spark` -- the ``SparkExecutor``.

The executors, metrics and JSON-lines logging live in private modules.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # type checkers see the real objects; at run time they load on first use
    from ._executors import ExecutorKind, GuardedExecutor, make_executor
    from ._metrics import ReplicaMetrics
    from .service import ReplicaService, ServiceStopped

__all__ = [
    "ExecutorKind",
    "GuardedExecutor",
    "ReplicaMetrics",
    "ReplicaService",
    "ServiceStopped",
    "make_executor",
]

_EXPORTS = {
    "ExecutorKind": "tidegate.replica._executors",
    "GuardedExecutor": "tidegate.replica._executors",
    "ReplicaMetrics": "tidegate.replica._metrics",
    "ReplicaService": "tidegate.replica.service",
    "ServiceStopped": "tidegate.replica.service",
    "make_executor": "tidegate.replica._executors",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
