"""Shared pieces of the SQL binder: PostgreSQL type names, error positions, identifiers and
SQL type names (``varchar(n)``, ``float(p)``) to scalar types."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from sqlglot import exp

from ..errors import (
    InvalidParameterValue,
    PlanError,
    SqlError,
    SqlSyntaxError,
    SqlTypeError,
    UnsupportedSql,
)
from ..plan import (
    Column,
    ColumnRef,
    ColumnType,
    Map,
    Plan,
    Project,
    ScalarType,
    Schema,
    TopK,
    typecheck,
)
from ..protocol.types import ColumnOrder, RowSetFinishing
from .catalog import SqlCatalog

S = ScalarType

_PG_NAMES = {
    S.INT64: "bigint",
    S.FLOAT64: "double precision",
    S.STRING: "text",
    S.BOOL: "boolean",
    S.DATE: "date",
    S.TIMESTAMP: "timestamp",
    S.NUMERIC: "numeric",
    S.INT16: "smallint",
    S.INT32: "integer",
    S.FLOAT32: "real",
}


def pg_type(t: ScalarType | None) -> str:
    """PostgreSQL's name of a scalar type (``unknown`` for an untyped NULL)."""
    return "unknown" if t is None else _PG_NAMES[t]


def position_of(node: Any) -> int | None:
    """The 1-based offset of the first token of ``node`` in its statement, if sqlglot kept it."""
    best: int | None = None
    if not isinstance(node, exp.Expression):
        return None
    for n in node.walk():
        meta = getattr(n, "_meta", None) or {}
        start = meta.get("start")
        if isinstance(start, int) and (best is None or start < best):
            best = start
    return None if best is None else best + 1


def _err(cls: type[SqlError], message: str, node: Any = None, hint: str | None = None) -> SqlError:
    return cls(message, position=position_of(node), hint=hint)


def _unsupported(construct: str, node: Any = None) -> UnsupportedSql:
    return UnsupportedSql(construct, position=position_of(node))


def ident(node: Any) -> str:
    """An identifier's name: as written if quoted, else folded to lower case (as PostgreSQL does)."""
    if isinstance(node, exp.Identifier):
        if node.quoted and not str(node.this):
            raise _err(SqlSyntaxError, "zero-length delimited identifier", node)
        return str(node.this) if node.quoted else str(node.this).lower()
    if isinstance(node, str):
        return node.lower()
    if isinstance(node, exp.Expression) and isinstance(node.this, exp.Identifier):
        return ident(node.this)
    return str(node.name).lower()


_TYPES: dict[Any, ScalarType] = {
    exp.DataType.Type.BIGINT: S.INT64,
    exp.DataType.Type.INT: S.INT32,
    exp.DataType.Type.SMALLINT: S.INT16,
    exp.DataType.Type.FLOAT: S.FLOAT32,
    exp.DataType.Type.DOUBLE: S.FLOAT64,
    exp.DataType.Type.TEXT: S.STRING,
    exp.DataType.Type.VARCHAR: S.STRING,
    exp.DataType.Type.BOOLEAN: S.BOOL,
    exp.DataType.Type.DATE: S.DATE,
    exp.DataType.Type.TIMESTAMP: S.TIMESTAMP,
    exp.DataType.Type.DECIMAL: S.NUMERIC,
}


@dataclass(frozen=True)
class SqlType:
    """A SQL type as written: its scalar type and, for ``varchar(n)``, ``n``; for
    ``numeric(p, s)``, ``(p, s)``."""

    scalar: ScalarType
    max_length: int | None = None
    typmod: tuple[int, int] | None = None


def _type_params(node: Any) -> list[int]:
    out = []
    for p in node.expressions:
        v = p.this if isinstance(p, exp.DataTypeParam) else p
        text = str(v.this if isinstance(v, exp.Literal) else v)
        try:
            out.append(int(text))
        except ValueError:
            raise _err(SqlSyntaxError, f'syntax error at or near "{text}"', node) from None
    return out


