"""Typed errors of the runtime: environment options and modes, timestamp oracle, catalog, orchestrator.

Everything derives from :class:`tidegate.spec.errors.TidegateError`. A call
that raises one of these leaves the object it was called on unchanged.
"""

from __future__ import annotations

from tidegate.spec.errors import TidegateError

__all__ = [
    "AppendOutcomeUnknown",
    "CatalogConflict",
    "CatalogDecodeError",
    "CatalogError",
    "CatalogMissing",
    "ClusterNotEmpty",
    "DuplicateCatalogId",
    "DuplicateCatalogName",
    "EnvironmentFenced",
    "HasDependents",
    "InvalidCatalogOp",
    "InvalidEnvironmentOptions",
    "InvalidRequestId",
    "ManagedClusterChange",
    "OracleError",
    "OracleFenced",
    "OrchestratorError",
    "ReadOnlyEnvironment",
    "ReplicaStartFailed",
    "SecretMissing",
    "SecretsUnavailable",
    "UnknownCatalogObject",
    "UnknownManagedReplica",
    "WrongCluster",
]


# -- environment options -----------------------------------------------------------------------


class InvalidEnvironmentOptions(TidegateError, ValueError):
    """An option of :class:`~tidegate.runtime.options.EnvironmentOptions` has a bad value.

    Raised when the options are built, before anything is opened; ``option``
    names the offending field.
    """

    def __init__(self, option: str, message: str) -> None:
        self.option = option
        super().__init__(f"{option}: {message}")


class ReadOnlyEnvironment(TidegateError):
    """A write asked of an environment opened with ``read_only=True`` (before its promotion).

    A read-only environment writes nothing: no catalog change, no table
    append, no oracle timestamp. Promote it (:meth:`Environment.promote`) to write.
    """

    def __init__(self, what: str) -> None:
        self.what = what
        super().__init__(f"{what}: the environment is read-only (promote it to write)")


class EnvironmentFenced(TidegateError):
    """Another environment took over writing this environment's data: this one may write no more.

    Raised by every write (append, DDL) of an environment once a newer one
    opened read-write or was promoted on the same data (its writer epoch,
    the timestamp oracle's epoch, is ``found_epoch``). A definite refusal: the
    write it answers did not take effect. (A write that may have landed before
    the environment found out is answered :class:`AppendOutcomeUnknown`.)
    Nothing this environment writes from then on is acknowledged: close it.
    """

    def __init__(self, epoch: int, found_epoch: int | None) -> None:
        self.epoch, self.found_epoch = epoch, found_epoch
        super().__init__(
            f"this environment (writer epoch {epoch}) is fenced: an environment with writer "
            f"epoch {found_epoch} took over its data; this write was not applied: close this one"
        )


class AppendOutcomeUnknown(TidegateError):
    """An append whose outcome the environment cannot tell: it may or may not be durable.

    The write reached storage (in part or in whole) but cannot be acknowledged:
    a newer environment took over meanwhile (``cause`` is its
    :class:`EnvironmentFenced`), or, for an append to several tables, some
    tables' writes landed and others lost a race with another writer. The
    newer environment may show it or not; reading there tells which. Unlike a
    refusal, retrying it blindly may apply it twice (FoundationDB's
    ``commit_unknown_result``): retry it with the same request id
    (``append(..., request_id=...)``), which answers the original outcome and
    never applies it twice.
    """

    def __init__(self, reason: str, cause: TidegateError | None = None) -> None:
        self.reason, self.cause = reason, cause
        super().__init__(f"the outcome of this append is unknown: {reason}")


class InvalidRequestId(TidegateError, ValueError):
    """A client request id that is not 1 to 255 bytes of Unicode text without control characters."""


# -- secrets -----------------------------------------------------------------------------------


class SecretsUnavailable(TidegateError):
    """Secrets need a data directory to be kept in (an environment opened on URLs alone has none)."""


class SecretMissing(TidegateError):
    """A secret the catalog records has no value in the secret store (its file at ``path`` is
    gone): create it again (``ALTER SECRET name AS '...'``)."""

    def __init__(self, name: str, path: str) -> None:
        super().__init__(
            f"secret {name!r} has no value (its file {path} is missing): set it again with "
            f"ALTER SECRET {name} AS '...'"
        )
        self.name = name
        self.path = path


# -- timestamp oracle -------------------------------------------------------------------------


class OracleError(TidegateError):
    """The timestamp oracle could not hand out or record a timestamp."""


class OracleFenced(OracleError):
    """Another oracle wrote the durable state since this one last did (it lost a race).

    The fenced oracle hands out nothing more; open a new one to continue.
    """

    def __init__(self, key: str, expected_seqno: int | None, found_seqno: int | None) -> None:
        self.key = key
        self.expected_seqno = expected_seqno
        self.found_seqno = found_seqno
        super().__init__(
            f"timestamp oracle {key!r} is fenced: expected durable version {expected_seqno}, "
            f"found {found_seqno} (another oracle took over)"
        )


# -- durable catalog ----------------------------------------------------------------------------


class CatalogError(TidegateError):
    """A catalog operation was refused or the durable catalog is unreadable."""


