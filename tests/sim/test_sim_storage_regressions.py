"""Regressions found while the storage world was built (each names the run that found it)."""

from __future__ import annotations

from typing import Any

from tidegate.runtime.transport.version import PROTOCOL_VERSION, VERSION_HEADER
from tidegate.sim.choices import SeededChoices
from tidegate.sim.kernel import Kernel
from tidegate.sim.network import SimNetwork
from tidegate.sim.transport import SimReplicaEndpoint


class _Handler:
    def __init__(self) -> None:
        self.connections = 0

    def on_connect(self, metadata: Any, responses: Any) -> Any:
        self.connections += 1
        return self


def test_a_ghost_connection_attempt_while_the_network_is_cut_is_refused_quietly() -> None:
    """``sources`` seed 17: a ``ghost_connection`` fault struck while a ``cut_connection`` still
    refused connections; the refusal escaped from the kernel event and ended the run as an
    unexpected error. A refused duplicate attempt is simply lost, as a real one would be."""
    kernel = Kernel()
    handler = _Handler()
    endpoint = SimReplicaEndpoint(SimNetwork(kernel, SeededChoices(1)), "r2", handler)
    endpoint.now_ms = lambda: kernel.now_ms
    endpoint.cut(until_ms=100)
    endpoint.ghost({VERSION_HEADER: PROTOCOL_VERSION})  # refused: nothing happens
    assert handler.connections == 0
    kernel.now_ms = 100
    endpoint.ghost({VERSION_HEADER: PROTOCOL_VERSION})
    assert handler.connections == 1


def test_a_sinks_hold_on_its_input_counts_in_the_compaction_check() -> None:
    """``sources`` seed 22: an Iceberg sink that commits every 500 ms holds its source one step
    behind what it has written, as Materialize's sinks do; the compaction check knew only the
    holds of compute dataflows and materialized views, and called the source's since stuck.
    Sinks are holders in the check now (one step back from their upper)."""
    from tidegate.sim.run import RunOptions, run_simulation
    from tidegate.sim.scenario import SCENARIOS

    result = run_simulation(RunOptions(seed=22, scenario=SCENARIOS["sources"]()))
    assert result.ok, result.violation
