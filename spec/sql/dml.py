"""Writes: ``INSERT``, ``DELETE`` and ``UPDATE`` lowered to rows to append or plans to read.

A table is written only by appends of ``(row, diff)`` at one timestamp. So:

* ``INSERT ... VALUES``: the rows, each value assigned to its column's type
  (an integer to a float column, a string literal to a date, NULL where a
  column is left out);
* ``INSERT ... SELECT``: a plan whose rows are inserted, read once;
* ``DELETE ... WHERE c``: a plan of the rows to retract (``Filter(table, c)``);
* ``UPDATE ... SET ... WHERE c``: a plan of each matching row followed by its
  new value; the writer retracts the first half and inserts the second, at
  one timestamp.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from ..errors import (
    DuplicateColumn,
    NotNullViolation,
    PlanError,
    SqlSyntaxError,
    SqlTypeError,
    UndefinedColumn,
    UnsupportedSql,
    WrongObjectType,
)
from ..frontier import Row
from ..ids import GlobalId
from ..plan import Cast, ColumnRef, Filter, Get, Literal, Map, Plan, Project, ScalarExpr
from ..plan.schema import check_row
from ..plan.temporal import has_temporal_filter
from ._binder import ExprBinder
from ._common import _err, pg_type, position_of
from ._from import _resolve_object, constant_value
from ._scope import Scope
from ._texpr import _ASSIGNMENT_CASTS, assign
from .ast import DeleteStmt, InsertStmt, UpdateStmt
from .catalog import CatalogItem, SqlCatalog
from .lower import lower_query

__all__ = ["Write", "plan_delete", "plan_insert", "plan_update"]


@dataclass(frozen=True)
class Write:
    """What a write statement does to ``table``: append ``rows`` (each with diff 1), and/or
    read ``plan`` once and append its rows (``mode`` ``insert``), their retractions
    (``delete``), or, for ``update``, retract each row's first ``arity`` columns and insert the
    rest."""

    table: GlobalId
    arity: int
    rows: tuple[Row, ...] = ()
    plan: Plan | None = None
    mode: str = "insert"


def _table(catalog: SqlCatalog, name: str, node: Any, what: str) -> CatalogItem:
    item = _resolve_object(catalog, name, node)
    if item.kind != "table":
        raise WrongObjectType(
            f'cannot {what} "{name}": it is a {item.kind.replace("-", " ")}, not a table',
            position=position_of(node),
        )
    return item


def plan_insert(stmt: InsertStmt, catalog: SqlCatalog, params: Sequence[Any] = ()) -> Write:
    item = _table(catalog, stmt.table, None, "insert into")
    schema = item.schema
    names = list(schema.names)
    if stmt.columns is None:
        targets = list(range(len(names)))
    else:
        targets = []
        for c in stmt.columns:
            if c not in names:
                raise UndefinedColumn(f'column "{c}" of relation "{item.name}" does not exist')
            if names.index(c) in targets:
                raise DuplicateColumn(f'column "{c}" specified more than once')
            targets.append(names.index(c))
    for i, col in enumerate(schema.columns):
        if i not in targets and not col.type.nullable:
            raise NotNullViolation(
                f'null value in column "{col.name}" of relation "{item.name}" violates '
                "not-null constraint"
            )
    if isinstance(stmt.source, exp.Values):
        rows = []
        for r in stmt.source.expressions:
            items = list(r.expressions) if isinstance(r, exp.Tuple) else [r]
            if len(items) > len(targets):
                raise _err(SqlSyntaxError, "INSERT has more expressions than target columns", r)
            if len(items) < len(targets):
                raise _err(SqlSyntaxError, "INSERT has more target columns than expressions", r)
            row: list[Any] = [None] * len(names)
            for node, t in zip(items, targets, strict=True):
                col = schema.columns[t]
                row[t] = constant_value(node, col.type, params, f'column "{col.name}"')
            _check(tuple(row), schema, item.name, r)
            rows.append(tuple(row))
        return Write(item.id, schema.arity, rows=tuple(rows))
    lowered = lower_query(stmt.source, catalog, params)
    if lowered.arity != len(targets):
        more = "expressions" if lowered.arity > len(targets) else "target columns"
        raise SqlSyntaxError(
            f"INSERT has more {more} than {'target columns' if more == 'expressions' else 'expressions'}"
        )
    source = lowered.relation()
    if has_temporal_filter(source):  # as Materialize: a write happens at one time, once
        raise UnsupportedSql("calls to mz_now() in write statements are")
    exprs: list[ScalarExpr] = []
    for i, col in enumerate(schema.columns):
        if i in targets:
            k = targets.index(i)
            got = lowered.types[k]
            if got.scalar is col.type.scalar:
                exprs.append(ColumnRef(k))
            elif lowered.is_unknown(k) or (got.scalar, col.type.scalar) in _ASSIGNMENT_CASTS:
                # an untyped NULL or literal is read as the column's type
                exprs.append(Cast(ColumnRef(k), col.type.scalar))
            else:
                raise SqlTypeError(
                    f'column "{col.name}" is of type {pg_type(col.type.scalar)} but expression '
                    f"is of type {pg_type(got.scalar)}"
                )
        else:
            exprs.append(Literal(None, col.type.scalar))
    n = lowered.arity
    plan = Project(Map(source, tuple(exprs), tuple(names)), tuple(range(n, n + len(names))))
    return Write(item.id, schema.arity, plan=plan)


def _check(row: Row, schema: Any, table: str, node: Any) -> None:
    for v, c in zip(row, schema.columns, strict=True):
        if v is None and not c.type.nullable:
            raise _err(
                NotNullViolation,
                f'null value in column "{c.name}" of relation "{table}" violates not-null constraint',
                node,
            )
    try:
        check_row(row, schema)
    except PlanError as e:
        raise _err(SqlTypeError, str(e), node) from None


def _filtered(
    item: CatalogItem, where: Any, params: Sequence[Any], alias: str | None = None
) -> Plan:
    plan: Plan = Get(item.id, item.schema)
    if where is not None:
        binder = ExprBinder(Scope.of(item.schema, alias or item.name), params, context="WHERE")
        plan = Filter(plan, (binder.predicate(where, "WHERE"),))
    return plan


def plan_delete(stmt: DeleteStmt, catalog: SqlCatalog, params: Sequence[Any] = ()) -> Write:
    item = _table(catalog, stmt.table, None, "delete from")
    return Write(
        item.id,
        item.schema.arity,
        plan=_filtered(item, stmt.where, params, stmt.alias),
        mode="delete",
    )


def plan_update(stmt: UpdateStmt, catalog: SqlCatalog, params: Sequence[Any] = ()) -> Write:
    item = _table(catalog, stmt.table, None, "update")
    schema = item.schema
    names = list(schema.names)
    binder = ExprBinder(Scope.of(schema, stmt.alias or item.name), params, context="UPDATE")
    new: list[ScalarExpr] = [ColumnRef(i) for i in range(len(names))]
    seen: set[str] = set()
    for col, node in stmt.assignments:
        if col not in names:
            raise _err(
                UndefinedColumn, f'column "{col}" of relation "{item.name}" does not exist', node
            )
        if col in seen:
            raise _err(SqlSyntaxError, f'multiple assignments to same column "{col}"', node)
        seen.add(col)
        i = names.index(col)
        c = schema.columns[i]
        te = binder.bind(node)
        e = binder.folded(assign(te, c.type.scalar, node, f'column "{col}"'), node)
        if not c.type.nullable and (
            te.expr is None or (isinstance(e, Literal) and e.value is None)
        ):
            raise _err(
                NotNullViolation,
                f'null value in column "{col}" of relation "{item.name}" violates not-null constraint',
                node,
            )
        new[i] = e
    n = len(names)
    base = _filtered(item, stmt.where, params, stmt.alias)
    plan = Project(Map(base, tuple(new), tuple(f"new_{x}" for x in names)), tuple(range(2 * n)))
    return Write(item.id, n, plan=plan, mode="update")
