"""Scopes: the columns a name in a query can refer to, and how a name is resolved."""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass
from typing import Any

from ..errors import (
    AmbiguousColumn,
    UndefinedColumn,
    UndefinedObject,
)
from ..plan import Column, ColumnType, Plan, Schema
from ._common import _err

# -- scopes ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScopeColumn:
    """A column a name can refer to: ``qualifier.name`` (``hidden`` from ``*`` and bare names)."""

    qualifier: str | None
    name: str
    type: ColumnType
    hidden: bool = False


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
        """The position of column ``[qualifier.]name`` [UndefinedColumn, AmbiguousColumn]."""

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
class Rel:
    """A bound relation: a plan and the scope of its columns."""

    plan: Plan
    scope: Scope
