"""The storage replica's behaviour, written once: a sans-IO state machine that ingests and sinks.

:class:`StorageReplica` takes the storage controller's commands
(:meth:`~StorageReplica.handle_command`), upstream batches, shard and sink
outcomes and the driver's clock (:meth:`~StorageReplica.tick`), and records
:mod:`outputs <.outputs>` in its outbox: replies for the controller and IO for
the driver (upstream readers, remap reads, compare-and-appends, sink targets).
The module docstring of :mod:`.replica` gives the exactly-once arguments;
:mod:`tidegate.spec.testing.storage_replica` drives it in a pure in-memory world.
"""

from .outputs import (
    AckSource,
    CloseSink,
    CommitSink,
    OpenSink,
    ReadRemap,
    ReadSinkInput,
    Reply,
    StartSource,
    StopSinkInput,
    StopSource,
    StorageReplicaOutput,
    WriteShard,
)
from .replica import StorageReplica

__all__ = [
    "AckSource",
    "CloseSink",
    "CommitSink",
    "OpenSink",
    "ReadRemap",
    "ReadSinkInput",
    "Reply",
    "StartSource",
    "StopSinkInput",
    "StopSource",
    "StorageReplica",
    "StorageReplicaOutput",
    "WriteShard",
]
