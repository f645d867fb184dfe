"""Scenarios: what a simulation run hosts (replicas, tables, dataflows), what its clients do, how long.

A :class:`Scenario` is plain data with a hand-writable JSON form
(:meth:`Scenario.to_json` / :meth:`Scenario.from_json` / :meth:`Scenario.load`);
plans are stored with :func:`tidegate.spec.plan.plan_to_dict`. Files are validated
against a schema (:mod:`tidegate.sim.scenario_schema`): an unknown key, a value of the
wrong type or out of range, a missing field is a :class:`ScenarioError` naming the
field's path. ``standard()``, ``small()`` and ``churn()`` are the built-ins;
:data:`SCENARIOS` names them (``tidegate sim scenario show standard`` prints one as a
starting file).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
    model_validator,
)

from tidegate.spec.errors import InvalidId, PlanError
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import (
    Column,
    ColumnType,
    Plan,
    ScalarType,
    Schema,
    plan_from_dict,
    plan_to_dict,
)
from tidegate.spec.plan.serde import schema_to_dict

from .faults import FaultKind

__all__ = [
    "DEFAULT_CLUSTER",
    "DEFAULT_REPLICA_STEP_MS",
    "DEFAULT_TICK_MS",
    "SCENARIOS",
    "ClusterSpec",
    "DataflowKind",
    "DataflowSpec",
    "Scenario",
    "ScenarioError",
    "SinkSpec",
    "SourceSpec",
    "TableSpec",
    "WorkloadMix",
    "clusters",
    "small",
    "sources",
    "standard",
]

DataflowKind = Literal["index", "materialized_view", "subscribe"]
SinkWriterKind = Literal["iceberg", "simulated"]
"""What a scenario's sinks write through (:attr:`Scenario.sink_writer`)."""
_KINDS = ("index", "materialized_view", "subscribe")

DEFAULT_TICK_MS = 40
"""Virtual ms between the timestamp oracle's table ticks when a scenario names none.

Kept at the simulator's original value so existing scenario files replay unchanged;
``standard()`` ticks once per second, as Materialize does by default."""

DEFAULT_REPLICA_STEP_MS = (10, 50)
"""The range each replica's periodic step interval is drawn from when a scenario names none."""

DEFAULT_UPSTREAM_MS = (40, 200)
"""The range of virtual ms between two changes of each simulated upstream."""

DEFAULT_STORAGE_TICK_MS = 100
"""How often the storage replica mints bindings and commits sinks (its ``tick_s``)."""

DEFAULT_CLUSTER = "default"
"""The cluster every environment starts with: it runs the scenario's ``replicas``, and every
dataflow that names no other."""


class ScenarioError(ValueError):
    """A scenario file or value that cannot be used.

    ``problems`` lists what a file's validation found, as ``(path, message)`` pairs: the
    field's dotted path (``dataflows.0.kind``) and what was expected there."""

    def __init__(self, message: str, problems: Iterable[tuple[str, str]] = ()) -> None:
        super().__init__(message)
        self.problems: tuple[tuple[str, str], ...] = tuple(problems)


@dataclass(frozen=True)
class TableSpec:
    """A table ``id`` (like ``"u1"``) with its row schema."""

    id: str
    schema: Schema


@dataclass(frozen=True)
class SourceSpec:
    """A source the clients may create: named ``name`` in the catalog, ``id`` (like ``"u9"``) in
    the scenario's plans, ingesting the simulated upstream ``upstream`` (``SimulatedSource``),
    whose rows have ``schema``."""

    id: str
    name: str
    upstream: str
    schema: Schema


@dataclass(frozen=True)
class SinkSpec:
    """A sink the clients may create: ``name``, writing ``input`` (a table's or source's id, or a
    materialized view's dataflow name) to the simulated target ``target`` (``SimulatedSink``)."""

    name: str
    input: str
    target: str
    commit_interval_ms: int = 100
    """The sink's commit interval (``SimulatedSink.commit_interval_ms``): short in the
    simulator, so runs see many commits and the pacing between them."""
    progress_interval_ms: int = 1_000
    """How long its covered upper may stay behind a quiet input (well below the quiet phase,
    so ``sinks_catch_up`` still holds at the end)."""


@dataclass(frozen=True)
class ClusterSpec:
    """A cluster besides ``default`` (Materialize's ``CREATE CLUSTER``), created by the clients'
    setup with ``replicas`` replicas (``r1``..``rN``), each a simulated replica process of its own
    that the world starts, and faults strike, as the default cluster's."""

    name: str
    replicas: int = 1


@dataclass(frozen=True)
class DataflowSpec:
    """A dataflow the clients may install: ``plan`` over the tables, exported as ``kind``.

    ``key`` is the index key (column positions) for ``kind == "index"``; ``cluster`` the cluster
    that computes it (``IN CLUSTER``): an index is readable there only, a materialized view from
    every cluster; a subscribe runs there.
    """

    name: str
    kind: DataflowKind
    plan: Plan
    key: tuple[int, ...] = ()
    cluster: str = DEFAULT_CLUSTER


