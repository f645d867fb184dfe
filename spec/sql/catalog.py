"""What the SQL binder needs to know about the catalog: a small protocol, and a dict-backed one.

The binder never touches the runtime: it asks a :class:`SqlCatalog` for names
(:meth:`~SqlCatalog.resolve`) and, for "did you mean" hints, for every name
(:meth:`~SqlCatalog.names`). The runtime implements it over the durable
catalog (plus the SQL layer's views); tests use :class:`DictCatalog`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, Protocol, TypeAlias

from ..ids import GlobalId
from ..plan import Plan, Schema

__all__ = ["CatalogItem", "DictCatalog", "ObjectKind", "SqlCatalog"]

ObjectKind: TypeAlias = Literal["table", "view", "materialized-view", "index", "source", "sink"]


@dataclass(frozen=True, slots=True)
class CatalogItem:
    """A named object: its id, row schema and kind.

    ``plan`` is a view's definition (a ``view`` has no collection of its own:
    a query reading it reads its plan) or an index's / materialized view's
    plan when known. ``on`` and ``keys`` describe an index. A ``source`` is
    read like a table (it is written by its upstream); ``detail`` says what
    kind of source (``load-generator``, ``postgres``, ``progress``,
    ``system``) or sink (``iceberg``). A ``sink`` cannot be read: its
    ``schema`` is that of what it writes out.
    """

    name: str
    id: GlobalId
    schema: Schema
    kind: ObjectKind
    plan: Plan | None = None
    on: GlobalId | None = None
    keys: tuple[int, ...] = ()
    detail: str | None = None
    max_lengths: tuple[int | None, ...] = ()
    """A table's ``varchar(n)`` limits, column by column (empty: none)."""
    typmods: tuple[tuple[int, int] | None, ...] = ()
    """A table's ``numeric(p, s)`` modifiers, column by column (empty: none)."""
    cluster: str | None = None
    """The cluster that maintains an index or materialized view."""


class SqlCatalog(Protocol):
    """Names to objects, for the binder."""

    def resolve(self, name: str) -> CatalogItem | None:
        """The object called ``name`` (or with id text ``name``), or None."""
        ...

    def items(self) -> Iterable[CatalogItem]:
        """Every object (for suggestions and SHOW)."""
        ...


class DictCatalog:
    """A :class:`SqlCatalog` over a fixed set of items (tests, examples)."""

    def __init__(self, items: Iterable[CatalogItem] | Mapping[str, CatalogItem] = ()) -> None:
        values = items.values() if isinstance(items, Mapping) else items
        self._items = {i.name: i for i in values}

    def add(self, item: CatalogItem) -> None:
        self._items[item.name] = item

    def resolve(self, name: str) -> CatalogItem | None:
        if name in self._items:
            return self._items[name]
        for i in self._items.values():
            if str(i.id) == name:
                return i
        return None

    def items(self) -> Iterable[CatalogItem]:
        return list(self._items.values())
