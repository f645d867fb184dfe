"""History reduction keeps a copy-to only until it has been answered.

The controller drops a copy-to as soon as the first replica answers it
(``AllowCompaction(id, [])``), so the reduced history -- what a new or
reconnecting replica is sent -- holds the copy-to, at its own as_of, until
then, and nothing of it afterwards.
"""

from __future__ import annotations

import uuid

from tidegate.spec.compute import ComputeController, InMemoryStorage
from tidegate.spec.frontier import Antichain
from tidegate.spec.history import CommandHistory, reduce_commands
from tidegate.spec.ids import GlobalId
from tidegate.spec.protocol import (
    AllowCompaction,
    CopyToConnection,
    CopyToResponse,
    CopyToRowCount,
    CreateDataflow,
    CreateInstance,
    DataflowDescription,
    Hello,
    InitializationComplete,
    InstanceConfig,
    Schedule,
    SinkExport,
    SourceImport,
)
from tidegate.spec.protocol.types import BuildDesc
from tidegate.spec.testing.controller import commands_to

S1 = GlobalId.user(1)
CT = GlobalId.transient(3)
EMPTY = Antichain()


def copy_to() -> CreateDataflow:
    return CreateDataflow(
        DataflowDescription(
            "copy-to",
            source_imports=(SourceImport(S1),),
            objects_to_build=(BuildDesc(CT, None),),
            sink_exports=(SinkExport(CT, CT, CopyToConnection("file:///out")),),
            as_of=Antichain([4]),
        )
    )


HEAD = [Hello(uuid.UUID(int=1)), CreateInstance(InstanceConfig())]


def test_an_unanswered_copy_to_is_replayed_at_its_as_of() -> None:
    cmds = [*HEAD, copy_to(), Schedule(CT), InitializationComplete()]
    assert reduce_commands(cmds) == cmds


def test_an_answered_copy_to_leaves_nothing_behind() -> None:
    cmds = [*HEAD, copy_to(), Schedule(CT), InitializationComplete(), AllowCompaction(CT, EMPTY)]
    assert reduce_commands(cmds) == [*HEAD, InitializationComplete()]
    h = CommandHistory()
    for c in cmds:
        h.push(c)
    h.reduce()
    assert h.live_dataflow_count == 0
    assert list(h) == [*HEAD, InitializationComplete()]


def test_the_controllers_history_drops_the_copy_to_once_a_replica_answers() -> None:
    storage = InMemoryStorage()
    storage.add_collection(S1, since=0, upper=10)
    ctl = ComputeController(storage)
    ctl.initialization_complete()
    ctl.create_instance("c1")
    ctl.add_replica("c1", "r1")
    ctl.create_dataflow("c1", copy_to().dataflow)
    ctl.drain()
    ctl.handle_response("c1", "r1", 1, CopyToResponse(CT, CopyToRowCount(2)))
    ctl.drain()
    # A replica added now gets no trace of the copy-to.
    ctl.add_replica("c1", "r2")
    sent = commands_to(ctl.drain(), "r2")
    assert not [c for c in sent if isinstance(c, CreateDataflow | Schedule)]
    assert not [c for c in sent if isinstance(c, AllowCompaction) and c.id == CT]