_STORAGE_ACTIONS = ("create_source", "drop_source", "create_sink", "drop_sink")
SQL_ACTIONS = (
    "sql_query",
    "sql_insert",
    "sql_ddl",
    "sql_subscribe",
    "sql_bad",
    "sql_copy",
    "sql_read",
    "sql_cluster",
)
"""The SQL clients' actions (:mod:`.sql_clients`; each a weight of the workload mix)."""
_CLUSTER_ACTIONS = (
    "peek_cluster",
    "create_cluster_replica",
    "drop_cluster_replica",
    "create_cluster",
    "drop_cluster",
    "cluster_dataflow",
    "create_managed_cluster",
    "alter_cluster",
)


@dataclass(frozen=True)
class WorkloadMix:
    """Relative weights of client actions, rows per append, and virtual ms between actions."""

    append: int = 20
    append_many: int = 6
    append_peek: int = 6
    peek: int = 14
    peek_at: int = 8
    peek_key: int = 4
    peek_invalid: int = 4
    peek_future: int = 3
    cancel_peek: int = 4
    create_dataflow: int = 6
    drop_dataflow: int = 3
    set_read_policy: int = 4
    subscribe: int = 3
    unsubscribe: int = 2
    hydration: int = 2
    copy_to: int = 2
    create_source: int = 0
    drop_source: int = 0
    create_sink: int = 0
    drop_sink: int = 0
    sql_query: int = 0
    """The SQL clients' actions (:mod:`.sql_clients`): off unless a scenario weighs them (they
    cost about a quarter more CPU per seed; ``small`` and ``sql`` have them)."""
    sql_insert: int = 0
    sql_ddl: int = 0
    peek_cluster: int = 0
    """The cluster actions: a peek sent to a cluster the client names (``SET cluster``; one of an
    index on another cluster must be refused), and a replica added to or dropped from one of the
    scenario's clusters (its process started or stopped by the world). Off unless a scenario
    weighs them (``clusters`` does)."""
    create_cluster_replica: int = 0
    drop_cluster_replica: int = 0
    create_cluster: int = 0
    """A cluster of one replica created (its process started by the world) or dropped while the
    run goes: named reads go to it too, until it is dropped."""
    drop_cluster: int = 0
    create_managed_cluster: int = 0
    """A managed cluster (``SIZE``, ``REPLICATION FACTOR``) created while the run goes, its
    replicas' processes started by the world as the environment's orchestrator; then
    ``alter_cluster`` changes its replication factor: the world must then run exactly that
    many of its replicas."""
    alter_cluster: int = 0
    cluster_dataflow: int = 0
    """One of the scenario's indexes or materialized views created anew on a cluster created
    while the run goes, then read there and from ``default``; it goes when its cluster is
    dropped (``CASCADE``)."""
    sql_subscribe: int = 0
    """``SUBSCRIBE ... UP TO`` through the SQL clients (``small`` and ``sql`` weigh it)."""
    sql_bad: int = 0
    """A statement PostgreSQL refuses (:mod:`.sql_bad`), through the SQL clients (``small``
    and ``sql`` weigh it)."""
    sql_copy: int = 0
    """``COPY ... FROM STDIN`` and ``COPY (query) TO STDOUT`` over the wire, through the SQL
    clients (``small`` and ``sql`` weigh it)."""
    sql_read: int = 0
    """A read-only transaction (``BEGIN``, two queries of one relation, the first again,
    ``COMMIT``) through the SQL clients (``small`` and ``sql`` weigh it)."""
    sql_cluster: int = 0
    """The SQL clients in clusters: a query after ``SET cluster = c``, or ``CREATE INDEX`` /
    ``CREATE MATERIALIZED VIEW ... IN CLUSTER c`` (``clusters`` weighs it)."""
    rows_per_append: tuple[int, int] = (1, 4)
    ms_between_actions: tuple[int, int] = (20, 120)
    null_per_mille: int = 150
    """How often a nullable column gets a NULL."""

    ACTIONS = (
        "append",
        "append_many",
        "append_peek",
        "peek",
        "peek_at",
        "peek_key",
        "peek_invalid",
        "peek_future",
        "cancel_peek",
        "create_dataflow",
        "drop_dataflow",
        "set_read_policy",
        "subscribe",
        "unsubscribe",
        "hydration",
        "copy_to",
        "create_source",
        "drop_source",
        "create_sink",
        "drop_sink",
        "sql_query",
        "sql_insert",
        "sql_ddl",
        "peek_cluster",
        "create_cluster_replica",
        "drop_cluster_replica",
        "create_cluster",
        "drop_cluster",
        "sql_subscribe",
        "sql_bad",
        "sql_copy",
        "sql_read",
        "cluster_dataflow",
        "sql_cluster",
        "create_managed_cluster",
        "alter_cluster",
    )

    def weights(self) -> list[tuple[str, int]]:
        """``(action, weight)`` for every action with a positive weight, in a fixed order."""
        return [(a, getattr(self, a)) for a in self.ACTIONS if getattr(self, a) > 0]

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        # files without them stay as they were
        for name in _STORAGE_ACTIONS + SQL_ACTIONS + _CLUSTER_ACTIONS:
            if not out[name]:
                del out[name]
        out["rows_per_append"] = list(self.rows_per_append)
        out["ms_between_actions"] = list(self.ms_between_actions)
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WorkloadMix:
        """Validate a scenario file's ``workload`` object (see :mod:`.scenario_schema`)."""
        try:
            return cls(**WorkloadModel.model_validate(data).model_dump())
        except ValidationError as e:
            found = [(f"workload.{path}", message) for path, message in problems(e)]
            raise ScenarioError(
                "bad workload: " + "; ".join(f"{p}: {m}" for p, m in found), found
            ) from None


