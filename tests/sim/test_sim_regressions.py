"""Spec bugs the simulator found, each pinned by a minimal example (with the run that found it)."""

from __future__ import annotations

import uuid

from tidegate.sim.clients import dataflow_description
from tidegate.sim.scenario import small
from tidegate.spec.compute_replica import ComputeReplica, ReadSource, Respond
from tidegate.spec.errors import TidegateError
from tidegate.spec.executor import PythonExecutor
from tidegate.spec.frontier import Antichain
from tidegate.spec.ids import GlobalId
from tidegate.spec.protocol.commands import (
    CreateDataflow,
    CreateInstance,
    Hello,
    InitializationComplete,
    Peek,
    Schedule,
)
from tidegate.spec.protocol.responses import PeekError, PeekResponse
from tidegate.spec.protocol.types import (
    ColumnOrder,
    InstanceConfig,
    PeekDescription,
    RowSetFinishing,
)

T1 = GlobalId.user(1)


def test_a_second_reader_of_a_source_does_not_restart_it_below_the_first_readers_progress() -> None:
    """Found by ``run_simulation(RunOptions(0, small()))`` (no faults needed): a dataflow
    installed at as_of 100 on a table another dataflow has read up to 300 made the replica
    restart the read from the first dataflow's as_of 0 -- a snapshot below the table's since,
    which storage cannot serve. The restarted read must start no earlier than the readers need:
    the meet of the new as_of and each existing reader's progress (joined with its as_of)."""
    spec = next(d for d in small().dataflows if d.name == "orders")
    replica = ComputeReplica(PythonExecutor())
    for cmd in (
        Hello(uuid.UUID(int=1)),
        CreateInstance(InstanceConfig()),
        InitializationComplete(),
    ):
        replica.handle_command(cmd)
    first = GlobalId.user(10)
    replica.handle_command(CreateDataflow(dataflow_description(spec, first, 0)))
    replica.handle_command(Schedule(first))
    replica.feed_source(T1, [(("ann", 1), 5, 1)], Antichain([300]))
    replica.step()
    second = GlobalId.user(11)
    replica.handle_command(CreateDataflow(dataflow_description(spec, second, 100)))
    outputs = replica.handle_command(Schedule(second))
    reads = [o for o in outputs if isinstance(o, ReadSource) and o.collection_id == T1]
    assert reads, outputs
    assert reads[-1].as_of == Antichain([100])


def test_a_peek_whose_finishing_names_a_missing_column_gets_a_typed_answer() -> None:
    """Found by an early ``standard()`` run whose clients ordered every peek by columns 0 and 1:
    the controller accepted a peek of a one-column index ordered by column 1, and the replica
    then raised a bare ``IndexError`` while sorting. Bad input must get a typed error (from the
    controller, or a ``PeekError`` answer), never crash the replica."""
    spec = next(d for d in small().dataflows if d.name == "orders")
    replica = ComputeReplica(PythonExecutor())
    for cmd in (
        Hello(uuid.UUID(int=1)),
        CreateInstance(InstanceConfig()),
        InitializationComplete(),
    ):
        replica.handle_command(cmd)
    index = GlobalId.user(10)
    replica.handle_command(CreateDataflow(dataflow_description(spec, index, 0)))
    replica.handle_command(Schedule(index))
    replica.feed_source(T1, [(("ann", 1), 0, 1)], Antichain([5]))
    replica.step()
    bad = RowSetFinishing(order_by=(ColumnOrder(7),))
    peek = Peek(PeekDescription(uuid.UUID(int=9), index, 1, bad))
    try:
        outputs = replica.handle_command(peek) + replica.step()
    except TidegateError:
        return
    answers = [o.response for o in outputs if isinstance(o, Respond)]
    assert any(isinstance(a, PeekResponse) and isinstance(a.result, PeekError) for a in answers)
