"""The executable model of tidegate: pure, deterministic, free of IO.

Everything in this package is synchronous and takes time and randomness as
arguments. ``sim``, ``runtime`` and ``replica`` drive these objects; none of
them re-implements protocol or controller behaviour.

The main entry points are re-exported here (each loads on first use, so
``import tidegate.spec.frontier`` stays as light as it was):

* :class:`Controller` -- the compute and storage controllers, connected;
  :class:`ComputeController` and :class:`StorageController` on their own;
* :class:`ComputeReplica` -- the replica side of the compute protocol;
  :class:`StorageReplica` -- the storage side: ingestions and sinks;
  :class:`ControllerSession` and :class:`ReplicaSession`, the protocol's two
  state machines; :class:`CommandHistory`, the reduced history replayed to replicas;
* :class:`Antichain`, :class:`MutableAntichain`, :class:`ChangeBatch` -- the frontier algebra;
  :class:`GlobalId` -- object ids;
* :class:`DataflowBuilder` and :func:`table` -- the builder that writes plans;
  :class:`Plan`, :class:`Schema`, :class:`DataflowDescription` -- what it produces;
* :class:`PythonExecutor` -- the reference executor every other one must agree with;
* :class:`TidegateError` -- the root of every typed error (all in :mod:`.errors`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # type checkers see the real objects; at run time they load on first use
    from .compute import ComputeController
    from .compute_replica import ComputeReplica
    from .controller import Controller
    from .errors import TidegateError
    from .executor import PythonExecutor
    from .frontier import Antichain, ChangeBatch, MutableAntichain
    from .history import CommandHistory
    from .ids import GlobalId
    from .plan import Plan, Schema
    from .plan.builder import DataflowBuilder, table
    from .protocol import ControllerSession, DataflowDescription, ReplicaSession
    from .storage import StorageController
    from .storage_replica import StorageReplica

__all__ = [
    "Antichain",
    "ChangeBatch",
    "CommandHistory",
    "ComputeController",
    "ComputeReplica",
    "Controller",
    "ControllerSession",
    "DataflowBuilder",
    "DataflowDescription",
    "GlobalId",
    "MutableAntichain",
    "Plan",
    "PythonExecutor",
    "ReplicaSession",
    "Schema",
    "StorageController",
    "StorageReplica",
    "TidegateError",
    "table",
]

_EXPORTS = {
    "Antichain": "frontier",
    "ChangeBatch": "frontier",
    "CommandHistory": "history",
    "ComputeController": "compute",
    "ComputeReplica": "compute_replica",
    "Controller": "controller",
    "ControllerSession": "protocol",
    "DataflowBuilder": "plan.builder",
    "DataflowDescription": "protocol",
    "GlobalId": "ids",
    "MutableAntichain": "frontier",
    "Plan": "plan",
    "PythonExecutor": "executor",
    "ReplicaSession": "protocol",
    "Schema": "plan",
    "StorageController": "storage",
    "StorageReplica": "storage_replica",
    "TidegateError": "errors",
    "table": "plan.builder",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
