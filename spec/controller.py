"""The composed controller: compute with a live connection to storage (seed 000).

:class:`Controller` owns a :class:`~tidegate.spec.storage.StorageController`
and a :class:`~tidegate.spec.compute.ComputeController` wired to it:

* compute's read holds on storage collections (dataflow inputs, replica
  input holds, persist peeks) are storage read capabilities, so storage never
  compacts what a dataflow or replica still reads;
* storage write frontiers flow into compute scheduling: a dataflow waiting
  for its storage inputs is scheduled as soon as their uppers pass its as_of.

**One way to call it.** An operation of one layer is called on that layer,
``ctl.compute.create_dataflow(...)`` or ``ctl.storage.append(...)``, and its
effects are then taken with :meth:`Controller.drain`, which settles both
layers: it takes compute's effects, then storage's, in the order they arose,
and routes storage's new uppers to compute as explicit events
(:class:`~tidegate.spec.storage.UpperChanged`) until nothing changes. This
class wraps no single-layer operation, so a new operation is added to the
layer that owns its state and nowhere else; it has methods of its own only for
what spans both layers (:meth:`Controller.read_write`,
:meth:`Controller.initialization_complete`, :attr:`Controller.read_only`).
Compute's holds on storage collections go through the synchronous
:class:`~tidegate.spec.compute.StoragePort`, because a hold must be checked
against the since in the same step that takes it. ``runtime/`` drives this one
object (its driver drains after every call), and ``sim/`` runs the runtime.

>>> from tidegate.spec.controller import Controller
>>> from tidegate.spec.storage import CollectionDescription, Table
>>> from tidegate.spec.ids import GlobalId
>>> ctl = Controller()
>>> ctl.storage.create_collections([(GlobalId.user(1), CollectionDescription(Table()))])
>>> [type(e).__name__ for e in ctl.drain()]
['RegisterShard']
>>> ctl.storage.storage_frontiers(GlobalId.user(1))
(Antichain([0]), Antichain([0]))
"""

from __future__ import annotations

from typing import TypeAlias

from .compute import (
    ComputeController,
    Effect,
    UuidFactory,
)
from .outbox import Outbox
from .storage import (
    StorageController,
    StorageEffect,
    UpperChanged,
)

__all__ = ["Controller", "ControllerEffect"]

ControllerEffect: TypeAlias = Effect | StorageEffect
"""An effect of either layer."""


class Controller:
    """Compute and storage controllers, connected (see the module docstring).

    Operations are called on ``compute`` and ``storage``; :meth:`drain` takes
    their effects, routing storage's new uppers to compute first
    (``check_protocol`` is passed to the compute controller, and to the
    storage controller built when none is given).
    """

    def __init__(
        self,
        storage: StorageController | None = None,
        uuid_factory: UuidFactory | None = None,
        *,
        check_protocol: bool = False,
        read_only: bool = False,
    ) -> None:
        self.storage = (
            storage
            if storage is not None
            else StorageController(read_only=read_only, check_protocol=check_protocol)
        )
        self.compute = ComputeController(
            self.storage, uuid_factory, check_protocol=check_protocol, read_only=read_only
        )
        self._outbox: Outbox[ControllerEffect] = Outbox()

    # -- plumbing ------------------------------------------------------------------------
    def _settle(self) -> None:
        """Take both layers' effects, compute's first; storage's new uppers go to compute as events.

        Runs after every call, so the composed outbox holds each call's
        effects in the order they arose, and a dataflow waiting on a storage
        upper is scheduled in the same call that advanced it.
        """
        while fresh := [*self.compute.drain(), *self.storage.drain()]:
            self._outbox.extend(fresh)
            advanced = [e.id for e in fresh if isinstance(e, UpperChanged)]
            if advanced:
                self.compute.storage_frontiers_advanced(advanced)

    def drain(self) -> list[ControllerEffect]:
        """The effects of every call since the last drain (both layers), in the order they arose.

        Calls made on ``compute`` or ``storage`` directly are settled here too,
        so an operation of either layer needs no wrapper on this class.
        """
        self._settle()
        return self._outbox.drain()

    # -- lifecycle -------------------------------------------------------------------------
    @property
    def read_only(self) -> bool:
        """Read-only mode (seed 001): no ``AllowWrites``, no table appends, no shard dropped."""
        return self.compute.read_only

    def set_epoch(self, epoch: int) -> None:
        """The controller's writer epoch (the durable oracle's incarnation): every replica's
        ``Hello`` brings it, and a replica refuses a controller of a lower epoch than one it has
        served. Raising it rehydrates every compute replica on a new connection (a promotion);
        the storage replica's next connection brings it."""
        self.storage.set_epoch(epoch)
        self.compute.set_epoch(epoch)
        self._settle()

    def read_write(self) -> None:
        """Leave read-only mode: appends are accepted and every MV allowed to write gets
        ``AllowWrites`` once. The caller fences out the controller that wrote until now."""
        self.storage.read_write()
        self.compute.read_write()
        self._settle()

    def initialization_complete(self) -> None:
        """Both layers leave their initialization stage."""
        self.storage.initialization_complete()
        self.compute.initialization_complete()
        self._settle()
