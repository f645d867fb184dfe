"""What each replica reported, read off the simulated network: the reference for hydration.

:class:`ReplicaProgress` watches every compute connection (the endpoints'
``observe`` hook): each replica's current session starts at the ``Hello`` it
received, holds the as_of of every dataflow it was told to build on it
(``CreateDataflow``) and the last write and output frontiers it reported for
each (``Frontiers``). From that trace alone, not from the controller's
bookkeeping, the checkers decide:

* ``hydrated(replica, id)`` -- on its current connection the replica reported
  an output frontier beyond the as_of it was given for ``id`` (Materialize's
  definition of hydration), or there is nothing to compute: the as_of is ``[]``,
  or the controller allowed ``id`` to compact to ``[]`` (a complete write-only
  dataflow) before the connection, or the materialized view's shard is complete on
  the disk (its upper is ``[]``: an earlier incarnation's replicas wrote all of it,
  so the as_of of a new one is ``[]``, which Materialize counts as hydrated), so the
  replica was given no dataflow for it;
* ``write(replica, id)`` -- the write frontier it last reported for ``id``;
* ``answered_by(id, after_ms, before_ms)`` -- which replicas answered (``PeekRows``)
  a ``Peek`` of ``id`` that reached them no earlier than ``after_ms``, by
  ``before_ms``: the replicas that may have answered a client's peek of ``id``
  issued and answered in that window (the checkers know which cluster each
  replica belongs to from the world's own record).

Frontiers are ints here (the simulator's timestamps); ``None`` is the empty
frontier, beyond every time.
"""

from __future__ import annotations

import uuid as _uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tidegate.spec.frontier import Antichain
from tidegate.spec.ids import GlobalId
from tidegate.spec.protocol.commands import AllowCompaction, CreateDataflow, Hello, Peek
from tidegate.spec.protocol.responses import Frontiers, PeekResponse, PeekRows

__all__ = ["ReplicaProgress", "beyond", "time_of"]

_UNSEEN = -1


def time_of(f: Antichain) -> int | None:
    """A single-int frontier as its int; ``None`` for ``[]``."""
    return int(f.elements[0]) if f.elements else None


def beyond(a: int | None, b: int | None) -> bool:
    """Whether frontier ``a`` is strictly beyond frontier ``b`` (``None``: the empty frontier)."""
    if a is None:
        return b is not None
    return b is not None and a > b


@dataclass
class _Session:
    as_of: dict[GlobalId, int | None] = field(default_factory=dict)
    write: dict[GlobalId, int | None] = field(default_factory=dict)
    output: dict[GlobalId, int | None] = field(default_factory=dict)


@dataclass
class _PeekSeen:
    """One ``Peek`` on the wire: what it reads, when it first reached a replica, and which
    replicas answered it with rows (and when)."""

    id: GlobalId
    sent_ms: int
    answers: list[tuple[str, int]] = field(default_factory=list)


class ReplicaProgress:
    """Each replica's current session, as the network saw it (see the module docstring)."""

    def __init__(self, clock: Callable[[], int] = lambda: 0) -> None:
        self.sessions: dict[str, _Session] = {}
        self.released: set[GlobalId] = set()
        """Collections some replica was told to compact to ``[]``: nothing is left to compute."""
        self._clock = clock
        self._peeks: dict[_uuid.UUID, _PeekSeen] = {}
        self._peeks_of: dict[GlobalId, list[_PeekSeen]] = {}

    def observe(self, direction: str, replica: str, message: Any) -> None:
        """A command delivered to (``cmd``) or a response sent by (``resp``) ``replica``."""
        kind = type(message)
        if kind is Frontiers:
            s = self.sessions.get(replica)
            if s is not None:
                if message.write is not None:
                    s.write[message.id] = time_of(message.write)
                if message.output is not None:
                    s.output[message.id] = time_of(message.output)
        elif kind is CreateDataflow:
            s = self.sessions.get(replica)
            as_of = message.dataflow.as_of
            if s is not None and as_of is not None:
                for id in message.dataflow.export_ids:
                    s.as_of[id] = time_of(as_of)
                    s.output.pop(id, None)
                    s.write.pop(id, None)
        elif kind is AllowCompaction:
            if not message.frontier.elements:
                self.released.add(message.id)
        elif kind is Hello and direction == "cmd":
            self.sessions[replica] = _Session()
        elif kind is Peek:
            if message.uuid not in self._peeks:
                seen = _PeekSeen(message.peek.id, self._clock())
                self._peeks[message.uuid] = seen
                self._peeks_of.setdefault(seen.id, []).append(seen)
        elif kind is PeekResponse and type(message.result) is PeekRows:
            found = self._peeks.get(message.uuid)
            if found is not None:
                found.answers.append((replica, self._clock()))

    def answered_by(self, id: GlobalId, after_ms: int, before_ms: int) -> set[str]:
        """The replicas that answered, with rows, by ``before_ms`` a ``Peek`` of ``id`` that first
        reached a replica at ``after_ms`` or later."""
        return {
            r
            for seen in self._peeks_of.get(id, ())
            if seen.sent_ms >= after_ms
            for r, at in seen.answers
            if at <= before_ms
        }

    def hydrated(self, replica: str, id: GlobalId, *, written: bool = False) -> bool:
        """Whether ``replica`` reported an output frontier beyond ``id``'s as_of on this session;
        ``written``: the caller saw ``id``'s shard complete on the disk (its upper ``[]``), so a
        session that was given no dataflow for it has nothing to compute."""
        s = self.sessions.get(replica)
        if s is None:
            return False
        if id not in s.as_of:
            return id in self.released or written
        as_of = s.as_of[id]
        return as_of is None or beyond(s.output.get(id, _UNSEEN), as_of)

    def write(self, replica: str, id: GlobalId, *, written: bool = False) -> int | None:
        """The write frontier ``replica`` last reported for ``id`` on this session (-1: none);
        ``written`` as for :meth:`hydrated`. A dataflow whose frontier never moved is at the
        as_of it was given (a dataflow over a source that ceased before its first batch)."""
        s = self.sessions.get(replica)
        if s is None:
            return _UNSEEN
        if id not in s.as_of and (id in self.released or written):
            return None  # nothing left to compute: complete
        if id in s.write:
            return s.write[id]
        as_of = s.as_of.get(id)
        return _UNSEEN if as_of is None else as_of