@dataclass(frozen=True)
class Scenario:
    """One simulation setup; see the module docstring.

    ``tick_ms`` is the virtual time between table ticks (each table's upper then moves
    to now + 1, which drives most frontier reports); ``replica_step_ms`` is the range
    each replica's periodic step interval is drawn from (inputs also trigger a step). With
    ``upgrade``, every restarted controller is a new version taking over (a
    zero-downtime upgrade): it opens read-only and promotes itself once restored.
    """

    name: str
    replicas: int
    tables: tuple[TableSpec, ...]
    dataflows: tuple[DataflowSpec, ...]
    workload: WorkloadMix = field(default_factory=WorkloadMix)
    duration_ms: int = 10_000
    faults: int = 2
    fault_kinds: tuple[FaultKind, ...] | None = None
    quiet_ms: int = 5_000
    tick_ms: int = DEFAULT_TICK_MS
    replica_step_ms: tuple[int, int] = DEFAULT_REPLICA_STEP_MS
    upgrade: bool = False
    sources: tuple[SourceSpec, ...] = ()
    sinks: tuple[SinkSpec, ...] = ()
    upstream_ms: tuple[int, int] = DEFAULT_UPSTREAM_MS
    storage_tick_ms: int = DEFAULT_STORAGE_TICK_MS
    clusters: tuple[ClusterSpec, ...] = ()
    """Clusters besides ``default`` (which runs ``replicas``); dataflows name theirs."""
    sink_writer: SinkWriterKind = "iceberg"
    """What the storage replica's sinks write through: ``"iceberg"``, the production
    ``IcebergSinkWriter`` over a pyiceberg catalog and FileIO on the simulated disk
    (:mod:`.iceberg`); ``"simulated"``, the simulator's own writer of the same contract
    (:mod:`.sink_target`: cheaper, but no line of the real writer runs)."""

    def cluster_replicas(self) -> dict[str, str]:
        """Every replica process the run starts -> its cluster: ``r1``..``rN`` of ``default``,
        then ``c.r1``.. of each other cluster ``c`` (the simulator's own naming)."""
        out = {f"r{i + 1}": DEFAULT_CLUSTER for i in range(self.replicas)}
        for c in self.clusters:
            out.update({f"{c.name}.r{i + 1}": c.name for i in range(c.replicas)})
        return out

    @property
    def storage(self) -> bool:
        """Whether the run has a storage replica (the scenario names sources or sinks)."""
        return bool(self.sources or self.sinks)

    def __post_init__(self) -> None:
        if not 1 <= self.replicas <= 5:
            raise ScenarioError(f"replicas must be 1..5, got {self.replicas}")
        if not self.tables:
            raise ScenarioError("a scenario needs at least one table")
        if self.duration_ms <= 0 or self.quiet_ms < 0 or self.faults < 0:
            raise ScenarioError("duration_ms must be positive, quiet_ms and faults non-negative")
        if self.tick_ms <= 0:
            raise ScenarioError(f"tick_ms must be positive, got {self.tick_ms}")
        low, high = self.replica_step_ms
        if not 0 < low <= high:
            raise ScenarioError(
                f"replica_step_ms must be 0 < low <= high, got {self.replica_step_ms}"
            )
        for d in self.dataflows:
            if d.kind not in _KINDS:
                raise ScenarioError(f"dataflow {d.name!r}: kind must be one of {_KINDS}")
        names = [d.name for d in self.dataflows]
        if len(set(names)) != len(names):
            raise ScenarioError("dataflow names must be unique")
        self._check_clusters()
        self._check_storage()

    def _check_clusters(self) -> None:
        names = [c.name for c in self.clusters]
        if len(set(names)) != len(names) or DEFAULT_CLUSTER in names:
            raise ScenarioError(f"cluster names must be unique and not {DEFAULT_CLUSTER!r}")
        for c in self.clusters:
            if not c.name or "." in c.name:
                raise ScenarioError(f"cluster {c.name!r}: a name is non-empty, without a dot")
            if not 1 <= c.replicas <= 5:
                raise ScenarioError(f"cluster {c.name!r}: replicas must be 1..5, got {c.replicas}")
        known = {DEFAULT_CLUSTER, *names}
        for d in self.dataflows:
            if d.cluster not in known:
                raise ScenarioError(f"dataflow {d.name!r}: cluster {d.cluster!r} is not declared")

    def _check_storage(self) -> None:
        ids = [t.id for t in self.tables] + [s.id for s in self.sources]
        if len(set(ids)) != len(ids):
            raise ScenarioError("table and source ids must be unique")
        names = [s.name for s in self.sources] + [s.name for s in self.sinks]
        names += [d.name for d in self.dataflows] + [t.id for t in self.tables]
        if len(set(names)) != len(names):
            raise ScenarioError("source, sink, dataflow and table names must be unique")
        views = {d.name for d in self.dataflows if d.kind == "materialized_view"}
        for sink in self.sinks:
            if sink.input not in set(ids) | views:
                raise ScenarioError(
                    f"sink {sink.name!r}: input {sink.input!r} is not a table, a source or a "
                    "materialized view of the scenario"
                )
        low, high = self.upstream_ms
        if not 0 < low <= high:
            raise ScenarioError(f"upstream_ms must be 0 < low <= high, got {self.upstream_ms}")
        if self.storage_tick_ms <= 0:
            raise ScenarioError(f"storage_tick_ms must be positive, got {self.storage_tick_ms}")

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "replicas": self.replicas,
            "tables": [{"id": t.id, "schema": schema_to_dict(t.schema)} for t in self.tables],
            "dataflows": [
                {
                    "name": d.name,
                    "kind": d.kind,
                    "plan": plan_to_dict(d.plan),
                    "key": list(d.key),
                    # files without clusters stay as they were
                    **({"cluster": d.cluster} if d.cluster != DEFAULT_CLUSTER else {}),
                }
                for d in self.dataflows
            ],
            "workload": self.workload.to_json(),
            "duration_ms": self.duration_ms,
            "faults": self.faults,
            "fault_kinds": None
            if self.fault_kinds is None
            else [k.value for k in self.fault_kinds],
            "quiet_ms": self.quiet_ms,
            "tick_ms": self.tick_ms,
            "replica_step_ms": list(self.replica_step_ms),
            **({"upgrade": True} if self.upgrade else {}),  # older files stay as they were
            **(self._storage_json() if self.storage else {}),
            **(
                {"clusters": [{"name": c.name, "replicas": c.replicas} for c in self.clusters]}
                if self.clusters
                else {}
            ),
        }

    def _storage_json(self) -> dict[str, Any]:
        return {
            "sources": [
                {
                    "id": s.id,
                    "name": s.name,
                    "upstream": s.upstream,
                    "schema": schema_to_dict(s.schema),
                }
                for s in self.sources
            ],
            "sinks": [
                {
                    "name": s.name,
                    "input": s.input,
                    "target": s.target,
                    "commit_interval_ms": s.commit_interval_ms,
                    "progress_interval_ms": s.progress_interval_ms,
                }
                for s in self.sinks
            ],
            "upstream_ms": list(self.upstream_ms),
            "storage_tick_ms": self.storage_tick_ms,
            **({"sink_writer": self.sink_writer} if self.sink_writer != "iceberg" else {}),
        }

    @classmethod
    def from_json(cls, data: Any) -> Scenario:
        """Validate a scenario file's parsed JSON (see :mod:`.scenario_schema`) and build it."""
        return validate(data)

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, sort_keys=True)

    @classmethod
    def load(cls, path: str | Path) -> Scenario:
        """Read a JSON scenario file (YAML too, if PyYAML is installed and the suffix says so)."""
        p = Path(path)
        text = p.read_text()
        if p.suffix in (".yaml", ".yml"):
            try:
                import yaml  # type: ignore[import-untyped]
            except ImportError as e:  # pragma: no cover - optional
                raise ScenarioError("YAML scenarios need PyYAML") from e
            data = yaml.safe_load(text)
        else:
            try:
                data = json.loads(text)
            except json.JSONDecodeError as e:
                raise ScenarioError(f"{p}: not JSON: {e}") from e
        try:
            return cls.from_json(data)
        except ScenarioError as e:
            raise ScenarioError(f"{p}: {e}", e.problems) from None


