"""Deterministic simulation of tidegate: the production runtime among simulated replicas and disks.

FoundationDB's rule: the product runs inside the simulation, unmodified, and
only the world around it is simulated. A run hosts ``tidegate.runtime`` itself
-- ``Environment.open`` and its restore path, the durable catalog, the
timestamp oracle, group commit, the shard store's IO, the production
``ControllerDriver`` -- over a simulated network, a simulated disk (Blob and
Consensus with latency, failures, crash points and torn writes) and virtual
time, with replicas (by default the spec ``ComputeReplica`` on the
``PythonExecutor``, or the real replica service) and clients that act through
the public ``Environment`` API. Everything runs in one trio run whose clock and
scheduler are deterministic, and every choice comes from the seed, so the same
seed gives a byte-identical trace.

* :mod:`.choices` -- the sources of nondeterminism (seeded streams, or Hypothesis draws);
* :mod:`.faults` -- plans as data: faults and client actions, generated, saved, replayed;
* :mod:`.kernel` -- virtual time: world events and trio tasks on one clock;
* :mod:`.network`, :mod:`.transport` -- ordered connections with latency and cuts,
  behind the runtime's transport port;
* :mod:`.storage`, :mod:`.process`, :mod:`.platform` -- the disk, processes that die,
  and the platform the runtime runs on;
* :mod:`.replica` -- a compute replica process: ``tidegate.replica``'s real ``ReplicaService``;
  :mod:`.kernel_host` -- how both replica services run on the kernel's virtual time;
* :mod:`.storage_replica` -- the storage replica: ``tidegate.replica``'s real ``StorageService``;
  :mod:`.upstream` -- the simulated upstreams its sources read; :mod:`.iceberg` -- the
  pyiceberg catalog and FileIO on the simulated disk its sinks (the production Iceberg
  writer) commit through; :mod:`.sink_target` -- the simulator's own cheaper writer of the
  same contract, for scenarios that ask for it (``sink_writer="simulated"``);
* :mod:`.controller` -- the controller process: the runtime's ``Environment``, killed and restored;
* :mod:`.clients` -- the workload, through the public API; :mod:`.history` -- what clients
  saw, and its offline checker (strict serializability);
* :mod:`.truth`, :mod:`.checkers` -- what really landed, safety and liveness checks;
  :mod:`.storage_checks` -- those of sources and sinks (exactly once, reclocked);
* :mod:`.coverage` -- the rules, errors and effects a run reached;
* :mod:`.world` -- all of it wired; :mod:`.run` -- ``run_simulation(RunOptions(seed, scenario))``;
* :mod:`.campaign`, :mod:`.shrink`, :mod:`.replay`, :mod:`.plot`, :mod:`.cli` -- the tools;
* :mod:`.mutants` -- deliberately broken variants, to measure bug-finding power;
* :mod:`.strategies` -- ``scenarios()`` for ``@given``, and ``run_scenario`` to shrink runs.

Running one seed (docs/simulator.md shows more)::

    from tidegate.sim import RunOptions, run_simulation, small
    result = run_simulation(RunOptions(seed=1, scenario=small()))
    print(result.summary())   # seed 1 [small] ok
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .faults import Fault, FaultKind, FaultPlan
from .scenario import (
    SCENARIOS,
    DataflowSpec,
    Scenario,
    SinkSpec,
    SourceSpec,
    TableSpec,
    WorkloadMix,
    small,
    sources,
    standard,
)

# Imported when first asked for: they bring the runtime (and, for ``scenarios``, Hypothesis),
# which ``tidegate sim --help`` and scenario files do not need.
_LAZY = {
    "ClientHistory": "history",
    "Violation": "history",
    "check_history": "history",
    "RunOptions": "run",
    "RunResult": "run",
    "RunStats": "run",
    "run_simulation": "run",
    "scenarios": "strategies",
}

__all__ = [
    "SCENARIOS",
    "ClientHistory",
    "DataflowSpec",
    "Fault",
    "FaultKind",
    "FaultPlan",
    "RunOptions",
    "RunResult",
    "RunStats",
    "Scenario",
    "SinkSpec",
    "SourceSpec",
    "TableSpec",
    "Violation",
    "WorkloadMix",
    "check_history",
    "run_simulation",
    "scenarios",
    "small",
    "sources",
    "standard",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:
    from .history import ClientHistory, Violation, check_history
    from .run import RunOptions, RunResult, RunStats, run_simulation
    from .strategies import scenarios
