"""How to open an environment: :class:`EnvironmentOptions`, one frozen, validated value.

:meth:`~tidegate.runtime.environment.Environment.open` takes its options as
keywords (``Environment.open("data", replicas=2)``) or as a value built once
and reused (``Environment.open("data", options)``, keywords then override
fields of it). Either way they become an :class:`EnvironmentOptions`, checked
when it is built: a bad value is an
:class:`~tidegate.runtime.errors.InvalidEnvironmentOptions` naming the option,
raised before anything is opened. Like h2's ``H2Configuration``, one object
carries the settings through every layer, instead of a long list of keyword
arguments repeated at each.

:class:`EnvironmentOverrides` is the same fields as a ``TypedDict``, so that
keyword calls stay type-checked; a test keeps the two in step.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, TypeAlias, TypedDict

from .catalog import EXECUTORS
from .defaults import DATA_DIR_ENV, DEFAULT_DATA_DIR, default_data_dir
from .errors import InvalidEnvironmentOptions
from .platform import REAL, Platform
from .sizes import BUILTIN_SIZES, ReplicaSize

if TYPE_CHECKING:  # annotations only: these load grpc or the orchestrator's subprocess machinery
    from tidegate.spec.shard import Blob, CompactionPolicy, Consensus
    from tidegate.spec.storage import StorageCommand, StorageResponse

    from .controller.timestamps import Oracle
    from .orchestrator import Orchestrator, TlsFiles
    from .transport import Transport
    from .transport.grpc_client import ClientTls

__all__ = [
    "DATA_DIR_ENV",
    "DEFAULT_DATA_DIR",
    "EnvironmentOptions",
    "EnvironmentOverrides",
    "ReplicaSpec",
    "Replicas",
    "default_data_dir",
]


@dataclass(frozen=True, slots=True)
class ReplicaSpec:
    """A replica: ``address`` set = unmanaged (connect there), else managed by the orchestrator
    (allocated as ``size`` says, a name of the environment's sizes: :mod:`~tidegate.runtime.sizes`)."""

    name: str
    address: str | None = None
    spark_master: str | None = None
    executor: str | None = None
    size: str | None = None


Replicas: TypeAlias = int | Mapping[str, str] | Sequence[ReplicaSpec]
"""``n`` managed replicas ``r1..rn``, ``{name: "host:port"}`` unmanaged ones, or explicit specs."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvironmentOptions:
    """Everything :meth:`Environment.open` can be told besides the data directory.

    Every field has the default ``Environment.open`` always had, so
    ``EnvironmentOptions()`` is the common case. Build one with keywords and
    derive variants with :meth:`replace`; both validate.
    """

    blob_url: str | None = None
    """Where batches are stored (``file://``, ``s3://``, ``mem://``); default: in the data dir."""
    consensus_url: str | None = None
    """Where shard state is versioned (``sqlite://``, ``postgres://``); default: in the data dir."""
    replicas: Replicas | None = None
    """The replicas to run (see :data:`Replicas`). ``None`` runs those the catalog records (one
    managed ``r1`` in a catalog that records none); given, it replaces the catalog's record."""
    spark_master: str = "local[1]"
    """The Spark master of managed replicas that do not name their own."""
    executor: str = "spark"
    """The executor of managed replicas that do not name their own (``spark`` or ``python``)."""
    token: str | None = None
    """The bearer token replicas require (passed to managed ones and sent by the transport)."""
    tls: ClientTls | None = None
    """TLS of the default gRPC transport (``None``: plaintext)."""
    replica_tls: TlsFiles | None = None
    """Certificate and key the default orchestrator gives managed replicas (``None``: plaintext)."""
    transport: Transport | None = None
    """How to reach replicas; default: gRPC with ``token`` and ``tls``."""
    tick_ms: int | None = 1000
    """Period of the empty group commit that moves table uppers without data (``None``: never)."""
    maintain_ms: int | None = 1000
    """Period of the controller's maintenance (compaction, history reduction; ``None``: never)."""
    poll_ms: int | None = 100
    """Period of the poll of materialized views' shard uppers (``None``: never)."""
    oracle: Oracle | None = None
    """The timestamp oracle; default: the durable one in Consensus."""
    orchestrator: Orchestrator | None = None
    """Runs managed replicas; default: an :class:`~tidegate.runtime.orchestrator.Orchestrator`
    in the data dir with ``executor``, ``spark_master``, ``token`` and ``replica_tls``."""
    blob: Blob | None = None
    """The Blob store as an object (instead of ``blob_url``)."""
    consensus: Consensus | None = None
    """The Consensus store as an object (instead of ``consensus_url``)."""
    shard_policy: CompactionPolicy | None = None
    """How the controller's shard store keeps shards compact after appends (automatic
    maintenance: see ``docs/shard-store.md``); ``None``: ``CompactionPolicy()``."""
    platform: Platform = REAL
    """Where time, blocking work and identifiers come from (the simulator passes its own)."""
    since_downgrade_interval_ms: int = 1000
    """How often, at most, the controller moves a shard's since (its critical reader's), as
    persist's ``maybe_compare_and_downgrade_since`` (whose default is 30 s): a change sooner
    waits (issued on the maintenance tick once due); a drop's downgrade to ``[]`` never
    waits. Shards' sinces lag the controller's by up to this much. 0: every change at once."""
    check_protocol: bool = True
    """Check every command and response against the protocol's rules: a replica that breaks
    one is disconnected (a ``RemoteProtocolError``); a command the controller must not send
    raises a ``LocalProtocolError`` (a bug here). Off only to measure what the checks cost."""
    max_result_size: int | None = None
    """The largest peek answer in bytes (values' widths times counts, as Materialize counts):
    a larger one is a ``ResultTooLarge`` error instead. ``None``: no limit (answers of any
    size travel in fragments between replica and controller)."""
    replica_sizes: Mapping[str, ReplicaSize] | None = None
    """Replica sizes by name, added to (or replacing) the built-in ``small``, ``medium`` and
    ``large`` (:data:`~tidegate.runtime.sizes.BUILTIN_SIZES`): what ``SIZE = 'name'`` allocates
    to a replica (Spark cores, executor and driver memory, ``state_memory_rows``, memory limit)."""
    default_replica_size: str | None = None
    """The size of a cluster's replicas when none is given (``CREATE CLUSTER c`` without
    ``SIZE``). ``None``: the environment's own replica settings (``spark_master``,
    ``replica_memory_limit``, ``spark_conf``), as the ``default`` cluster's replicas have."""
    replica_memory_limit: int | None = None
    """The memory limit of each managed replica, in bytes (its process and its JVM; the
    replica's ``--memory-limit``): above it the replica fails the dataflow holding the most
    state, whose collections then answer an error. ``None``: no limit."""
    spark_conf: Mapping[str, str] | None = None
    """Spark properties of every managed replica's session (``--spark-conf KEY=VALUE`` each),
    over the replica's defaults, e.g. ``{"spark.sql.shuffle.partitions": "4"}``."""
    spark_ui: bool = False
    """Whether managed replicas serve Spark's web UI (``--spark-ui``; off by default)."""
    replica_metrics: bool = False
    """Whether managed replicas (the storage replica too) serve Prometheus metrics, each on a
    free loopback port of its own (the replica's ``--metrics``), kept across its restarts while
    free: ``env.orchestrator.status()[name].metrics`` says where (``HOST:PORT``, scraped at
    ``http://HOST:PORT/metrics``) and ``tidegate status`` shows it. Off by default."""
    storage_replica: str | None = None
    """The address (``host:port``; with another ``storage_transport``, whatever it connects to)
    of the storage instance's replica, a ``tidegate replica --services storage`` process
    someone else runs: it replaces the catalog's record. ``None``
    (the default) keeps the recorded one; with none recorded, a managed one is started by the
    orchestrator when the first source or sink is created (and at every open while any exist)."""
    storage_transport: Transport[StorageCommand, StorageResponse] | None = None
    """How to reach the storage replica (the storage protocol); default: gRPC with ``tls`` and
    the storage replica's token (``token`` if given, else a fresh one for a managed replica)."""
    storage_tick_ms: int | None = None
    """How often a managed storage replica mints bindings and commits sinks (its
    ``--storage-tick-ms``; ``None``: the replica's default, 100 ms)."""
    read_only: bool = False
    """Open read-only, beside the environment that writes this data (a zero-downtime upgrade's
    new version warming up): restore and serve peeks and subscribes, but write nothing (no
    catalog change, no table append, no oracle timestamp, no view output) until
    :meth:`~tidegate.runtime.environment.Environment.promote`, which fences the writer and
    takes over. Managed replicas run under an orchestrator of their own (a separate
    ``replicas-*`` directory), so they never collide with the writer's."""

    def __post_init__(self) -> None:
        _check_replicas(self.replicas)
        if not isinstance(self.spark_master, str) or not self.spark_master:
            raise InvalidEnvironmentOptions(
                "spark_master", f"must be a non-empty string, got {self.spark_master!r}"
            )
        if self.executor not in EXECUTORS:
            raise InvalidEnvironmentOptions(
                "executor", f"must be one of {EXECUTORS}, got {self.executor!r}"
            )
        for name in ("blob_url", "consensus_url", "token"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise InvalidEnvironmentOptions(
                    name, f"must be a non-empty string or None, got {value!r}"
                )
        if self.max_result_size is not None and (
            type(self.max_result_size) is not int or self.max_result_size <= 0
        ):
            raise InvalidEnvironmentOptions(
                "max_result_size",
                f"must be a positive int (bytes) or None, got {self.max_result_size!r}",
            )
        if self.replica_memory_limit is not None and (
            type(self.replica_memory_limit) is not int or self.replica_memory_limit <= 0
        ):
            raise InvalidEnvironmentOptions(
                "replica_memory_limit",
                f"must be a positive int (bytes) or None, got {self.replica_memory_limit!r}",
            )
        if self.replica_sizes is not None:
            if not isinstance(self.replica_sizes, Mapping) or not all(
                isinstance(k, str) and k and isinstance(v, ReplicaSize)
                for k, v in self.replica_sizes.items()
            ):
                raise InvalidEnvironmentOptions(
                    "replica_sizes",
                    f"must map size names to ReplicaSize values, got {self.replica_sizes!r}",
                )
            object.__setattr__(self, "replica_sizes", dict(self.replica_sizes))
        if self.default_replica_size is not None and self.default_replica_size not in self.sizes():
            raise InvalidEnvironmentOptions(
                "default_replica_size",
                f"unknown size {self.default_replica_size!r} (sizes: {', '.join(self.sizes())})",
            )
        if isinstance(self.replicas, Sequence) and not isinstance(self.replicas, str | bytes):
            for spec in self.replicas:
                if spec.size is not None and spec.size not in self.sizes():
                    raise InvalidEnvironmentOptions(
                        "replicas", f"replica {spec.name!r}: unknown size {spec.size!r}"
                    )
        if self.storage_replica is not None and (
            not isinstance(self.storage_replica, str)
            or not self.storage_replica
            or any(c.isspace() for c in self.storage_replica)
        ):
            raise InvalidEnvironmentOptions(
                "storage_replica",
                f"must be an address ('host:port') or None, got {self.storage_replica!r}",
            )
        if (
            type(self.since_downgrade_interval_ms) is not int
            or self.since_downgrade_interval_ms < 0
        ):
            raise InvalidEnvironmentOptions(
                "since_downgrade_interval_ms",
                f"must be an int >= 0 (milliseconds), got {self.since_downgrade_interval_ms!r}",
            )
        for name in ("tick_ms", "maintain_ms", "poll_ms", "storage_tick_ms"):
            value = getattr(self, name)
            if value is not None and (type(value) is not int or value <= 0):
                raise InvalidEnvironmentOptions(
                    name, f"must be a positive int (milliseconds) or None, got {value!r}"
                )
        if self.shard_policy is not None:
            from tidegate.spec.shard import CompactionPolicy

            if not isinstance(self.shard_policy, CompactionPolicy):
                raise InvalidEnvironmentOptions(
                    "shard_policy", f"must be a CompactionPolicy or None, got {self.shard_policy!r}"
                )
        if self.blob is not None and self.blob_url is not None:
            raise InvalidEnvironmentOptions("blob", "give blob or blob_url, not both")
        if self.consensus is not None and self.consensus_url is not None:
            raise InvalidEnvironmentOptions(
                "consensus", "give consensus or consensus_url, not both"
            )
        if self.spark_conf is not None:
            if not isinstance(self.spark_conf, Mapping) or not all(
                isinstance(k, str)
                and k
                and "=" not in k
                and not any(c.isspace() for c in k)
                and isinstance(v, str)
                for k, v in self.spark_conf.items()
            ):
                raise InvalidEnvironmentOptions(
                    "spark_conf",
                    "must map Spark property names (no spaces or '=') to string values, "
                    f"got {self.spark_conf!r}",
                )
            object.__setattr__(self, "spark_conf", dict(self.spark_conf))
        if type(self.spark_ui) is not bool:
            raise InvalidEnvironmentOptions("spark_ui", f"must be a bool, got {self.spark_ui!r}")
        if type(self.replica_metrics) is not bool:
            raise InvalidEnvironmentOptions(
                "replica_metrics", f"must be a bool, got {self.replica_metrics!r}"
            )
        if type(self.read_only) is not bool:
            raise InvalidEnvironmentOptions("read_only", f"must be a bool, got {self.read_only!r}")
        if self.read_only and self.oracle is not None:
            raise InvalidEnvironmentOptions(
                "read_only",
                "a read-only environment uses no oracle until it is promoted (then the durable "
                "one, whose epoch fences the writer): leave oracle unset",
            )
        if type(self.check_protocol) is not bool:
            raise InvalidEnvironmentOptions(
                "check_protocol", f"must be a bool, got {self.check_protocol!r}"
            )

    def sizes(self) -> dict[str, ReplicaSize]:
        """Every replica size this environment knows: the built-ins and ``replica_sizes``."""
        return {**BUILTIN_SIZES, **(self.replica_sizes or {})}

    def replace(self, **overrides: object) -> EnvironmentOptions:
        """A copy with ``overrides`` (field names as keywords), validated again.

        An unknown name is a :class:`TypeError`, as for any call.
        """
        unknown = sorted(set(overrides) - _FIELDS)
        if unknown:
            raise TypeError(f"unknown environment option(s): {', '.join(unknown)}")
        return dataclasses.replace(self, **overrides)  # type: ignore[arg-type]


class EnvironmentOverrides(TypedDict, total=False):
    """The fields of :class:`EnvironmentOptions` as keyword arguments (see there for each)."""

    blob_url: str | None
    consensus_url: str | None
    replicas: Replicas | None
    spark_master: str
    executor: str
    token: str | None
    tls: ClientTls | None
    replica_tls: TlsFiles | None
    transport: Transport | None
    tick_ms: int | None
    maintain_ms: int | None
    poll_ms: int | None
    oracle: Oracle | None
    orchestrator: Orchestrator | None
    blob: Blob | None
    consensus: Consensus | None
    shard_policy: CompactionPolicy | None
    platform: Platform
    since_downgrade_interval_ms: int
    check_protocol: bool
    max_result_size: int | None
    replica_sizes: Mapping[str, ReplicaSize] | None
    default_replica_size: str | None
    replica_memory_limit: int | None
    spark_conf: Mapping[str, str] | None
    spark_ui: bool
    replica_metrics: bool
    storage_replica: str | None
    storage_transport: Transport[StorageCommand, StorageResponse] | None
    storage_tick_ms: int | None
    read_only: bool


_FIELDS = frozenset(f.name for f in fields(EnvironmentOptions))


def _check_replicas(replicas: object) -> None:
    """Raise :class:`InvalidEnvironmentOptions` unless ``replicas`` is a :data:`Replicas` or None."""
    if replicas is None:
        return
    if isinstance(replicas, int):
        if isinstance(replicas, bool) or replicas < 0:
            raise InvalidEnvironmentOptions(
                "replicas", f"a count of replicas must be an int >= 0, got {replicas!r}"
            )
        return
    if isinstance(replicas, Mapping):
        for name, address in replicas.items():
            if not isinstance(name, str) or not name:
                raise InvalidEnvironmentOptions(
                    "replicas", f"replica names must be non-empty strings, got {name!r}"
                )
            if not isinstance(address, str) or not address:
                raise InvalidEnvironmentOptions(
                    "replicas",
                    f"replica {name!r}: the address must be 'host:port', got {address!r}",
                )
        return
    if isinstance(replicas, str | bytes) or not isinstance(replicas, Sequence):
        raise InvalidEnvironmentOptions(
            "replicas",
            "must be a count, a {name: 'host:port'} mapping or a sequence of ReplicaSpec, "
            f"got {replicas!r}",
        )
    seen: set[str] = set()
    for spec in replicas:
        if not isinstance(spec, ReplicaSpec):
            raise InvalidEnvironmentOptions(
                "replicas", f"a sequence of replicas must hold ReplicaSpecs, got {spec!r}"
            )
        if spec.name in seen:
            raise InvalidEnvironmentOptions("replicas", f"replica {spec.name!r} is given twice")
        seen.add(spec.name)