# -- the file format: pydantic models that validate a file and build a Scenario ---------------
# (see :mod:`.scenario_schema`, their public name: here beside the types they build, so that
# neither module imports the other)

_CONFIG = ConfigDict(extra="forbid", frozen=True)

Count = Annotated[StrictInt, Field(ge=0)]
Positive = Annotated[StrictInt, Field(gt=0)]
Name = Annotated[StrictStr, Field(min_length=1)]


def _table_id(value: str) -> str:
    try:
        GlobalId.parse(value)
    except InvalidId:
        raise ValueError(f"expected a table id like 'u1', got {value!r}") from None
    return value


def _plan(value: dict[str, Any]) -> dict[str, Any]:
    try:
        plan_from_dict(value)
    except PlanError as e:
        raise ValueError(f"expected a plan in plan_to_dict's JSON form: {e}") from None
    return value


def _range(value: tuple[int, int]) -> tuple[int, int]:
    if value[0] > value[1]:
        raise ValueError(f"expected [low, high] with low <= high, got {list(value)}")
    return value


Range = Annotated[tuple[Count, Count], AfterValidator(_range)]


class ColumnModel(BaseModel):
    """One column of a table: its name, type and whether it may be NULL."""

    model_config = _CONFIG
    name: Name
    type: ScalarType
    nullable: StrictBool = True


class SchemaModel(BaseModel):
    """A table's row schema."""

    model_config = _CONFIG
    columns: list[ColumnModel] = Field(min_length=1)


class TableModel(BaseModel):
    """A table the scenario creates: its id (as plans name it) and schema."""

    model_config = _CONFIG
    id: Annotated[StrictStr, AfterValidator(_table_id)]
    schema_: SchemaModel = Field(alias="schema")


class SourceModel(BaseModel):
    """A source the clients may create: its id in plans (like a table's), catalog name, the
    simulated upstream it ingests and the upstream's row schema."""

    model_config = _CONFIG
    id: Annotated[StrictStr, AfterValidator(_table_id)]
    name: Name
    upstream: Name
    schema_: SchemaModel = Field(alias="schema")


