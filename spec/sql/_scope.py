"""Scopes: the columns a name in a query can refer to, and how a name is resolved."""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass, field
from typing import Any

from ..errors import (
    AmbiguousColumn,
    UndefinedColumn,
    UndefinedObject,
)
from ..plan import Column, ColumnType, Plan, Schema
from ._common import _err

# -- scopes ---------------------------------------------------------------------------------


@dataclass(eq=False)
class OuterRef:
    """Marks a column of an enclosing query that a subquery's body sees (see
    :mod:`._subquery`): ``level`` 1 for the query just outside, 2 for the one outside that, ...;
    ``hidden`` as the column was there; ``used`` once a name resolves to it (and to its
    ``parent``, the same column one level further out, so every level between learns it is
    correlated)."""

    level: int
    hidden: bool
    parent: OuterRef | None = None
    used: bool = False
    sig: tuple[object, ...] = ()
    """Which column of the enclosing relation this is, stably across lowerings of it: see
    :func:`._subquery.signature`."""

    def use(self) -> None:
        ref: OuterRef | None = self
        while ref is not None:
            ref.used = True
            ref = ref.parent


@dataclass(frozen=True)
class ScopeColumn:
    """A column a name can refer to: ``qualifier.name`` (``hidden`` from ``*`` and bare names;
    ``outer`` if it belongs to an enclosing query: a name resolves to it only if no column of a
    nearer level has that name)."""

    qualifier: str | None
    name: str
    type: ColumnType
    hidden: bool = False
    outer: OuterRef | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Scope:
    """The columns of a relation being bound, in plan order."""

    columns: tuple[ScopeColumn, ...]

    @staticmethod
    def of(schema: Schema, qualifier: str | None) -> Scope:
        return Scope(tuple(ScopeColumn(qualifier, c.name, c.type) for c in schema.columns))

    def concat(self, other: Scope) -> Scope:
        return Scope(self.columns + other.columns)

    def retyped(self, schema: Schema) -> Scope:
        return Scope(
            tuple(
                dataclasses.replace(c, type=s.type)
                for c, s in zip(self.columns, schema.columns, strict=True)
            )
        )

    def schema(self) -> Schema:
        return Schema(tuple(Column(c.name, c.type) for c in self.columns))

    def resolve(self, name: str, qualifier: str | None, node: Any) -> int:
        """The position of column ``[qualifier.]name`` [UndefinedColumn, AmbiguousColumn]: in
        this query's own columns, else in the nearest enclosing query's that has it."""
        levels = sorted({c.outer.level for c in self.columns if c.outer is not None})
        if not levels:
            return self._resolve(name, qualifier, node)
        first: Exception | None = None
        for level in (0, *levels):
            at = [
                i
                for i, c in enumerate(self.columns)
                if (c.outer.level if c.outer is not None else 0) == level
            ]
            part = Scope(
                tuple(
                    dataclasses.replace(
                        self.columns[i],
                        hidden=ref.hidden if (ref := self.columns[i].outer) else False,
                        outer=None,
                    )
                    if self.columns[i].outer is not None
                    else self.columns[i]
                    for i in at
                )
            )
            try:
                pos = at[part._resolve(name, qualifier, node)]
            except (UndefinedColumn, UndefinedObject) as e:
                first = first or e
                continue
            ref = self.columns[pos].outer
            if ref is not None:
                ref.use()
            return pos
        assert first is not None
        raise first

    def _resolve(self, name: str, qualifier: str | None, node: Any) -> int:

        def matches(fold: bool) -> list[int]:
            def eq(a: str | None, b: str | None) -> bool:
                if a is None or b is None:
                    return a == b
                return a.lower() == b.lower() if fold else a == b

            return [
                i
                for i, c in enumerate(self.columns)
                if eq(c.name, name)
                and (
                    (qualifier is None and not c.hidden)
                    or (qualifier is not None and eq(c.qualifier, qualifier))
                )
            ]

        hits = matches(False) or matches(True)
        shown = f"{qualifier}.{name}" if qualifier else name
        if len(hits) == 1:
            return hits[0]
        if len(hits) > 1:
            raise _err(AmbiguousColumn, f'column reference "{shown}" is ambiguous', node)
        if qualifier is not None and not any(
            c.qualifier is not None and c.qualifier.lower() == qualifier.lower()
            for c in self.columns
        ):
            raise _err(
                UndefinedObject,
                f'missing FROM-clause entry for table "{qualifier}"',
                node,
            )
        candidates = [
            f"{c.qualifier}.{c.name}" if c.qualifier and qualifier else c.name
            for c in self.columns
            if not c.hidden
        ]
        near = difflib.get_close_matches(shown, candidates, n=1, cutoff=0.6)
        hint = f'Perhaps you meant to reference the column "{near[0]}".' if near else None
        raise _err(UndefinedColumn, f'column "{shown}" does not exist', node, hint)


@dataclass(frozen=True)
class Outer:
    """What a correlated subquery's body joins in front of its ``FROM``: ``plan``, the distinct
    rows of the enclosing query's columns it may refer to, and their ``columns`` (marked
    :attr:`ScopeColumn.outer`)."""

    plan: Plan
    columns: tuple[ScopeColumn, ...]


@dataclass(frozen=True)
class Rel:
    """A bound relation: a plan and the scope of its columns."""

    plan: Plan
    scope: Scope
