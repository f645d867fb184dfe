"""Storage instances: their one replica and the reduced command history replayed to it.

A storage instance runs on at most one replica (the seed's design): connecting
another one severs the old (the driver gets
:class:`~.effects.DisconnectStorageReplica`). The history is kept reduced at
all times (reference section 2.12): the latest configuration, one command per
live ingestion and sink, the last compaction frontier of each live object, and
whether initialization completed and writes are allowed. An object compacted
to ``[]`` leaves the history at once, so its size tracks live state. A
connecting replica gets ``Hello`` and then the history in the reference's
fixed order: configuration, ingestions, sinks, compactions,
``InitializationComplete``, ``AllowWrites``.
"""

from __future__ import annotations

from collections.abc import Callable

from ..frontier import Antichain
from ..ids import GlobalId, InstanceId, ReplicaId
from .commands import (
    RunIngestion,
    RunSink,
    StorageAllowCompaction,
    StorageAllowWrites,
    StorageCommand,
    StorageInitializationComplete,
    StorageUpdateConfiguration,
)
from .descriptions import Ingestion, StorageParameters
from .effects import SendStorageCommand
from .sessions import StorageControllerSession

__all__ = ["StorageInstance", "sink_as_of"]


def sink_as_of(as_of: Antichain, held: Antichain) -> tuple[Antichain, bool]:
    """The SinkAsOf rule: an as_of at or before the held since is replaced by it and marked strict."""
    if as_of <= held:
        return held, True
    return as_of, False


class StorageInstance:
    """One storage instance (cluster): its replica, if connected, and the reduced history.

    ``session`` checks every command sent to the replica and every response
    from it, when the controller checks the protocol.
    """

    __slots__ = (
        "check_protocol",
        "compactions",
        "id",
        "ingestions",
        "location",
        "remaps",
        "replica",
        "session",
        "sinks",
    )

    def __init__(self, id: InstanceId, *, check_protocol: bool = False) -> None:
        self.id = id
        self.check_protocol = check_protocol
        self.replica: ReplicaId | None = None
        self.location = ""
        self.session: StorageControllerSession | None = None
        self.ingestions: dict[GlobalId, RunIngestion] = {}
        self.sinks: dict[GlobalId, RunSink] = {}
        self.compactions: dict[GlobalId, Antichain] = {}
        # The remap collection of each live ingestion -> the ingestion.
        self.remaps: dict[GlobalId, GlobalId] = {}

    @property
    def replicas(self) -> dict[ReplicaId, str]:
        """The connected replica (none or one) and its location."""
        return {} if self.replica is None else {self.replica: self.location}

    def connect(self, replica: ReplicaId, location: str) -> ReplicaId | None:
        """Make ``replica`` the instance's replica; returns the other one it replaced, if any.

        The caller sends it ``Hello`` and the history through :meth:`address`.
        """
        old = self.replica if self.replica != replica else None
        self.replica = replica
        self.location = location
        self.session = StorageControllerSession() if self.check_protocol else None
        return old

    def disconnect(self) -> None:
        self.replica = None
        self.location = ""
        self.session = None

    def address(self, command: StorageCommand) -> list[SendStorageCommand]:
        """``command`` for the connected replica, if any (checked by the session first), without recording it."""
        if self.replica is None:
            return []
        if self.session is not None:
            self.session.on_command(command)
        return [SendStorageCommand(self.id, self.replica, command)]

    def send(self, command: StorageCommand) -> list[SendStorageCommand]:
        """Record ``command`` in the history and address it to the connected replica."""
        self._record(command)
        return self.address(command)

    def _record(self, command: StorageCommand) -> None:
        if isinstance(command, RunIngestion):
            self.ingestions[command.id] = command
            src = command.description.data_source
            if isinstance(src, Ingestion) and src.remap_collection is not None:
                self.remaps[src.remap_collection] = command.id
        elif isinstance(command, RunSink):
            self.sinks[command.id] = command
        elif isinstance(command, StorageAllowCompaction):
            if command.frontier.is_empty():
                run = self.ingestions.pop(command.id, None)
                if run is not None:
                    self.remaps = {r: i for r, i in self.remaps.items() if i != command.id}
                self.sinks.pop(command.id, None)
                self.compactions.pop(command.id, None)
            elif command.id in self.ingestions or command.id in self.sinks:
                self.compactions[command.id] = command.frontier

    def history(
        self,
        initialized: bool,
        config: StorageParameters,
        resume_upper_of: Callable[[GlobalId], Antichain],
        writes_allowed: bool,
    ) -> list[StorageCommand]:
        """The commands a (re)connecting replica receives after ``Hello``, in replay order.

        Ingestions resume from their resumption frontier; sinks' as_ofs are
        advanced by their last compaction frontier (SinkAsOf rule).
        """
        out: list[StorageCommand] = []
        if not config.is_empty():
            out.append(StorageUpdateConfiguration(config))
        for id in sorted(self.ingestions):
            cmd = self.ingestions[id]
            out.append(RunIngestion(id, cmd.description, resume_upper_of(id)))
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
        if writes_allowed:
            out.append(StorageAllowWrites())
        return out