class SinkModel(BaseModel):
    """A sink the clients may create: its name, its input (a table's or source's id, or a
    materialized view's dataflow name) and the simulated target it writes."""

    model_config = _CONFIG
    name: Name
    input: Name
    target: Name
    commit_interval_ms: Annotated[StrictInt, Field(ge=1, le=60_000)] = 100
    progress_interval_ms: Annotated[StrictInt, Field(ge=1, le=60_000)] = 1_000


class DataflowModel(BaseModel):
    """A dataflow the clients may install; ``key``: the index key's column positions."""

    model_config = _CONFIG
    name: Name
    kind: Literal["index", "materialized_view", "subscribe"]
    plan: Annotated[dict[str, Any], AfterValidator(_plan)]
    key: list[Count] = []
    cluster: Name = DEFAULT_CLUSTER


def _cluster_name(value: str) -> str:
    if "." in value or value == DEFAULT_CLUSTER:
        raise ValueError(f"expected a cluster name without a dot, not {DEFAULT_CLUSTER!r}")
    return value


class ClusterModel(BaseModel):
    """A cluster besides ``default``: its name and how many replicas it starts with."""

    model_config = _CONFIG
    name: Annotated[Name, AfterValidator(_cluster_name)]
    replicas: Annotated[StrictInt, Field(ge=1, le=5)] = 1


_MIX = WorkloadMix()


class WorkloadModel(BaseModel):
    """Relative weights of the client actions, rows per append, virtual ms between actions."""

    model_config = _CONFIG
    append: Count = _MIX.append
    append_many: Count = _MIX.append_many
    append_peek: Count = _MIX.append_peek
    peek: Count = _MIX.peek
    peek_at: Count = _MIX.peek_at
    peek_key: Count = _MIX.peek_key
    peek_invalid: Count = _MIX.peek_invalid
    peek_future: Count = _MIX.peek_future
    cancel_peek: Count = _MIX.cancel_peek
    create_dataflow: Count = _MIX.create_dataflow
    drop_dataflow: Count = _MIX.drop_dataflow
    set_read_policy: Count = _MIX.set_read_policy
    subscribe: Count = _MIX.subscribe
    unsubscribe: Count = _MIX.unsubscribe
    hydration: Count = _MIX.hydration
    copy_to: Count = _MIX.copy_to
    create_source: Count = _MIX.create_source
    drop_source: Count = _MIX.drop_source
    create_sink: Count = _MIX.create_sink
    drop_sink: Count = _MIX.drop_sink
    sql_query: Count = _MIX.sql_query
    sql_insert: Count = _MIX.sql_insert
    sql_ddl: Count = _MIX.sql_ddl
    peek_cluster: Count = _MIX.peek_cluster
    create_cluster_replica: Count = _MIX.create_cluster_replica
    drop_cluster_replica: Count = _MIX.drop_cluster_replica
    create_cluster: Count = _MIX.create_cluster
    drop_cluster: Count = _MIX.drop_cluster
    sql_subscribe: Count = _MIX.sql_subscribe
    sql_bad: Count = _MIX.sql_bad
    sql_copy: Count = _MIX.sql_copy
    sql_read: Count = _MIX.sql_read
    cluster_dataflow: Count = _MIX.cluster_dataflow
    sql_cluster: Count = _MIX.sql_cluster
    create_managed_cluster: Count = _MIX.create_managed_cluster
    alter_cluster: Count = _MIX.alter_cluster
    rows_per_append: Range = _MIX.rows_per_append
    ms_between_actions: Range = _MIX.ms_between_actions
    null_per_mille: Annotated[StrictInt, Field(ge=0, le=1000)] = _MIX.null_per_mille


