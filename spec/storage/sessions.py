"""The two sides of a storage instance connection: what each may send, and what it may receive.

:class:`StorageControllerSession` is the controller's side: it checks every
command before it is sent (a violation is the controller's own bug:
:class:`~tidegate.spec.errors.LocalProtocolError`) and every response received
(a violation is the replica's: :class:`~tidegate.spec.errors.RemoteProtocolError`,
drop the connection). :class:`StorageReplicaSession` is the mirror image, with
exact knowledge of the commands. Both leave their state unchanged when they raise.

>>> import uuid
>>> from tidegate.spec.storage import StorageControllerSession, StorageHello, StorageAllowWrites
>>> s = StorageControllerSession()
>>> s.on_command(StorageHello(uuid.UUID(int=1)))
<StorageStage.INITIALIZATION: 'initialization'>
>>> s.on_command(StorageAllowWrites())
<StorageStage.INITIALIZATION: 'initialization'>
>>> s.on_command(StorageAllowWrites())
Traceback (most recent call last):
...
tidegate.spec.errors.storage_protocol.LocalDuplicateStorageAllowWrites: [storage-allow-writes-once] AllowWrites was already sent in this iteration
"""

from __future__ import annotations

import uuid as _uuid
from collections.abc import Mapping
from typing import Any

from ..errors.protocol import LocalProtocolError, ProtocolError, RemoteProtocolError, blamed
from ..frontier import Antichain
from ..ids import GlobalId
from .commands import StorageCommand, StorageResponse
from .ledger import StorageObjectRecord, StorageProtocolLedger
from .stages import StorageStage

__all__ = ["StorageControllerSession", "StorageReplicaSession"]


class _Session:
    """What both sides share: a ledger, and the side each kind of message is blamed on."""

    _command_side: type[LocalProtocolError] | type[RemoteProtocolError]
    _response_side: type[LocalProtocolError] | type[RemoteProtocolError]

    def __init__(self, *, exact: bool) -> None:
        self._ledger = StorageProtocolLedger(exact=exact)

    def check_command(self, cmd: StorageCommand) -> None:
        """Raise if ``cmd`` may not be sent now; never changes the session."""
        try:
            self._ledger.check_command(cmd)
        except ProtocolError as e:
            raise blamed(e, self._command_side) from None

    def on_command(self, cmd: StorageCommand) -> StorageStage:
        """Validate and record a command; return the stage after it."""
        self.check_command(cmd)
        self._ledger.apply_command(cmd)
        return self._ledger.stage

    def check_response(self, resp: StorageResponse) -> None:
        """Raise if ``resp`` may not be sent now; never changes the session."""
        try:
            self._ledger.check_response(resp)
        except ProtocolError as e:
            raise blamed(e, self._response_side) from None

    def on_response(self, resp: StorageResponse) -> None:
        """Validate and record a response."""
        self.check_response(resp)
        self._ledger.apply_response(resp)

    # -- queries --------------------------------------------------------------------

    @property
    def stage(self) -> StorageStage:
        return self._ledger.stage

    @property
    def nonce(self) -> _uuid.UUID | None:
        """The current iteration's ``Hello`` nonce (``None`` before the first ``Hello``)."""
        return self._ledger.nonce

    @property
    def writes_allowed(self) -> bool:
        """Whether ``AllowWrites`` was sent in this iteration."""
        return self._ledger.read_write

    @property
    def objects(self) -> Mapping[GlobalId, StorageObjectRecord]:
        """Every ingestion and sink run in this iteration (dropped ones included)."""
        return dict(self._ledger.objects)

    def object(self, id: GlobalId) -> StorageObjectRecord | None:
        return self._ledger.objects.get(id)

    def is_live(self, id: GlobalId) -> bool:
        """Whether ``id`` was run in this iteration and not compacted to ``[]``."""
        return self._ledger.live(id)

    def last_reported(self, id: GlobalId) -> Antichain | None:
        """The last ``FrontierUpper`` for ``id`` in this iteration (``None`` if none)."""
        return self._ledger.reported.get(id)

    def owes_dropped_id(self) -> tuple[GlobalId, ...]:
        """Objects compacted to ``[]`` that have not answered ``DroppedId`` yet."""
        return self._ledger.owes_dropped_id()

    def snapshot(self) -> tuple[Any, ...]:
        """An immutable, comparable image of the session (equal before and after a rejected event)."""
        return self._ledger.snapshot()


class StorageControllerSession(_Session):
    """The controller's side of one storage replica connection (see the module docstring).

    Responses are checked knowing that the replica may not yet have seen the
    latest commands. A ``Hello`` starts a new iteration and forgets the old one.
    """

    _command_side = LocalProtocolError
    _response_side = RemoteProtocolError

    def __init__(self) -> None:
        super().__init__(exact=False)


class StorageReplicaSession(_Session):
    """The replica's side of one connection: commands are checked as the controller's
    (blamed on it), responses as its own (blamed on itself)."""

    _command_side = RemoteProtocolError
    _response_side = LocalProtocolError

    def __init__(self) -> None:
        super().__init__(exact=True)
