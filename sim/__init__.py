"""Deterministic simulation of tidegate: the spec's controller and replicas under faults.

Everything runs inside one trio run with a :class:`trio.testing.MockClock`
(virtual time that jumps whenever the run is idle), drives the real
:mod:`tidegate.spec` state machines, and draws every nondeterministic choice
from one :class:`ChoiceSource`. The same seed and scenario give a
byte-identical trace.

* :mod:`.choices` -- the one source of nondeterminism (seeded RNG or Hypothesis draws);
* :mod:`.faults` -- fault plans as data (JSON), generated swarm-style from a seed;
* :mod:`.network` -- ordered, reliable-while-up connections with latency, cuts and restores;
* :mod:`.kernel` -- the discrete-event loop on trio's virtual clock;
* :mod:`.trace` -- the canonical event trace and its hash;
* :mod:`.scenario` -- what a run hosts and does (``standard()``, ``small()``, JSON files);
* :mod:`.storage` -- shards over the spec's shard state machine, in memory;
* :mod:`.replica` -- a replica process: the spec ``ComputeReplica`` on the ``PythonExecutor``;
* :mod:`.driver` -- the thin interpreter of the controller's effects;
* :mod:`.clients` -- the workload; :mod:`.history` -- what clients saw, and its offline checker;
* :mod:`.checkers` -- safety, liveness and "sometimes" counters; :mod:`.world` -- all of it wired;
* :mod:`.run` -- ``run_simulation(RunOptions(seed, scenario)) -> RunResult``;
* :mod:`.strategies` -- ``scenarios()`` for ``@given``, and ``run_scenario`` to shrink runs.

>>> from tidegate.sim import RunOptions, run_simulation, small
>>> result = run_simulation(RunOptions(seed=1, scenario=small()))  # doctest: +SKIP
>>> result.ok, result.trace_digest[:8]  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from .faults import Fault, FaultKind, FaultPlan
from .history import ClientHistory, Violation, check_history
from .run import RunOptions, RunResult, RunStats, run_simulation
from .scenario import SCENARIOS, DataflowSpec, Scenario, TableSpec, WorkloadMix, small, standard

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
    "TableSpec",
    "Violation",
    "WorkloadMix",
    "check_history",
    "run_simulation",
    "scenarios",
    "small",
    "standard",
]


def __getattr__(name: str) -> Any:
    # ``scenarios`` needs Hypothesis: import it only when asked for.
    if name == "scenarios":
        from .strategies import scenarios

        return scenarios
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
