"""The simulator's fast paths change nothing observable.

Event-driven publishing in the replica, skipping the steps of a replica that
nothing reached since its last step, dirty-flag stepping in the executor and
the hand-built trace lines are optimisations: a run with them must produce the
very trace (digest) of a run that steps in full, publishes every export and
steps every dataflow each time, and a fast trace line must be the JSON
encoder's line.
"""

from __future__ import annotations

import dataclasses
import json
import re
import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidegate.runtime.storage import ShardStore
from tidegate.sim import RunOptions, run_simulation
from tidegate.sim.platform import SimPlatform
from tidegate.sim.plot import summarise
from tidegate.sim.scenario import (
    DEFAULT_REPLICA_STEP_MS,
    DEFAULT_TICK_MS,
    Scenario,
    ScenarioError,
    small,
    standard,
)
from tidegate.sim.trace import TraceEvent, _fast_line, canonical
from tidegate.spec.compute import ComputeController, InMemoryStorage, PeekResultOut
from tidegate.spec.compute_replica import ComputeReplica, PeekPersist, Respond
from tidegate.spec.errors import UnknownPersistPeek
from tidegate.spec.executor.python import PythonExecutor
from tidegate.spec.frontier import Antichain, Product, accumulate, less_equal
from tidegate.spec.ids import GlobalId
from tidegate.spec.protocol.commands import (
    AllowCompaction,
    CancelPeek,
    CreateInstance,
    Hello,
    InitializationComplete,
    Peek,
    Schedule,
)
from tidegate.spec.protocol.responses import Frontiers, PeekCanceled, PeekResponse, PeekRows
from tidegate.spec.protocol.types import InstanceConfig, LoggingConfig, PeekDescription
from tidegate.spec.testing.controller import commands_to, index_dataflow, of_type

SHORT = dataclasses.replace(small(), duration_ms=3_000, quiet_ms=6_000)


def _digest(seed: int) -> str:
    return run_simulation(RunOptions(seed=seed, scenario=SHORT)).trace_digest