class ScenarioModel(BaseModel):
    """A whole scenario file (see :class:`tidegate.sim.scenario.Scenario` for the meanings)."""

    model_config = _CONFIG
    name: Name
    replicas: Annotated[StrictInt, Field(ge=1, le=5)] = 1
    tables: list[TableModel] = Field(min_length=1)
    dataflows: list[DataflowModel] = []
    workload: WorkloadModel = WorkloadModel()
    duration_ms: Positive = 10_000
    faults: Count = 0
    fault_kinds: list[FaultKind] | None = None
    quiet_ms: Count = 5_000
    tick_ms: Positive = DEFAULT_TICK_MS
    replica_step_ms: Annotated[tuple[Positive, Positive], AfterValidator(_range)] = (
        DEFAULT_REPLICA_STEP_MS
    )
    replica: Literal["spec", "service"] | None = None
    """Obsolete, accepted so that older files load: replicas always run the replica service
    (files of versions that also had a replica of their own said which ran)."""
    upgrade: StrictBool = False
    sources: list[SourceModel] = []
    sinks: list[SinkModel] = []
    upstream_ms: Annotated[tuple[Positive, Positive], AfterValidator(_range)] = DEFAULT_UPSTREAM_MS
    storage_tick_ms: Positive = DEFAULT_STORAGE_TICK_MS
    sink_writer: SinkWriterKind = "iceberg"
    clusters: list[ClusterModel] = []

    @model_validator(mode="after")
    def _unique_names(self) -> ScenarioModel:
        known = {DEFAULT_CLUSTER} | {c.name for c in self.clusters}
        for d in self.dataflows:
            if d.cluster not in known:
                raise ValueError(
                    f"dataflow {d.name!r}: cluster {d.cluster!r} is not declared in clusters"
                )
        for what, names in (
            ("cluster names", [c.name for c in self.clusters]),
            ("table ids", [t.id for t in self.tables]),
            ("dataflow names", [d.name for d in self.dataflows]),
            ("table and source ids", [t.id for t in self.tables] + [s.id for s in self.sources]),
            (
                "dataflow, source and sink names",
                [d.name for d in self.dataflows]
                + [s.name for s in self.sources]
                + [s.name for s in self.sinks],
            ),
        ):
            twice = sorted({n for n in names if names.count(n) > 1})
            if twice:
                raise ValueError(f"{what} must be unique; repeated: {', '.join(twice)}")
        inputs = {t.id for t in self.tables} | {s.id for s in self.sources}
        inputs |= {d.name for d in self.dataflows if d.kind == "materialized_view"}
        for sink in self.sinks:
            if sink.input not in inputs:
                raise ValueError(
                    f"sink {sink.name!r}: input {sink.input!r} is not a table, a source or a "
                    "materialized view of the scenario"
                )
        return self

    def scenario(self) -> Scenario:
        """The :class:`Scenario` this file describes."""
        w = self.workload
        return Scenario(
            name=self.name,
            replicas=self.replicas,
            tables=tuple(TableSpec(t.id, _schema(t.schema_)) for t in self.tables),
            dataflows=tuple(
                DataflowSpec(d.name, d.kind, plan_from_dict(d.plan), tuple(d.key), d.cluster)
                for d in self.dataflows
            ),
            workload=WorkloadMix(**w.model_dump()),
            duration_ms=self.duration_ms,
            faults=self.faults,
            fault_kinds=None if self.fault_kinds is None else tuple(self.fault_kinds),
            quiet_ms=self.quiet_ms,
            tick_ms=self.tick_ms,
            replica_step_ms=self.replica_step_ms,
            upgrade=self.upgrade,
            sources=tuple(
                SourceSpec(s.id, s.name, s.upstream, _schema(s.schema_)) for s in self.sources
            ),
            sinks=tuple(
                SinkSpec(s.name, s.input, s.target, s.commit_interval_ms, s.progress_interval_ms)
                for s in self.sinks
            ),
            upstream_ms=self.upstream_ms,
            storage_tick_ms=self.storage_tick_ms,
            clusters=tuple(ClusterSpec(c.name, c.replicas) for c in self.clusters),
            sink_writer=self.sink_writer,
        )


def _schema(model: SchemaModel) -> Schema:
    return Schema(tuple(Column(c.name, ColumnType(c.type, c.nullable)) for c in model.columns))


