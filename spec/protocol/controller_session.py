"""The controller's side of one replica connection: what it may send, and what it may receive.

>>> import uuid
>>> from tidegate.spec.protocol import ControllerSession, Hello, InitializationComplete
>>> session = ControllerSession()
>>> session.on_command(Hello(uuid.UUID(int=1)))
<Stage.CREATION: 'creation'>
>>> session.on_command(InitializationComplete())
Traceback (most recent call last):
...
tidegate.spec.errors.protocol.LocalStageViolation: [stage-order] InitializationComplete in stage creation: ...
"""

from __future__ import annotations

import uuid as _uuid
from collections.abc import Mapping
from typing import Any

from ..errors.protocol import LocalProtocolError, ProtocolError, RemoteProtocolError, blamed
from ..ids import GlobalId
from .commands import ComputeCommand
from .ledger import CollectionRecord, ProtocolLedger
from .responses import ComputeResponse
from .stages import Stage
from .types import PeekDescription

__all__ = ["ControllerSession"]


class ControllerSession:
    """Checks a controller's commands on one connection against the protocol, and the replica's answers.

    Call :meth:`on_command` with every command *before* sending it: it raises a
    :class:`~tidegate.spec.errors.ProtocolError` (a ``LocalProtocolError``: the
    controller's own bug) if the command is illegal now
    (wrong stage, unknown or dropped collection, reused export id or peek uuid,
    ...) and otherwise records it and returns the stage that follows. Call
    :meth:`on_response` with every response received: it rejects responses no
    correct replica could send (an answer for an unknown or answered peek, a
    regressing frontier, a gap in a subscribe stream, ...) with a
    ``RemoteProtocolError``: the replica's fault. Responses are
    checked knowing that the replica may not yet have seen the latest
    commands. A ``Hello`` starts a new iteration and forgets the old one.
    A call that raises leaves the session unchanged.
    """

    def __init__(self) -> None:
        self._ledger = ProtocolLedger(exact=False)

    # -- events ---------------------------------------------------------------------

    def check_command(self, cmd: ComputeCommand) -> None:
        """Raise (a :class:`LocalProtocolError`) if ``cmd`` may not be sent now; never changes the session."""
        try:
            self._ledger.check_command(cmd)
        except ProtocolError as e:
            raise blamed(e, LocalProtocolError) from None

    def on_command(self, cmd: ComputeCommand) -> Stage:
        """Validate and record a command about to be sent; return the stage after it."""
        self.check_command(cmd)
        self._ledger.apply_command(cmd)
        return self._ledger.stage

    def check_response(self, resp: ComputeResponse) -> None:
        """Raise (a :class:`RemoteProtocolError`) if no correct replica could send ``resp`` now; never changes the session."""
        try:
            self._ledger.check_response(resp)
        except ProtocolError as e:
            raise blamed(e, RemoteProtocolError) from None

    def on_response(self, resp: ComputeResponse) -> None:
        """Validate and record a response received from the replica."""
        self.check_response(resp)
        self._ledger.apply_response(resp)

    # -- queries --------------------------------------------------------------------

    @property
    def stage(self) -> Stage:
        return self._ledger.stage

    @property
    def nonce(self) -> _uuid.UUID | None:
        """The current iteration's ``Hello`` nonce (``None`` before the first ``Hello``)."""
        return self._ledger.nonce

    @property
    def collections(self) -> Mapping[GlobalId, CollectionRecord]:
        """Every collection created in this iteration (dropped ones included, marked ``dropped``)."""
        return dict(self._ledger.collections)

    def is_live(self, gid: GlobalId) -> bool:
        """Whether ``gid`` was created in this iteration and not dropped."""
        return self._ledger.live(gid)

    @property
    def unanswered_peeks(self) -> Mapping[_uuid.UUID, PeekDescription]:
        """Peeks sent in this iteration that the replica has not answered yet."""
        return {u: r.peek for u, r in sorted(self._ledger.pending_peeks().items())}

    def snapshot(self) -> tuple[Any, ...]:
        """An immutable, comparable image of the session (equal before and after a rejected event)."""
        return self._ledger.snapshot()