@pytest.mark.parametrize("seed", [1, 4])
def test_event_driven_publishing_and_stepping_equal_eager_ones(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = _digest(seed)
    publish, replica_step, step = ComputeReplica._publish, ComputeReplica.step, PythonExecutor.step

    def eager_publish(self: Any) -> Any:
        self._all_dirty = True  # look at every export, as if everything had moved
        return publish(self)

    def eager_replica_step(self: Any) -> Any:
        self._settled = False  # step in full even when nothing arrived since the last step
        return replica_step(self)

    def eager_step(self: Any) -> Any:
        for df in self._dataflows.values():
            df.dirty = True
        return step(self)

    monkeypatch.setattr(ComputeReplica, "_publish", eager_publish)
    monkeypatch.setattr(ComputeReplica, "step", eager_replica_step)
    monkeypatch.setattr(PythonExecutor, "step", eager_step)
    assert _digest(seed) == fast


def test_small_commits_take_the_brief_path_and_it_changes_nothing_observable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The simulated disk is the controller's local disk, so the runtime's small commits
    reach ``Platform.run_brief`` in a run (production runs it on the event loop); the
    simulator runs it as every other call, so a run with every write as blocking work has
    the very same trace."""
    brief = [0]
    blocking = SimPlatform.run_blocking

    async def counted(self: SimPlatform, fn: Any, *args: Any) -> Any:
        brief[0] += 1
        return await blocking(self, fn, *args)

    monkeypatch.setattr(SimPlatform, "run_brief", counted)
    with_brief = _digest(1)
    assert brief[0] > 0
    monkeypatch.setattr(ShardStore, "local", property(lambda self: False))
    brief[0] = 0
    assert _digest(1) == with_brief
    assert brief[0] == 0


_names = st.text(min_size=1, max_size=6)
_values = st.one_of(st.text(max_size=12), st.integers(), st.booleans(), st.none(), st.floats())


@given(
    at=st.integers(0, 10**7),
    kind=st.text(max_size=8),
    fields=st.dictionaries(_names, _values, max_size=5),
)
def test_fast_trace_line_is_the_json_line_or_declines(
    at: int, kind: str, fields: dict[str, Any]
) -> None:
    fast = _fast_line(at, kind, dict(fields))
    plain = all(type(v) in (str, int) for v in fields.values()) and not {"t", "k"} & set(fields)
    if not plain:
        assert fast is None
        return
    assert fast == TraceEvent(at, kind, {k: canonical(v) for k, v in fields.items()}).line()


def test_plot_summary_reads_reports_and_peeks_from_trace_lines() -> None:
    lines = [
        '{"k":"resp","m":"Frontiers u5 w=[3] i=[2] o=[3]","r":"r1","e":1,"t":10}',
        '{"k":"resp","m":"SubscribeResponse u6 SubscribeBatch [0]..[4]","r":"r2","e":1,"t":11}',
        '{"id":"u5","k":"upper","t":12,"upper":"[3]"}',
        '{"id":"u5","k":"since","since":"[1]","t":13}',
        '{"id":"u5","k":"peek","t":20,"time":2,"uuid":"abc"}',
        '{"k":"peek_result","result":"PeekRows","t":25,"uuid":"abc"}',
        '{"id":"u5","k":"peek","t":26,"time":0,"uuid":"def"}',
    ]
    s = summarise(lines)
    assert s.series["u5"] == {
        "r1 write": [(10, 3)],
        "controller upper": [(12, 3)],
        "controller since": [(13, 1)],
    }
    assert s.series["u6"] == {"r2 write": [(11, 4)]}
    assert [(p.issued_ms, p.done_ms, p.read_at, p.status) for p in s.peeks["u5"]] == [
        (20, 25, 2, "answered"),
        (26, None, 0, "issued"),
    ]
    assert s.replicas == {}


# -- int fast path of accumulate ---------------------------------------------------------

_updates = st.lists(
    st.tuples(st.tuples(st.integers(0, 3)), st.integers(0, 20), st.integers(-2, 2)), max_size=30
)


@given(updates=_updates, time=st.integers(0, 20))
def test_accumulate_on_int_times_is_the_partial_order_sum(
    updates: list[tuple[tuple[int], int, int]], time: int
) -> None:
    acc: dict[tuple[int], int] = {}
    for row, t, d in updates:
        if less_equal(t, time):
            acc[row] = acc.get(row, 0) + d
    assert accumulate(updates, time) == {r: c for r, c in acc.items() if c}


def test_accumulate_on_product_times_keeps_the_partial_order() -> None:
    ups = [(("a",), Product(1, 3), 1), (("b",), Product(2, 1), 1), (("a",), Product(0, 0), 1)]
    assert accumulate(ups, Product(1, 3)) == {("a",): 2}


# -- tick and replica step interval are scenario parameters --------------------------------


def test_scenario_tick_and_step_round_trip_and_default_for_old_files() -> None:
    sc = dataclasses.replace(small(), tick_ms=250, replica_step_ms=(30, 90))
    assert Scenario.from_json(json.loads(json.dumps(sc.to_json()))) == sc
    old = small().to_json()
    del old["tick_ms"], old["replica_step_ms"]
    loaded = Scenario.from_json(old)
    assert (loaded.tick_ms, loaded.replica_step_ms) == (DEFAULT_TICK_MS, DEFAULT_REPLICA_STEP_MS)


@pytest.mark.parametrize(
    "change", [{"tick_ms": 0}, {"replica_step_ms": (0, 5)}, {"replica_step_ms": (9, 3)}]
)
def test_bad_tick_or_step_is_refused(change: dict[str, Any]) -> None:
    with pytest.raises(ScenarioError):
        dataclasses.replace(small(), **change)
    with pytest.raises(ScenarioError):
        Scenario.from_json({**small().to_json(), **change})


@pytest.mark.parametrize("make", [standard, small])
def test_built_in_scenarios_have_the_size_their_docstring_states(make: Any) -> None:
    sc: Scenario = make()
    doc = " ".join(make.__doc__.split())
    stated = {
        what: int(n)
        for n, what in re.findall(r"(\d+) (replicas|dataflows|tables|virtual seconds|faults)", doc)
    }
    assert stated == {
        "replicas": sc.replicas,
        "dataflows": len(sc.dataflows),
        "tables": len(sc.tables),
        "virtual seconds": sc.duration_ms // 1000,
        "faults": sc.faults,
    }


def test_standard_ticks_once_a_second() -> None:
    assert standard().tick_ms == 1_000


def test_the_tick_interval_drives_the_message_volume() -> None:
    base = dataclasses.replace(small(), duration_ms=2_000, quiet_ms=6_000, faults=0)
    fast = run_simulation(RunOptions(seed=3, scenario=dataclasses.replace(base, tick_ms=40)))
    slow = run_simulation(RunOptions(seed=3, scenario=dataclasses.replace(base, tick_ms=1_000)))
    assert fast.ok and slow.ok
    assert slow.stats.messages * 2 < fast.stats.messages


# -- a liveness bug that slower ticks exposed -----------------------------------------------


def test_an_index_dropped_before_scheduling_still_serves_its_pending_peek() -> None:
    """Dropping an index whose inputs have not passed its as_of yet must not strand a peek.

    The peek's read hold keeps the collection alive; it must still be scheduled
    once its inputs advance, or no replica can ever answer the peek. (Found by
    the standard scenario once tables ticked every second instead of every 40 ms.)
    """
    storage = InMemoryStorage()
    s1, i1 = GlobalId.user(1), GlobalId.user(10)
    storage.add_collection(s1, since=0, upper=10)
    ctl = ComputeController(storage, check_protocol=True)
    ctl.initialization_complete()
    ctl.create_instance("c1")
    ctl.add_replica("c1", "r1")
    ctl.create_dataflow("c1", index_dataflow(i1, sources=[s1], as_of=10))
    ctl.drain()
    uid = ctl.peek("c1", i1, 10)
    ctl.drain()
    ctl.drop_collections("c1", [i1])
    storage.advance_upper(s1, Antichain([11]))
    ctl.drain()
    ctl.storage_frontiers_advanced([s1])
    assert Schedule(i1) in commands_to(ctl.drain())
    ctl.handle_response("c1", "r1", 1, Frontiers(i1, Antichain([11])))
    ctl.drain()
    ctl.handle_response("c1", "r1", 1, PeekResponse(uid, PeekRows(())))
    out = ctl.drain()
    assert of_type(out, PeekResultOut) == [PeekResultOut("c1", uid, PeekRows(()))]
    assert AllowCompaction(i1, Antichain()) in commands_to(out, "r1")
    assert ctl.instance("c1").pending_peeks() == []


def test_a_persist_peek_replayed_then_cancelled_tolerates_both_late_reads() -> None:
    """A persist peek handed to the driver on two connections, then cancelled, gets two reads back.

    Both must be ignored (each connection's read was handed out once); the second
    used to raise ``UnknownPersistPeek``. A third, never handed out, still raises.
    (Found by the standard scenario with one-second ticks, seed 130.)
    """
    replica = ComputeReplica(PythonExecutor())
    u = uuid.UUID(int=7)
    persist = Peek(PeekDescription(u, GlobalId.user(1), 5, target="persist"))
    handed = 0
    for nonce in (1, 2):  # the second iteration replays the still-pending peek
        replica.handle_command(Hello(uuid.UUID(int=nonce)))
        replica.handle_command(CreateInstance(InstanceConfig(LoggingConfig())))
        replica.handle_command(InitializationComplete())
        replica.drain()
        replica.handle_command(persist)
        handed += sum(isinstance(o, PeekPersist) for o in replica.drain())
    assert handed == 2
    replica.handle_command(CancelPeek(u))
    assert replica.drain() == [Respond(PeekResponse(u, PeekCanceled()))]
    replica.complete_persist_peek(u, {(1,): 1})
    assert replica.drain() == []
    replica.complete_persist_peek(u, {(1,): 1})
    assert replica.drain() == []
    with pytest.raises(UnknownPersistPeek):
        replica.complete_persist_peek(u, {(1,): 1})
