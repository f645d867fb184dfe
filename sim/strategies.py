"""Hypothesis strategies for whole simulation scenarios, and a runner that lets Hypothesis shrink them.

::

    from hypothesis import given, settings, strategies as st
    from tidegate.sim import scenarios
    from tidegate.sim.strategies import run_scenario

    @given(scenarios(), st.data())
    def test_my_plans_survive_faults(scenario, data):
        result = run_scenario(scenario, data)
        assert result.ok, result.summary()

:func:`run_scenario` draws the fault plan and every client action from
Hypothesis (through :class:`~tidegate.sim.choices.HypothesisChoices`), so a
failure shrinks to a small workload and fault schedule; network and storage
latencies come from one seed drawn the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as st

from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import gets

from .choices import HypothesisChoices
from .run import RunOptions, RunResult, run_simulation
from .scenario import (
    DataflowKind,
    DataflowSpec,
    Scenario,
    TableSpec,
    WorkloadMix,
    _dataflows,
    _tables,
)
from .world import SUPPORTED_FAULTS

__all__ = ["run_scenario", "scenarios", "workload_mixes"]


def workload_mixes() -> st.SearchStrategy[WorkloadMix]:
    """Workload weights (appends and peeks always possible) and pacing."""
    w = st.integers(0, 10)
    return st.builds(
        WorkloadMix,
        append=st.integers(5, 40),
        append_many=w,
        append_peek=w,
        peek=st.integers(5, 30),
        peek_at=w,
        peek_key=w,
        peek_invalid=w,
        peek_future=w,
        cancel_peek=w,
        create_dataflow=w,
        drop_dataflow=w,
        set_read_policy=w,
        subscribe=w,
        unsubscribe=w,
        hydration=w,
        rows_per_append=st.tuples(st.integers(1, 2), st.integers(2, 5)),
        ms_between_actions=st.tuples(st.integers(10, 40), st.integers(40, 150)),
        null_per_mille=st.integers(0, 500),
    )


@st.composite
def _scenario(
    draw: st.DrawFn,
    tables: Sequence[TableSpec],
    dataflows: Sequence[DataflowSpec],
    max_replicas: int,
    max_duration_ms: int,
    max_faults: int,
    random_plans: bool,
) -> Scenario:
    chosen = draw(
        st.lists(
            st.sampled_from(list(tables)),
            min_size=1,
            max_size=len(tables),
            unique_by=lambda t: t.id,
        )
    )
    chosen.sort(key=lambda t: GlobalId.parse(t.id))
    ids = {GlobalId.parse(t.id) for t in chosen}
    usable = [d for d in dataflows if set(gets(d.plan)) <= ids]
    flows: list[DataflowSpec] = draw(
        st.lists(st.sampled_from(usable), max_size=5, unique_by=lambda d: d.name)
        if usable
        else st.just([])
    )
    if random_plans:
        from tidegate.spec.strategies.plan import plans

        inputs = {GlobalId.parse(t.id): t.schema for t in chosen}
        kinds: st.SearchStrategy[DataflowKind] = st.sampled_from(
            ["index", "materialized_view", "subscribe"]
        )
        for i in range(draw(st.integers(0, 2))):
            plan = draw(plans(inputs, max_depth=2))
            if not gets(plan):
                continue  # a constant-only plan reads no table: nothing to check over time
            flows.append(DataflowSpec(f"random{i}", draw(kinds), plan))
    fault_kinds = draw(
        st.none()
        | st.lists(st.sampled_from(list(SUPPORTED_FAULTS)), min_size=1, unique=True).map(tuple)
    )
    return Scenario(
        name="hypothesis",
        replicas=draw(st.integers(1, max_replicas)),
        tables=tuple(chosen),
        dataflows=tuple(flows),
        workload=draw(workload_mixes()),
        duration_ms=draw(st.integers(500, max_duration_ms)),
        faults=draw(st.integers(0, max_faults)),
        fault_kinds=fault_kinds,
        quiet_ms=draw(st.integers(6_000, 7_000)),  # outlasts the runtime's reconnect backoff
    )


def scenarios(
    *,
    tables: Sequence[TableSpec] | None = None,
    dataflows: Sequence[DataflowSpec] | None = None,
    max_replicas: int = 3,
    max_duration_ms: int = 3_000,
    max_faults: int = 3,
    random_plans: bool = False,
) -> st.SearchStrategy[Scenario]:
    """Whole scenarios: a subset of ``tables`` (default: the built-in three), dataflows over them
    (a subset of ``dataflows``, default the built-in ten, plus random plans if
    ``random_plans``), 1..``max_replicas`` replicas, a workload mix, a duration, and faults
    (a fixed set of kinds or swarm). Pass your own tables and dataflow specs to test your plans."""
    return _scenario(
        tuple(tables) if tables is not None else _tables(),
        tuple(dataflows) if dataflows is not None else _dataflows(),
        max_replicas,
        max_duration_ms,
        max_faults,
        random_plans,
    )


def run_scenario(
    scenario: Scenario, data: Any, *, seed: int = 0, mutant: str | None = None
) -> RunResult:
    """Run ``scenario`` with every choice drawn from Hypothesis ``data`` (``st.data()``), so it shrinks."""
    return run_simulation(
        RunOptions(seed=seed, scenario=scenario, mutant=mutant), HypothesisChoices(data)
    )
