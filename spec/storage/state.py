"""The storage controller's per-object state, and the read-only views it hands out.

The mutable records (:class:`CollectionState`, :class:`ExportState`) are
internal: callers get frozen :class:`CollectionView` / :class:`ExportView`
snapshots, so inspecting the controller can never change it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..frontier import Antichain, MutableAntichain, NoPolicy, Time
from ..frontier.read_policy import ReadPolicy, StepBack
from ..ids import GlobalId
from .descriptions import CollectionDescription, ExportDescription

__all__ = ["CollectionState", "CollectionView", "ExportState", "ExportView"]


@dataclass(frozen=True, slots=True)
class CollectionView:
    """A snapshot of one collection's state (reference section 2.2).

    ``since`` is the meet of every hold (the read capabilities' frontier);
    ``implied_capability`` is the collection's own hold, derived from its read
    policy and ``upper``. ``read_capabilities`` lists every ``(time, count)``.
    """

    id: GlobalId
    description: CollectionDescription
    since: Antichain
    upper: Antichain
    implied_capability: Antichain
    read_policy: ReadPolicy
    read_capabilities: tuple[tuple[Time, int], ...]
    dependencies: tuple[GlobalId, ...]
    is_dropped: bool


@dataclass(frozen=True, slots=True)
class ExportView:
    """A snapshot of one export (sink): its hold on ``from_id`` is ``read_capability``."""

    id: GlobalId
    description: ExportDescription
    as_of: Antichain
    strict: bool
    read_capability: Antichain
    upper: Antichain
    read_policy: ReadPolicy


class CollectionState:
    """Mutable state of one collection; only the controller touches it."""

    __slots__ = (
        "dependencies",
        "description",
        "dropped",
        "id",
        "implied",
        "policy",
        "read_capabilities",
        "write_frontier",
    )

    def __init__(
        self,
        id: GlobalId,
        description: CollectionDescription,
        since: Antichain,
        upper: Antichain,
        dependencies: tuple[GlobalId, ...],
    ) -> None:
        self.id = id
        self.description = description
        self.read_capabilities = MutableAntichain(since)
        self.implied = since
        self.policy: ReadPolicy = NoPolicy(since)
        self.write_frontier = upper
        self.dependencies = dependencies
        self.dropped = False

    def view(self) -> CollectionView:
        return CollectionView(
            id=self.id,
            description=self.description,
            since=self.read_capabilities.frontier,
            upper=self.write_frontier,
            implied_capability=self.implied,
            read_policy=self.policy,
            read_capabilities=tuple(self.read_capabilities.updates()),
            dependencies=self.dependencies,
            is_dropped=self.dropped,
        )


class ExportState:
    """Mutable state of one export; only the controller touches it."""

    __slots__ = ("as_of", "description", "id", "read_capability", "strict", "write_frontier")

    policy: ReadPolicy = StepBack()

    def __init__(
        self,
        id: GlobalId,
        description: ExportDescription,
        acquired: Antichain,
        as_of: Antichain,
        strict: bool,
    ) -> None:
        self.id = id
        self.description = description
        self.read_capability = acquired
        self.as_of = as_of
        self.strict = strict
        self.write_frontier = Antichain.bottom(0)

    def view(self) -> ExportView:
        return ExportView(
            id=self.id,
            description=self.description,
            as_of=self.as_of,
            strict=self.strict,
            read_capability=self.read_capability,
            upper=self.write_frontier,
            read_policy=self.policy,
        )
