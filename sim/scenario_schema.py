"""The schema of scenario files: pydantic models that validate a file and build a :class:`Scenario`.

:meth:`Scenario.from_json <tidegate.sim.scenario.Scenario.from_json>` (and so
:meth:`~tidegate.sim.scenario.Scenario.load` and ``--scenario FILE``) validates its
input here first: unknown keys are refused with their path (``dataflows.0.kindd``),
values are checked for type and range (integers are integers: ``"3"`` is not 3), and
every problem names its field and says what was expected. The problems are reported
as one :class:`~tidegate.sim.scenario.ScenarioError` (``.problems`` lists them as
``(path, message)`` pairs); pydantic's own error never reaches the caller.

A dataflow's ``plan`` is the JSON form of :func:`tidegate.spec.plan.plan_to_dict`,
checked by decoding it. :func:`json_schema` is the JSON Schema of the whole file
(``tidegate sim scenario schema``).
"""

from __future__ import annotations

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
from tidegate.spec.plan import Column, ColumnType, ScalarType, Schema, plan_from_dict

from .faults import FaultKind
from .scenario import (
    DEFAULT_REPLICA_STEP_MS,
    DEFAULT_STORAGE_TICK_MS,
    DEFAULT_TICK_MS,
    DEFAULT_UPSTREAM_MS,
    DataflowSpec,
    Scenario,
    ScenarioError,
    SinkSpec,
    SourceSpec,
    TableSpec,
    WorkloadMix,
)

__all__ = ["ScenarioModel", "json_schema", "problems", "validate"]

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


class DataflowModel(BaseModel):
    """A dataflow the clients may install; ``key``: the index key's column positions."""

    model_config = _CONFIG
    name: Name
    kind: Literal["index", "materialized_view", "subscribe"]
    plan: Annotated[dict[str, Any], AfterValidator(_plan)]
    key: list[Count] = []


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
    create_source: Count = _MIX.create_source
    drop_source: Count = _MIX.drop_source
    create_sink: Count = _MIX.create_sink
    drop_sink: Count = _MIX.drop_sink
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

    @model_validator(mode="after")
    def _unique_names(self) -> ScenarioModel:
        for what, names in (
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
                DataflowSpec(d.name, d.kind, plan_from_dict(d.plan), tuple(d.key))
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
            sinks=tuple(SinkSpec(s.name, s.input, s.target) for s in self.sinks),
            upstream_ms=self.upstream_ms,
            storage_tick_ms=self.storage_tick_ms,
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
