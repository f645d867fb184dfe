"""Storage instances: their replicas and the reduced command history replayed to them.

The history is kept reduced at all times (reference section 2.12): the latest
configuration, one command per live ingestion and sink, the last compaction
frontier of each live object, and whether initialization completed. An object
compacted to ``[]`` leaves the history at once, so its size tracks live state.
"""

from __future__ import annotations

from collections.abc import Callable

from ..frontier import Antichain
from ..ids import GlobalId, InstanceId, ReplicaId
from .commands import (
    RunIngestion,
    RunSink,
    StorageAllowCompaction,
    StorageCommand,
    StorageInitializationComplete,
    StorageUpdateConfiguration,
)
from .descriptions import StorageParameters
from .effects import SendStorageCommand

__all__ = ["StorageInstance", "sink_as_of"]


def sink_as_of(as_of: Antichain, held: Antichain) -> tuple[Antichain, bool]:
    """The SinkAsOf rule: an as_of at or before the held since is replaced by it and marked strict."""
    if as_of <= held:
        return held, True
    return as_of, False


class StorageInstance:
    """One storage instance (cluster): connected replicas and the reduced history."""

    __slots__ = ("compactions", "id", "ingestions", "replicas", "sinks")

    def __init__(self, id: InstanceId) -> None:
        self.id = id
        self.replicas: dict[ReplicaId, str] = {}
        self.ingestions: dict[GlobalId, RunIngestion] = {}
        self.sinks: dict[GlobalId, RunSink] = {}
        self.compactions: dict[GlobalId, Antichain] = {}

    def send(self, command: StorageCommand) -> list[SendStorageCommand]:
        """Record ``command`` in the history and address it to every connected replica."""
        self._record(command)
        return [SendStorageCommand(self.id, r, command) for r in sorted(self.replicas)]

    def _record(self, command: StorageCommand) -> None:
        if isinstance(command, RunIngestion):
            self.ingestions[command.id] = command
        elif isinstance(command, RunSink):
            self.sinks[command.id] = command
        elif isinstance(command, StorageAllowCompaction):
            if command.frontier.is_empty():
                self.ingestions.pop(command.id, None)
                self.sinks.pop(command.id, None)
                self.compactions.pop(command.id, None)
            else:
                self.compactions[command.id] = command.frontier

    def history(
        self,
        initialized: bool,
        config: StorageParameters,
        upper_of: Callable[[GlobalId], Antichain],
    ) -> list[StorageCommand]:
        """The commands a (re)connecting replica receives, in replay order.

        Ingestions resume from their collection's current upper; sinks' as_ofs
        are advanced by their last compaction frontier (SinkAsOf rule).
        """
        out: list[StorageCommand] = []
        if not config.is_empty():
            out.append(StorageUpdateConfiguration(config))
        for id in sorted(self.ingestions):
            cmd = self.ingestions[id]
            out.append(RunIngestion(id, cmd.description, upper_of(id)))
        for id in sorted(self.sinks):
            sink = self.sinks[id]
            compaction = self.compactions.get(id)
            if compaction is None:
                out.append(sink)
            else:
                as_of, strict = sink_as_of(sink.as_of, compaction)
                out.append(RunSink(id, sink.description, as_of, strict or sink.strict))
        for id in sorted(self.compactions):
            out.append(StorageAllowCompaction(id, self.compactions[id]))
        if initialized:
            out.append(StorageInitializationComplete())
        return out
