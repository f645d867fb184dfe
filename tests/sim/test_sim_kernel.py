"""The simulation kernel, network, fault plans and trace: the deterministic foundation."""

from __future__ import annotations

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from tidegate.sim.choices import HypothesisChoices, SeededChoices
from tidegate.sim.faults import Fault, FaultKind, FaultPlan, FaultPlanError, generate_plan
from tidegate.sim.kernel import Kernel, run_virtual
from tidegate.sim.network import SimNetwork
from tidegate.sim.trace import Trace


def test_events_run_in_time_then_schedule_order_and_cancel_works() -> None:
    kernel = Kernel()
    seen: list[str] = []
    kernel.call_at(5, seen.append, "b")
    kernel.call_at(1, seen.append, "a")
    kernel.call_at(5, seen.append, "c")
    kernel.call_at(3, seen.append, "never").cancel()
    while kernel.step():
        pass
    assert seen == ["a", "b", "c"]
    assert kernel.now_ms == 5


def test_a_minute_of_virtual_time_passes_on_trios_virtual_clock() -> None:
    kernel = Kernel()
    ticks: list[int] = []

    def tick() -> None:
        ticks.append(kernel.now_ms)
        kernel.call_later(1000, tick)

    kernel.call_at(0, tick)

    async def main() -> float:
        start = trio.current_time()
        await kernel.run(60_000)
        return trio.current_time() - start

    elapsed = run_virtual(main)
    assert ticks == list(range(0, 60_001, 1000))
    assert elapsed == pytest.approx(60.0)


@pytest.mark.timeout(60)  # a spinning run never returns
def test_a_closed_kernel_wakes_its_sleepers_even_shielded_ones() -> None:
    """A task shielded from cancellation sleeps on the kernel when the run ends: closing the
    kernel wakes it (and later sleeps return at once), so the run ends instead of trio's clock
    spinning for ever with nothing to run."""
    kernel = Kernel()
    woke: list[str] = []

    async def shielded() -> None:
        with trio.CancelScope(shield=True):
            await kernel.sleep(60_000)
            woke.append("first")
            await kernel.sleep(60_000)
            woke.append("second")

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(shielded)
            try:
                await kernel.run(1_000)
                nursery.cancel_scope.cancel()
            finally:
                kernel.close()

    run_virtual(main)
    assert woke == ["first", "second"] and kernel.now_ms == 1_000


@given(seed=st.integers(0, 2**32), n=st.integers(1, 60))
def test_each_direction_of_a_connection_delivers_in_order(seed: int, n: int) -> None:
    kernel = Kernel()
    net = SimNetwork(kernel, SeededChoices(seed), latency_ms=(1, 50))
    down: list[int] = []
    up: list[int] = []
    conn = net.connect("r1", lambda c, m: down.append(m), lambda c, m: up.append(m), lambda c: None)
    for i in range(n):
        net.send_to_replica(conn, i)
        net.send_to_controller(conn, -i)
        if seed % 3 == 0:
            kernel.step()
    while kernel.step():
        pass
    assert down == list(range(n))
    assert up == [-i for i in range(n)]


def test_a_cut_loses_messages_in_flight_and_tells_the_ends() -> None:
    kernel = Kernel()
    net = SimNetwork(kernel, SeededChoices(1), latency_ms=(10, 10))
    got: list[int] = []
    closed: list[int] = []
    conn = net.connect(
        "r1", lambda c, m: got.append(m), lambda c, m: None, lambda c: closed.append(c.number)
    )
    net.send_to_replica(conn, 1)
    kernel.step()  # delivered at 10
    net.send_to_replica(conn, 2)
    net.cut(conn)
    net.send_to_replica(conn, 3)
    while kernel.step():
        pass
    assert got == [1]
    assert closed == [conn.number]
    assert (
        net.connect("r1", lambda c, m: None, lambda c, m: None, lambda c: None).number > conn.number
    )


def test_slow_replicas_take_longer() -> None:
    kernel = Kernel()
    net = SimNetwork(kernel, SeededChoices(1), latency_ms=(10, 10))
    net.slow["r1"] = 5
    times: list[int] = []
    conn = net.connect(
        "r1", lambda c, m: times.append(kernel.now_ms), lambda c, m: None, lambda c: None
    )
    net.send_to_replica(conn, "x")
    while kernel.step():
        pass
    assert times == [50]


@given(seed=st.integers(0, 2**32))
def test_fault_plans_are_a_function_of_the_seed_and_round_trip_through_json(seed: int) -> None:
    plan = generate_plan(SeededChoices(seed), ["r1", "r2", "r3"], 60_000, 5)
    assert plan == generate_plan(SeededChoices(seed), ["r1", "r2", "r3"], 60_000, 5)
    assert FaultPlan.loads(plan.dumps()) == plan
    assert plan.enabled, "swarm selection always enables at least one kind"
    assert all(f.kind in plan.enabled for f in plan.faults)
    assert [f.at_ms for f in plan.faults] == sorted(f.at_ms for f in plan.faults)


def test_bad_fault_plans_are_rejected_with_a_clear_error() -> None:
    with pytest.raises(FaultPlanError, match="not JSON"):
        FaultPlan.loads("{")
    with pytest.raises(FaultPlanError, match="version"):
        FaultPlan.loads('{"version": 99}')
    with pytest.raises(FaultPlanError, match="bad fault record"):
        FaultPlan.loads('{"version": 1, "faults": [{"at_ms": 1, "kind": "meteor"}]}')
    with pytest.raises(FaultPlanError, match="target replica"):
        Fault(1, FaultKind.CRASH_REPLICA)


@given(st.data())
def test_hypothesis_choices_stay_in_range(data: st.DataObject) -> None:
    source = HypothesisChoices(data)
    assert 3 <= source.integer(3, 9) <= 9


def test_trace_hash_is_a_function_of_the_events() -> None:
    def run() -> Trace:
        t = Trace()
        t.record(0, "send", replica="r1", message={"b": 1, "a": (1, 2)})
        t.record(5, "peek", uuid="x", rows=[("a", 1)])
        return t

    assert run().digest() == run().digest()
    other = run()
    other.record(6, "extra")
    assert other.digest() != run().digest()
    assert run().tail()[0] == '{"k":"send","message":{"a":[1,2],"b":1},"replica":"r1","t":0}'