class InvalidCatalogOp(CatalogError, ValueError):
    """A catalog operation is malformed (bad name, bad plan, bad replica settings...)."""


class DuplicateCatalogName(CatalogError):
    """An object or replica with this name already exists."""

    def __init__(self, name: str, kind: str) -> None:
        self.name, self.kind = name, kind
        super().__init__(f"a {kind} named {name!r} already exists in the catalog")


class DuplicateCatalogId(CatalogError):
    """The id is in use, or was used before (ids are never reused)."""


class UnknownCatalogObject(CatalogError, KeyError):
    """No object (or replica) with this id or name is in the catalog."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown catalog object"


class HasDependents(CatalogError):
    """Dropping this object would leave others reading it (drop them first, or cascade)."""

    def __init__(self, id: object, dependents: tuple[object, ...]) -> None:
        self.id, self.dependents = id, dependents
        names = ", ".join(str(d) for d in dependents)
        super().__init__(f"cannot drop {id}: {names} depend(s) on it (use cascade=True)")


class ClusterNotEmpty(HasDependents):
    """Dropping a cluster that maintains indexes or materialized views (drop them first, or
    cascade): Materialize's ``cannot drop cluster with active objects``."""

    def __init__(
        self, cluster: str, objects: tuple[object, ...], names: tuple[str, ...] = ()
    ) -> None:
        shown = names or tuple(str(o) for o in objects)
        CatalogError.__init__(
            self,
            f"cannot drop cluster {cluster!r}: it maintains {', '.join(shown)} "
            "(use cascade=True to drop them too)",
        )
        self.id, self.dependents = cluster, objects
        self.cluster = cluster


class ManagedClusterChange(InvalidCatalogOp):
    """A replica created or dropped by hand in a managed cluster, whose replicas the environment
    keeps (Materialize's ``cannot modify managed cluster``): alter its size or replication
    factor instead."""

    def __init__(self, cluster: str) -> None:
        self.cluster = cluster
        super().__init__(
            f"cannot modify managed cluster {cluster}: change its SIZE or REPLICATION FACTOR"
        )


class WrongCluster(CatalogError):
    """An index read from a cluster other than the one that maintains it: an index is readable
    only in its own cluster (a materialized view from any, through storage)."""

    def __init__(self, index: str, cluster: str, asked: str) -> None:
        self.index, self.cluster, self.asked = index, cluster, asked
        super().__init__(
            f"index {index!r} is maintained by cluster {cluster!r}: it cannot be read in cluster "
            f"{asked!r} (read it in {cluster!r}, or read what it indexes)"
        )


class CatalogDecodeError(CatalogError, ValueError):
    """The durable catalog's bytes are not a catalog this version can read."""


class CatalogMissing(CatalogError):
    """The catalog record is missing, but the store holds data: refusing to start.

    Opening would start an empty environment, which would take every shard it
    does not know for garbage. ``key`` is the Consensus key the catalog was
    looked for under; ``shards`` the collections whose shards were found;
    ``blobs`` how many blobs the Blob store holds (data whose shards' records
    are gone too, as when the Consensus store itself was lost). To proceed:
    restore the catalog record (the Consensus store, ``consensus.db`` by
    default, from a backup), or open the right data directory or URLs; to
    start afresh on purpose, move the data away first.
    """

    def __init__(self, key: str, shards: list[str], blobs: int = 0) -> None:
        shown = ", ".join(shards[:8]) + (f" and {len(shards) - 8} more" if len(shards) > 8 else "")
        found = (
            f"the shards of {len(shards)} collection(s) ({shown})"
            if shards
            else f"{blobs} blob(s) of shards whose records are gone too"
        )
        super().__init__(
            f"the catalog record {key!r} is missing, but the store holds {found}: refusing to "
            "start (an empty environment would take them for garbage). Restore the catalog "
            "from a backup of the consensus store, or open the right data directory; to start "
            "afresh, move the data away first"
        )
        self.key = key
        self.shards = tuple(shards)
        self.blobs = blobs


class CatalogConflict(CatalogError):
    """Another writer changed the durable catalog since it was loaded; nothing was applied."""

    def __init__(self, key: str, expected_seqno: int | None, found_seqno: int | None) -> None:
        self.key = key
        self.expected_seqno = expected_seqno
        self.found_seqno = found_seqno
        super().__init__(
            f"catalog {key!r} changed concurrently: expected version {expected_seqno}, "
            f"found {found_seqno}; reload and retry"
        )


# -- orchestrator --------------------------------------------------------------------------------


class OrchestratorError(TidegateError):
    """The orchestrator could not start, stop or find a replica process."""


class UnknownManagedReplica(OrchestratorError, KeyError):
    """The orchestrator manages no replica of this name."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown replica"


class ReplicaStartFailed(OrchestratorError):
    """A replica process exited or timed out before printing its ready line."""

    def __init__(self, name: str, reason: str, log_path: str | None = None) -> None:
        self.name, self.reason, self.log_path = name, reason, log_path
        where = f" (see {log_path})" if log_path else ""
        super().__init__(f"replica {name!r} failed to start: {reason}{where}")
