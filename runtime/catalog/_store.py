"""The durable catalog: :class:`Catalog`, the state kept in one Consensus key.

Each :meth:`Catalog.apply` commits a batch of ops as one new version with
compare-and-set, so two controllers on one key cannot both win, and a write
whose answer was lost is recognised when it did land (no op applied twice).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence

from tidegate.spec.frontier import Antichain
from tidegate.spec.ids import GlobalId
from tidegate.spec.shard import Consensus, VersionedData

from ..errors import CatalogConflict
from ._apply import apply_ops
from ._codec import decode_catalog, encode_catalog
from ._entries import CatalogState
from ._ops import CatalogOp
from ._restore import RestorePlan, restore_plan

__all__ = ["DEFAULT_CATALOG_KEY", "Catalog"]

DEFAULT_CATALOG_KEY = "tidegate/catalog"
"""The Consensus key a :class:`Catalog` uses unless told otherwise."""


class Catalog:
    """The catalog state kept in Consensus key ``key``; changed only by :meth:`apply`.

    Not thread-safe; one controller owns it. A second writer on the same key
    makes the loser's :meth:`apply` fail with :class:`CatalogConflict`.
    """

    def __init__(self, consensus: Consensus, *, key: str = DEFAULT_CATALOG_KEY) -> None:
        self._consensus = consensus
        self._key = key
        self._seqno: int | None = None
        self._state = CatalogState()
        self._loaded = False

    @property
    def key(self) -> str:
        return self._key

    @property
    def state(self) -> CatalogState:
        """The state as of the last :meth:`load` or :meth:`apply` (loads on first use)."""
        if not self._loaded:
            self.load()
        return self._state

    @property
    def seqno(self) -> int | None:
        """The durable version the cached state came from (``None``: nothing written yet)."""
        return self._seqno

    def load(self) -> CatalogState:
        """Read the durable state (an empty catalog if none was written)."""
        head = self._consensus.head(self._key)
        state = CatalogState() if head is None else decode_catalog(head.data)
        self._seqno = None if head is None else head.seqno
        self._state, self._loaded = state, True
        return state

    def apply(self, ops: Sequence[CatalogOp]) -> CatalogState:
        """Apply ``ops`` atomically and durably; returns the new state.

        Invalid ops raise their typed error and nothing is written; if another
        writer committed since this catalog's last load or apply, raises
        :class:`CatalogConflict` (nothing applied; :meth:`load` and retry).
        """
        current = self.state
        new = apply_ops(current, ops)
        if not ops:
            return current
        return self._write(new)

    def touch(self) -> CatalogState:
        """Write the current state again as a new version: only the version changes.

        A writer that loaded an earlier version can apply nothing more (its
        next :meth:`apply` raises :class:`CatalogConflict`): a promoted
        environment fences the old writer's DDL this way. Raises
        :class:`CatalogConflict` if another writer committed since this
        catalog's last load or apply (nothing written; :meth:`load` and retry).
        """
        return self._write(self.state)

    def _write(self, new: CatalogState) -> CatalogState:
        """Commit ``new`` as the version after the cached one (compare-and-set)."""
        data = encode_catalog(new)
        seqno = 0 if self._seqno is None else self._seqno + 1
        try:
            ok = self._consensus.compare_and_set(self._key, self._seqno, VersionedData(seqno, data))
        except Exception:
            # The outcome is unknown: look. If the store cannot say either, the error stands
            # (nothing changed here) and a retry finds out (below).
            if not self._landed(seqno, data):
                raise
            ok = True
        # Not applied now, but an earlier attempt whose answer was lost may have landed it.
        if not ok and not self._landed(seqno, data):
            head = self._consensus.head(self._key)
            raise CatalogConflict(self._key, self._seqno, None if head is None else head.seqno)
        self._seqno, self._state = seqno, new
        with contextlib.suppress(Exception):  # housekeeping only: history is not needed
            self._consensus.truncate(self._key, seqno)
        return new

    def _landed(self, seqno: int, data: bytes) -> bool:
        """Whether version ``seqno`` with ``data`` is durable (a write whose answer was lost)."""
        head = self._consensus.head(self._key)
        return head is not None and head.seqno == seqno and head.data == data

    def restore_plan(
        self,
        frontiers: Mapping[GlobalId, tuple[Antichain, Antichain]] | None = None,
        *,
        current_time: int | None = None,
        read_only: bool = False,
    ) -> RestorePlan:
        """:func:`restore_plan` of the current state."""
        return restore_plan(self.state, frontiers, current_time=current_time, read_only=read_only)