def sql_type_of(node: Any) -> SqlType:
    """The type a SQL type name stands for, with its modifier [UnsupportedSql for the others,
    InvalidParameterValue for a modifier out of range (``float(0)``, ``varchar(0)``)]."""
    if isinstance(node, exp.DataType):
        kind = node.this
        params = _type_params(node)
        shown = node.sql(dialect="postgres").lower()
        if kind is exp.DataType.Type.DOUBLE and params:
            (p,) = params
            if p < 1:
                raise _err(
                    InvalidParameterValue, "precision for type float must be at least 1 bit", node
                )
            if p > 53:
                raise _err(
                    InvalidParameterValue,
                    "precision for type float must be less than 54 bits",
                    node,
                )
            return SqlType(S.FLOAT32 if p <= 24 else S.FLOAT64)  # float(1..24) is real
        if kind is exp.DataType.Type.VARCHAR and params:
            (n,) = params
            if n < 1:
                raise _err(
                    InvalidParameterValue, "length for type varchar must be at least 1", node
                )
            return SqlType(S.STRING, n)
        if kind is exp.DataType.Type.DECIMAL and params:
            if len(params) > 2:
                raise _err(InvalidParameterValue, "invalid NUMERIC type modifier", node)
            p, s = params[0], params[1] if len(params) > 1 else 0
            if not 1 <= p <= 1000:
                raise _err(
                    InvalidParameterValue,
                    f"NUMERIC precision {p} must be between 1 and 1000",
                    node,
                )
            if not 0 <= s <= p:
                raise _err(
                    InvalidParameterValue,
                    f"NUMERIC scale {s} must be between 0 and precision {p}",
                    node,
                )
            return SqlType(S.NUMERIC, typmod=(p, s))
        if kind is exp.DataType.Type.TIMESTAMP and params:
            (p,) = params
            if p != 6:
                raise _unsupported(f"type {shown} (timestamps keep microseconds)", node)
            return SqlType(S.TIMESTAMP)
        t = _TYPES.get(kind)
        if t is not None and not params:
            return SqlType(t)
        if kind is exp.DataType.Type.USERDEFINED:
            name = str(node.args.get("kind") or node.sql()).lower()
            named = {
                "int64": S.INT64,
                "float64": S.FLOAT64,
                "string": S.STRING,
                "int32": S.INT32,
                "int16": S.INT16,
                "float32": S.FLOAT32,
            }.get(name)
            if named is not None:
                return SqlType(named)
    shown = node.sql(dialect="postgres").lower() if isinstance(node, exp.Expression) else node
    raise _unsupported(f"type {shown}", node)


def sql_type(node: Any) -> ScalarType:
    """The scalar type a SQL type name stands for (see :func:`sql_type_of`)."""
    return sql_type_of(node).scalar


# -- relations ------------------------------------------------------------------------------


def _typed(plan: Plan, node: Any = None) -> Schema:
    try:
        return typecheck(plan)
    except PlanError as e:
        raise _err(SqlTypeError, str(e), node) from None


@dataclass(frozen=True)
class Lowered:
    """A lowered query: ``plan`` (its first ``len(names)`` columns are the output, then any
    hidden ``ORDER BY`` columns), the output's names and types, and its ordering and range."""

    plan: Plan
    names: tuple[str, ...]
    types: tuple[ColumnType, ...]
    order_by: tuple[ColumnOrder, ...] = ()
    limit: int | None = None
    offset: int = 0
    unknown: tuple[bool, ...] = ()
    """Per output column, whether it is an untyped NULL or string literal (``SELECT NULL``,
    ``SELECT 'a'``): a set operation gives it the other operand's type, as PostgreSQL does."""

    @property
    def arity(self) -> int:
        return len(self.names)

    def is_unknown(self, i: int) -> bool:
        return i < len(self.unknown) and self.unknown[i]

    @property
    def schema(self) -> Schema:
        return Schema(tuple(Column(n, t) for n, t in zip(self.names, self.types, strict=True)))

    def _hidden(self) -> bool:
        return _typed(self.plan).arity != self.arity

    def finishing(self) -> RowSetFinishing:
        """How a peek of :attr:`plan` orders, limits and projects its rows."""
        project = tuple(range(self.arity)) if self._hidden() else None
        return RowSetFinishing(self.order_by, self.limit, self.offset, project)

    def relation(self) -> Plan:
        """The query as a collection (a view's plan): ``LIMIT``/``OFFSET`` as a ``TopK``; a bare
        ``ORDER BY`` orders nothing in a collection and is dropped."""
        plan = self.plan
        if self.limit is not None or self.offset:
            plan = TopK(plan, (), self.order_by, self.limit, self.offset)
        if self._hidden():
            plan = Project(plan, tuple(range(self.arity)))
        return _renamed(plan, self.names)


def _renamed(plan: Plan, names: Sequence[str]) -> Plan:
    """``plan`` with its columns called ``names`` (a Map of the columns and a Project if needed)."""
    schema = _typed(plan)
    if tuple(schema.names) == tuple(names):
        return plan
    n = schema.arity
    mapped = Map(plan, tuple(ColumnRef(i) for i in range(n)), tuple(names))
    return Project(mapped, tuple(range(n, 2 * n)))


class OuterRows(Protocol):
    """What a correlated subquery's body joins in front of its ``FROM`` (``_scope.Outer``)."""

    @property
    def plan(self) -> Plan: ...

    @property
    def columns(self) -> tuple[Any, ...]: ...


@dataclass
class _Ctx:
    """What lowering a query carries: the catalog, the statement's parameters, the CTEs in
    scope, and ``query``, the lowering of a query itself (``lower._query``), which a
    subquery in FROM calls back into; ``outer`` while lowering a correlated subquery's body
    (:mod:`._subquery`): its ``SELECT`` joins the enclosing query's columns in front."""

    catalog: SqlCatalog
    params: Sequence[Any]
    query: Callable[[Any, _Ctx], Lowered]
    ctes: dict[str, Lowered] = field(default_factory=dict)
    outer: OuterRows | None = None
    uses: dict[int, frozenset[tuple[object, ...]]] = field(default_factory=dict)
    """Per subquery body (``id`` of its node), which enclosing columns it refers to (as
    :func:`._subquery.signature`): learnt once, not again at every lowering around it."""
