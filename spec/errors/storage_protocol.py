"""Errors of the storage protocol: a command or response that breaks a rule of reference section 2.12.

The storage counterpart of :mod:`.protocol`: every rule is a
:class:`StorageProtocolError` (itself a :class:`~.protocol.ProtocolError`)
whose ``rule`` names it, raised by
:class:`~tidegate.spec.storage.StorageControllerSession` and
:class:`~tidegate.spec.storage.StorageReplicaSession` *before* any state
changes, and blamed exactly as the compute protocol's are: as a
:class:`~.protocol.LocalProtocolError` when this side broke it (a bug here) and
as a :class:`~.protocol.RemoteProtocolError` when the peer did (drop the
connection). ``except RemoteProtocolError`` catches the rules of both protocols.

>>> from tidegate.spec.errors import RemoteProtocolError, blamed
>>> e = blamed(StorageFrontierRegression("upper [3] after [5]"), RemoteProtocolError)
>>> isinstance(e, StorageFrontierRegression), isinstance(e, RemoteProtocolError), type(e).__name__
(True, True, 'RemoteStorageFrontierRegression')
"""

from __future__ import annotations

from . import protocol as _protocol
from .protocol import LocalProtocolError, ProtocolError, RemoteProtocolError

__all__ = [
    "DuplicateDroppedId",
    "DuplicateStorageAllowWrites",
    "DuplicateStorageObject",
    "ResponseAfterDroppedId",
    "StatisticsKindMismatch",
    "StorageCommandAfterDrop",
    "StorageCompactionRegression",
    "StorageFrontierRegression",
    "StorageProtocolError",
    "StorageResponseAfterDrop",
    "StorageStageViolation",
    "UnknownStorageObject",
    "UnrequestedDroppedId",
]


class StorageProtocolError(ProtocolError):
    """A command or response that the storage protocol forbids at this point of the session."""

    rule = "storage-protocol"


# -- commands ---------------------------------------------------------------------------


class StorageStageViolation(StorageProtocolError):
    """A message not allowed in the current stage: anything before ``Hello``, a second
    ``InitializationComplete``, a response before ``InitializationComplete``."""

    rule = "storage-stage-order"


class DuplicateStorageAllowWrites(StorageProtocolError):
    """A second ``AllowWrites`` in one iteration."""

    rule = "storage-allow-writes-once"


class DuplicateStorageObject(StorageProtocolError):
    """A ``RunIngestion``/``RunSink`` whose id (or remap collection) is already used in this iteration."""

    rule = "storage-object-ids-unique"


class UnknownStorageObject(StorageProtocolError):
    """A message names an object (or remap collection) that was not run in this iteration."""

    rule = "storage-object-run-first"


class StorageCommandAfterDrop(StorageProtocolError):
    """A command names an object already compacted to ``[]``."""

    rule = "storage-no-command-after-drop"


class StorageCompactionRegression(StorageProtocolError):
    """An ``AllowCompaction`` frontier behind the object's previous one."""

    rule = "storage-compaction-monotone"


# -- responses --------------------------------------------------------------------------


class StorageFrontierRegression(StorageProtocolError):
    """A ``FrontierUpper`` not strictly beyond the last one reported for that id in this iteration."""

    rule = "storage-frontiers-strictly-increase"


class StorageResponseAfterDrop(StorageProtocolError):
    """After ``AllowCompaction(id, [])`` the replica owes ``DroppedId``; it may say the object is
    ``dropped`` but report nothing else for it (and nobody may say ``dropped`` before)."""

    rule = "storage-only-dropped-after-drop"


class UnrequestedDroppedId(StorageProtocolError):
    """A ``DroppedId`` for an object that was not compacted to ``[]``."""

    rule = "storage-dropped-id-after-drop"


class DuplicateDroppedId(StorageProtocolError):
    """A second ``DroppedId`` for one object."""

    rule = "storage-dropped-id-once"


class ResponseAfterDroppedId(StorageProtocolError):
    """A response naming an object (or its remap collection) after its ``DroppedId``."""

    rule = "storage-nothing-after-dropped-id"


class StatisticsKindMismatch(StorageProtocolError):
    """Sink statistics for an ingestion, or source statistics for a sink."""

    rule = "storage-statistics-kind"


# -- blame: one Local/Remote class per rule, registered with the compute protocol's blamed() ----


def _rules() -> list[type[StorageProtocolError]]:
    found: list[type[StorageProtocolError]] = []
    pending: list[type[StorageProtocolError]] = list(StorageProtocolError.__subclasses__())
    while pending:
        cls = pending.pop()
        if cls.__module__ == __name__:
            found.append(cls)
            pending.extend(cls.__subclasses__())
    return found


for _rule in _rules():
    for _side in (LocalProtocolError, RemoteProtocolError):
        _name = f"{_side.__name__.removesuffix('ProtocolError')}{_rule.__name__}"
        _cls = type(_name, (_rule, _side), {"__module__": __name__, "__doc__": _rule.__doc__})
        globals()[_name] = _cls  # a module attribute, so the error pickles
        _protocol._BLAMED[(_rule, _side)] = _cls