def _model_at(root: type[BaseModel], loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The model that validates the object at ``loc`` (list indexes skipped), if any."""
    model = root
    for part in loc:
        if isinstance(part, int):
            continue
        info = next(
            (f for n, f in model.model_fields.items() if part in (n, f.alias)),
            None,
        )
        if info is None:
            return None
        found = _find_model(info.annotation)
        if found is None:
            return None
        model = found
    return model


def _find_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _find_model(arg)
        if found is not None:
            return found
    return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def problems(error: ValidationError) -> list[tuple[str, str]]:
    """``(path, message)`` for each of pydantic's errors: the field's dotted path (list
    positions as numbers) and what was expected there."""
    out: list[tuple[str, str]] = []
    for e in error.errors(include_url=False):
        loc = tuple(e["loc"])
        path = ".".join(str(p) for p in loc) or "(the file)"
        kind = e["type"]
        if kind == "extra_forbidden":
            model = _model_at(ScenarioModel, loc[:-1])
            known = [f.alias or n for n, f in model.model_fields.items()] if model else []
            message = "unknown field" + (f"; expected one of: {', '.join(known)}" if known else "")
        elif kind == "missing":
            message = "missing; this field is required"
        elif kind in ("value_error", "assertion_error"):
            message = str(e["msg"]).removeprefix("Value error, ")
        else:
            message = f"{e['msg']}; got {_short(e['input'])}"
        out.append((path, message))
    return out


def validate(data: Any) -> Scenario:
    """Validate a scenario file's parsed JSON and build the :class:`Scenario`; raise
    :class:`ScenarioError` listing every problem."""
    if not isinstance(data, dict):
        message = f"expected a JSON object, got {type(data).__name__}"
        raise ScenarioError(f"bad scenario: (the file): {message}", [("(the file)", message)])
    try:
        model = ScenarioModel.model_validate(data)
    except ValidationError as e:
        found = problems(e)
        lines = [f"{path}: {message}" for path, message in found]
        head = "bad scenario: " if len(lines) == 1 else f"bad scenario ({len(lines)} problems):\n  "
        raise ScenarioError(head + "\n  ".join(lines), found) from None
    return model.scenario()


def json_schema() -> dict[str, Any]:
    """The JSON Schema of scenario files."""
    schema: dict[str, Any] = ScenarioModel.model_json_schema(by_alias=True)
    schema["title"] = "tidegate simulator scenario"
    return schema


# -- built-ins -----------------------------------------------------------------------------


def _tables() -> tuple[TableSpec, ...]:
    return (
        TableSpec("u1", Schema.of(("customer", "string", False), ("amount", "int64", True))),
        TableSpec("u2", Schema.of(("customer", "string", False), ("region", "string", True))),
        TableSpec("u3", Schema.of(("kind", "string", False), ("n", "int64", True))),
    )


def _dataflows() -> tuple[DataflowSpec, ...]:
    from tidegate.spec.plan.builder import avg, col, constant, count, desc, max_, min_, sum_, table

    t1, t2, t3 = (table(t.id, t.schema) for t in _tables())
    # No inputs (SELECT ... without FROM): complete at once; its subscribes end.
    fixed = constant(
        [((1, "one"), 1), ((2, None), 2)],
        Schema.of(("n", "int64", False), ("word", "string", True)),
    )
    return (
        DataflowSpec("orders", "index", t1.plan, (0,)),
        DataflowSpec("big_orders", "index", t1.filter(col("amount") > 5).plan),
        DataflowSpec(
            "per_customer",
            "index",
            t1.group_by("customer")
            .agg(
                count(),
                count("amount"),
                sum_("amount"),
                avg("amount"),
                min_("amount"),
                max_("amount"),
            )
            .plan,
            (0,),
        ),
        DataflowSpec(
            "orders_regions",
            "index",
            t1.join(t2, on="customer").select("region", "amount").plan,
        ),
        DataflowSpec(
            "orders_customers",
            "index",
            t1.join(t2, on="customer", how="left").plan,
            (0,),
        ),
        DataflowSpec("regions", "index", t2.select("region").distinct().plan),
        DataflowSpec(
            "orders_kinds",
            "index",
            t1.join(t3, on=[("customer", "kind")]).select("customer", "amount", "n").plan,
            (0,),
        ),
        DataflowSpec("top_events", "index", t3.top_k(by=[desc("n")], limit=3).plan),
        DataflowSpec(
            "top_per_kind",
            "index",
            t3.top_k(by=[desc("n")], limit=2, group_by=["kind"]).plan,
            (0,),
        ),
        DataflowSpec(
            "event_totals_mv",
            "materialized_view",
            t3.group_by("kind").agg(sum_("n"), max_("n"), min_("n"), count("n")).plan,
        ),
        DataflowSpec("customers_mv", "materialized_view", t2.plan),
        DataflowSpec("orders_sub", "subscribe", t1.filter(col("amount") < 8).plan),
        DataflowSpec("kinds_sub", "subscribe", t3.group_by("kind").agg(count()).plan),
        DataflowSpec("fixed_mv", "materialized_view", fixed.plan),
        DataflowSpec("fixed_sub", "subscribe", fixed.filter(col("n") > 1).plan),
    )


def with_sql(mix: WorkloadMix) -> WorkloadMix:
    """``mix`` with the SQL clients' actions, weighed as ``small`` and ``sql`` have them."""
    return replace(
        mix,
        sql_query=6,
        sql_insert=3,
        sql_ddl=3,
        sql_subscribe=1,
        sql_bad=3,
        sql_copy=2,
        sql_read=2,
    )


def standard() -> Scenario:
    """3 replicas, 15 dataflows over 3 tables (two of them constants), 60 virtual seconds, 5
    faults; tables tick every second."""
    return Scenario(
        name="standard",
        replicas=3,
        tables=_tables(),
        dataflows=_dataflows(),
        workload=WorkloadMix(),
        duration_ms=60_000,
        faults=5,
        fault_kinds=None,
        quiet_ms=10_000,
        tick_ms=1_000,
    )


def small() -> Scenario:
    """2 replicas, 7 dataflows over 2 tables (one joins them; two are constants), 8 virtual
    seconds and 6 quiet ones, 3 faults.

    The quiet phase outlasts the runtime's reconnection backoff (capped at 5 s), so a
    replica that failed often still reconnects before the liveness checks."""
    all_flows = {d.name: d for d in _dataflows()}
    return Scenario(
        name="small",
        replicas=2,
        tables=_tables()[:1] + _tables()[2:],
        dataflows=tuple(
            all_flows[n]
            for n in (
                "orders",
                "per_customer",
                "orders_kinds",
                "event_totals_mv",
                "orders_sub",
                "fixed_mv",
                "fixed_sub",
            )
        ),
        workload=with_sql(WorkloadMix(ms_between_actions=(20, 80))),
        duration_ms=8_000,
        faults=3,
        fault_kinds=None,
        quiet_ms=6_000,
    )


def sql() -> Scenario:
    """``standard()`` with the SQL clients (:mod:`.sql_clients`): their queries, inserts and DDL,
    through sessions and the wire protocol, among the other clients for 60 virtual seconds."""
    return replace(standard(), name="sql", workload=with_sql(WorkloadMix()))


def churn() -> Scenario:
    """``small()`` with dataflows created and dropped all the time while the controller dies
    inside storage calls (8 crash points): where a restarted controller must clean up after a
    predecessor that died in the middle of a drop, which the default workload reaches rarely."""
    return replace(
        small(),
        name="churn",
        faults=8,
        fault_kinds=(FaultKind.CRASH_CONTROLLER_IN,),
        workload=WorkloadMix(create_dataflow=20, drop_dataflow=20, append=20, peek=10),
    )


def split_brain() -> Scenario:
    """``small()`` where controllers are stopped and taken for dead (3 faults among zombie
    controllers, stops, restarts and a clock stepped back across a restart): a deposed
    controller resumes beside the new one, still appending, writing its catalog, moving holds,
    reconnecting to replicas and answering its clients, and only fencing keeps it harmless."""
    return replace(
        small(),
        name="split_brain",
        fault_kinds=(
            FaultKind.ZOMBIE_CONTROLLER,
            FaultKind.PAUSE_PROCESS,
            FaultKind.RESTART_CONTROLLER,
            FaultKind.CLOCK_BACK_RESTART,
        ),
    )


def damaged() -> Scenario:
    """``small()`` on a damaged disk (4 faults among bit rot, a full disk, slow fsyncs, a lost
    catalog record and restarts): reads of damaged records must fail typed, a controller must
    refuse to start over them rather than take them for other data, and nothing acknowledged
    may be lost."""
    return replace(
        small(),
        name="damaged",
        faults=4,
        fault_kinds=(
            FaultKind.BIT_ROT,
            FaultKind.FULL_DISK,
            FaultKind.SLOW_FSYNC,
            FaultKind.LOSE_CATALOG,
            FaultKind.RESTART_CONTROLLER,
        ),
    )


def sources() -> Scenario:
    """Sources and sinks: 2 compute replicas and the storage replica, 2 sources over changing
    upstreams, 6 dataflows over them and a table, 3 sinks; 8 virtual seconds and 8 quiet ones,
    6 faults (the storage world's among them).

    The dataflows read the sources (an index of one, an aggregate, a join with the table, a
    materialized view, a subscribe); the sinks write out the table, a source and the
    materialized view (each into an Iceberg table). Sources and sinks are created and dropped as
    the run goes. Each seed enables a subset of the compute faults and a non-empty subset of
    the storage world's."""
    from tidegate.spec.plan.builder import col, count, sum_, table

    orders, events = _tables()[0], _tables()[2]
    src_orders = SourceSpec("u7", "orders_src", "orders_log", orders.schema)
    src_events = SourceSpec("u8", "events_src", "events_log", events.schema)
    t1 = table(orders.id, orders.schema)
    o = table(src_orders.id, src_orders.schema)
    e = table(src_events.id, src_events.schema)
    dataflows = (
        DataflowSpec("orders", "index", t1.plan, (0,)),
        DataflowSpec("src_orders", "index", o.plan, (0,)),
        DataflowSpec(
            "src_per_customer",
            "index",
            o.group_by("customer").agg(count(), sum_("amount")).plan,
            (0,),
        ),
        DataflowSpec(
            "orders_with_src",
            "index",
            t1.join(o, on="customer").select("#0", "#1", "#3").plan,
        ),
        DataflowSpec("src_event_totals", "materialized_view", e.group_by("kind").agg(count()).plan),
        DataflowSpec("src_small_orders", "subscribe", o.filter(col("amount") < 5).plan),
    )
    return Scenario(
        name="sources",
        replicas=2,
        tables=(orders,),
        dataflows=dataflows,
        workload=WorkloadMix(
            append=12,
            append_many=0,
            append_peek=4,
            peek=16,
            peek_at=8,
            peek_key=4,
            peek_invalid=3,
            peek_future=2,
            cancel_peek=2,
            create_dataflow=6,
            drop_dataflow=3,
            set_read_policy=2,
            subscribe=3,
            unsubscribe=2,
            hydration=1,
            create_source=3,
            drop_source=2,
            create_sink=4,
            drop_sink=2,
            ms_between_actions=(20, 80),
        ),
        duration_ms=8_000,
        faults=6,
        fault_kinds=None,
        quiet_ms=8_000,
        tick_ms=100,
        sources=(src_orders, src_events),
        sinks=(
            # commit intervals from every tick to several ticks, progress intervals from half a
            # second to a second: the pacing the storage replica applies, exercised (each
            # commit is a real Iceberg commit: a few ms of pyiceberg's CPU)
            SinkSpec("orders_sink", orders.id, "orders_target", 1, 500),
            SinkSpec("src_orders_sink", src_orders.id, "src_orders_target", 100, 1_000),
            SinkSpec("event_totals_sink", "src_event_totals", "event_totals_target", 300, 600),
        ),
    )


def clusters() -> Scenario:
    """``small()``'s tables and dataflows over two clusters: ``default`` (2 replicas) and
    ``analytics`` (2 replicas), with indexes on both, a materialized view and a subscribe on
    ``analytics``; peeks sent to a cluster the client names (an index of the other one must be
    refused, a materialized view or table read from either), replicas added to and dropped from
    ``analytics`` and clusters of one replica created and dropped as the run goes, and faults
    that strike the replicas of both; 8 virtual seconds and 8 quiet ones, 3 faults."""
    base = small()
    on_analytics = ("per_customer", "orders_kinds", "event_totals_mv", "orders_sub")
    return replace(
        base,
        name="clusters",
        dataflows=tuple(
            replace(d, cluster="analytics") if d.name in on_analytics else d for d in base.dataflows
        ),
        clusters=(ClusterSpec("analytics", 2),),
        workload=WorkloadMix(
            ms_between_actions=(20, 80),
            peek_cluster=10,
            create_cluster_replica=2,
            drop_cluster_replica=2,
            create_cluster=3,
            drop_cluster=3,
            cluster_dataflow=3,
            sql_cluster=4,
            create_managed_cluster=2,
            alter_cluster=2,
        ),
        quiet_ms=8_000,
    )


SCENARIOS: dict[str, Callable[[], Scenario]] = {
    "standard": standard,
    "small": small,
    "churn": churn,
    "sources": sources,
    "split_brain": split_brain,
    "damaged": damaged,
    "sql": sql,
    "clusters": clusters,
}
"""The built-in scenarios by name."""
