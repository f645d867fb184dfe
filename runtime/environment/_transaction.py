"""DDL transactions: several catalog changes staged, then made durable as one, then installed.

A script of several DDL statements runs as one implicit transaction (as a
DDL-only transaction block does in Materialize): :meth:`DdlTransaction.open`
holds the DDL lock, and while it is open the catalog changes of its task are
staged in memory (:class:`~._core.Staging`: validated as they are made, seen by
that task only, installed nowhere). If a statement fails, everything staged is
discarded (the values of secrets it created are removed): nothing changed. At
the end the staged ops are written as one catalog version (one
compare-and-set: all of them or none, a crash included), and then the
controller is brought from the catalog as it was to the catalog as it is, the
way a read-only environment follows the writer's
(:meth:`~._promotion.Promotion.catch_up`): dropped objects uninstalled,
new ones created in dependency order, changed read policies set; then what
lies outside the controller follows (dropped sources' replication slots and
secrets' values, the storage replica for new sources and sinks).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import anyio

from ..catalog import CatalogState, SecretEntry
from ..controller.errors import RuntimeControllerError
from ..errors import ReadOnlyEnvironment
from ._core import Core, Staging, _current_task
from ._promotion import Promotion
from ._sources import SourcesAndSinks, kept_secrets, storage_wanted

__all__ = ["DdlTransaction"]


class DdlTransaction:
    """DDL transactions of one environment (see the module docstring)."""

    def __init__(self, core: Core, sources: SourcesAndSinks, promotion: Promotion) -> None:
        self.core = core
        self.sources = sources
        self.promotion = promotion

    @contextlib.asynccontextmanager
    async def open(self) -> AsyncIterator[None]:
        """Stage the catalog changes made in the body; make them durable as one when it ends,
        or discard them if it raises [ReadOnlyEnvironment, and the commit's errors]."""
        core = self.core
        async with core.lock:
            if core.read_only:
                raise ReadOnlyEnvironment("a DDL transaction")
            if core.staging is not None:
                raise RuntimeControllerError("a DDL transaction is open already")
            before = core.state
            staging = Staging(_current_task(), before)
            core.staging = staging
            try:
                yield
            except BaseException:
                core.staging = None
                with anyio.CancelScope(shield=True):
                    await self._forget(staging)
                raise
            core.staging = None
            if not staging.ops and not staging.values:
                return
            with anyio.CancelScope(shield=True):  # once it commits, it is carried out whole
                await self._commit(staging, before)

    async def _commit(self, staging: Staging, before: CatalogState) -> None:
        """Make the staged ops durable as one catalog version, then install them."""
        core = self.core
        try:
            after = await core.apply(staging.ops) if staging.ops else before
        except BaseException:
            await self._forget(staging)
            raise
        for gid, value in staging.values.items():
            await core.platform.run_blocking(core.secrets.put, gid, value)
        await self._install(before, after)

    async def _forget(self, staging: Staging) -> None:
        """Remove the values of the secrets a failed transaction created."""
        for gid in staging.secrets:
            await self.core.platform.run_blocking(self.core.secrets.delete, gid)

    async def _install(self, before: CatalogState, after: CatalogState) -> None:
        """Bring the controller, and what lies outside it, from ``before`` to ``after``."""
        await self.promotion.catch_up(before, after)
        old = {e.id: e for e in (*before.entries(), *before.views, *before.sinks, *before.secrets)}
        new = {e.id for e in (*after.entries(), *after.views, *after.sinks, *after.secrets)}
        gone = [old[g] for g in sorted(set(old) - new, reverse=True)]
        self.sources.drop_replication_slots(after, before)
        kept = kept_secrets(after)  # a recorded slot's: dropped with it, later
        for entry in gone:
            if isinstance(entry, SecretEntry) and entry.id not in kept:
                await self.core.platform.run_blocking(self.core.secrets.delete, entry.id)
        if storage_wanted(after):
            await self.sources.connect_storage_replica(after)
