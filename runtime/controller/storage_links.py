"""The driver's connections to storage replicas: one :class:`~.links.ReplicaLink` per connection.

A storage instance runs on at most one replica (reference section 2.12); the
spec's :class:`~tidegate.spec.storage.StorageController` decides what it is
sent. This module only carries that out, over the storage protocol's
:class:`~tidegate.runtime.transport.Transport`:

* :meth:`StorageLinks.connect` opens a link (numbered: its *generation*, the
  storage counterpart of compute's epoch) and calls the spec's
  ``connect_replica``, whose ``Hello`` and replayed history are queued on it
  (``SendStorageCommand``) and sent once the stream is up;
* a broken stream is reported as a ``failed`` status event and connected
  again on the next generation: ``connect_replica`` again, so the spec
  replays its reduced history (section 2.12: a reconnecting replica resumes
  every ingestion from its resumption frontier and every sink from its
  last compaction);
* every response of the current link's stream goes to the spec's
  ``handle_response``; a response of a link that was closed or replaced is
  dropped (the storage protocol has no epoch, so the driver tells streams
  apart); a response the spec finds illegal (a ``RemoteProtocolError``) ends
  the stream, which is then replaced as if it broke;
* ``DisconnectStorageReplica`` (another replica replaced it) closes its link.

Status events (:class:`~tidegate.spec.compute.ReplicaStatusEvent`, with the
storage instance's id) follow compute's: ``connecting``, ``connected``,
``failed`` (a broken stream, or a refused attempt with its reason),
``rehydrating`` (the next generation) and ``dropped``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias

from tidegate.runtime.transport import Transport
from tidegate.spec.compute import ReplicaStatus, ReplicaStatusEvent
from tidegate.spec.controller import Controller
from tidegate.spec.errors import RemoteProtocolError, StorageReplicaMissing
from tidegate.spec.ids import InstanceId, ReplicaId
from tidegate.spec.storage import (
    DisconnectStorageReplica,
    SendStorageCommand,
    StorageCommand,
    StorageResponse,
)

from .links import Backoff, ReplicaInfo, ReplicaLink

__all__ = ["LinkHost", "StorageLink", "StorageLinks"]

log = logging.getLogger(__name__)

StorageLink: TypeAlias = ReplicaLink[StorageCommand, StorageResponse]
"""A link speaking the storage protocol."""

_Key: TypeAlias = tuple[InstanceId, ReplicaId]


class LinkHost(Protocol):
    """What the links need of the driver that owns them (a
    :class:`~.driver.ControllerDriver`): its controller, its backoff, its task group
    (``start_soon``, ``running``), its effect loop (``apply``) and its status events."""

    @property
    def ctl(self) -> Controller: ...

    @property
    def backoff(self) -> Backoff: ...

    @property
    def running(self) -> bool: ...

    def apply(self) -> None: ...

    def start_soon(self, fn: Callable[..., Any], *args: Any) -> None: ...

    def publish_status(self, event: ReplicaStatusEvent) -> None: ...


@dataclass
class _Replica:
    """What the driver remembers of one storage replica between its connections."""

    location: str
    generation: int = 0
    failures: int = 0
    down_reason: str = ""


class StorageLinks:
    """The storage replicas' links of one :class:`~.driver.ControllerDriver` (see the module docstring).

    ``transport`` speaks the storage protocol; ``address_of(replica)`` resolves
    a storage replica's ``host:port`` on every connection attempt.
    """

    def __init__(
        self,
        driver: LinkHost,
        transport: Transport[StorageCommand, StorageResponse] | None,
        address_of: Callable[[ReplicaId], str] | None,
    ) -> None:
        self.driver = driver
        self.transport = transport
        self.address_of = address_of
        self.links: dict[_Key, StorageLink] = {}
        self._replicas: dict[_Key, _Replica] = {}
        self.commands_sent = 0
        self.responses = 0
        self.responses_by_kind: dict[str, int] = {}
        """Storage responses received, by kind (``StorageFrontierUpper``, ``StatusUpdate``...)."""
        self.commands_by_kind: dict[str, int] = {}
        """Storage commands sent, by kind (``RunIngestion``, ``RunSink``...)."""

    # -- connecting --------------------------------------------------------------------------
    def connect(self, instance: InstanceId, replica: ReplicaId, location: str = "") -> None:
        """Connect ``replica`` as ``instance``'s replica (the spec severs another one).

        Raises the spec's errors (an unknown instance) with nothing changed.
        """
        transport, address_of = self.transport, self.address_of
        if transport is None or address_of is None:
            from .errors import RuntimeControllerError

            raise RuntimeControllerError(
                "this controller driver has no storage transport: it cannot reach storage replicas"
            )
        key = (instance, replica)
        known = self._replicas.get(key)
        entry = _Replica(location) if known is None else known
        entry.location = location
        link: StorageLink = ReplicaLink(instance, replica, entry.generation + 1)
        old = self.links.get(key)
        self.links[key] = link  # the spec's Hello and history are queued on it
        try:
            self.driver.ctl.storage.connect_replica(instance, replica, location)
        except BaseException:
            if old is None:
                del self.links[key]
            else:
                self.links[key] = old
            raise
        if old is not None:
            old.close()
        entry.generation = link.epoch
        self._replicas[key] = entry
        status: ReplicaStatus = "connecting" if link.epoch == 1 else "rehydrating"
        self.driver.publish_status(ReplicaStatusEvent(instance, replica, status, link.epoch))
        self.driver.apply()
        self.driver.start_soon(
            link.run,
            transport,
            address_of,
            self.driver.backoff,
            lambda: entry.failures,
            self._on_connected,
            self._on_response,
            self._on_failed,
            self._on_refused,
        )

    def drop(self, instance: InstanceId, replica: ReplicaId) -> None:
        """Disconnect ``replica`` from ``instance`` for good (the spec's ``drop_replica``)."""
        self.driver.ctl.storage.drop_replica(instance, replica)
        self._close((instance, replica))
        self.driver.apply()

    def _close(self, key: _Key) -> None:
        link = self.links.pop(key, None)
        entry = self._replicas.pop(key, None)
        if link is not None:
            link.close()
            generation = link.epoch
        else:
            generation = entry.generation if entry is not None else 0
        if link is not None or entry is not None:
            self.driver.publish_status(ReplicaStatusEvent(key[0], key[1], "dropped", generation))

    # -- effects -----------------------------------------------------------------------------
    def send(self, e: SendStorageCommand) -> None:
        """Queue ``e``'s command on the current link of its replica (none: it goes nowhere)."""
        link = self.links.get((e.instance, e.replica))
        if link is None:
            return
        link.send(e.command)
        self.commands_sent += 1
        kind = type(e.command).__name__
        self.commands_by_kind[kind] = self.commands_by_kind.get(kind, 0) + 1

    def disconnect(self, e: DisconnectStorageReplica) -> None:
        """Another replica replaced ``e.replica``: close its link (nothing it sends counts now)."""
        self._close((e.instance, e.replica))

    def close_all(self) -> None:
        """Close every link (the driver stops); nothing is reported."""
        for link in list(self.links.values()):
            link.close()

    # -- link callbacks -----------------------------------------------------------------------
    def _current(self, link: StorageLink) -> bool:
        return self.links.get((link.instance, link.replica)) is link

    def _on_connected(self, link: StorageLink) -> None:
        if not self._current(link):
            return
        entry = self._replicas[(link.instance, link.replica)]
        entry.down_reason = ""
        self.driver.publish_status(
            ReplicaStatusEvent(link.instance, link.replica, "connected", link.epoch)
        )

    def _on_refused(self, link: StorageLink, reason: str) -> None:
        if not self._current(link):
            return
        self._replicas[(link.instance, link.replica)].down_reason = reason
        self.driver.publish_status(
            ReplicaStatusEvent(link.instance, link.replica, "failed", link.epoch, reason)
        )

    def _on_response(self, link: StorageLink, response: StorageResponse) -> str | None:
        if not self._current(link):
            return None  # a closed or replaced stream: its answers are not the replica's now
        self.responses += 1
        kind = type(response).__name__
        self.responses_by_kind[kind] = self.responses_by_kind.get(kind, 0) + 1
        self._replicas[(link.instance, link.replica)].failures = 0
        try:
            self.driver.ctl.storage.handle_response(link.instance, link.replica, response)
        except RemoteProtocolError as e:
            # The replica broke a rule: its stream ends and is replaced. Any other error is the
            # controller's own bug and propagates: never blame the replica.
            return f"illegal response {kind}: {type(e).__name__}: {e}"
        except StorageReplicaMissing:
            return None  # the spec dropped it meanwhile; the link is being closed
        self.driver.apply()
        return None

    def _on_failed(self, link: StorageLink, reason: str) -> None:
        key = (link.instance, link.replica)
        if not self._current(link):
            return
        entry = self._replicas[key]
        entry.failures += 1
        entry.down_reason = reason
        log.warning("storage replica %s of %s failed: %s", link.replica, link.instance, reason)
        self.driver.publish_status(
            ReplicaStatusEvent(link.instance, link.replica, "failed", link.epoch, reason)
        )
        if not self.driver.running:
            return  # the driver is stopping
        self.connect(link.instance, link.replica, entry.location)

    # -- inspection ---------------------------------------------------------------------------
    def infos(self) -> list[ReplicaInfo]:
        """Every connected (or connecting) storage replica: its link's state."""
        out = []
        for (instance, replica), link in sorted(self.links.items()):
            entry = self._replicas.get((instance, replica))
            up = link.up
            refused = link.refused and not up
            if up:
                status = "connected"
            elif refused:
                status = "failed"
            else:
                status = "connecting" if link.epoch == 1 else "rehydrating"
            reason = link.last_error or (entry.down_reason if entry is not None else "")
            out.append(
                ReplicaInfo(
                    instance,
                    replica,
                    status,
                    link.epoch,
                    link.address,
                    up,
                    link.attempts,
                    "" if up else reason,
                )
            )
        return out
