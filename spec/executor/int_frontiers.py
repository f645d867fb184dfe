"""Helpers shared by executors over int times: frontiers, install, feed and index peek checks.

Executors that only support totally ordered ``int`` times represent a frontier
by its single element, or ``None`` for the empty frontier (the top).
"""

from __future__ import annotations

import functools
from collections.abc import Container, Iterable, Mapping
from typing import Any, TypeAlias

from ..errors import (
    ArityMismatch,
    DuplicateExport,
    InputFrontierRegression,
    InvalidImport,
    InvalidInputRow,
    InvalidPlan,
    PeekNotReady,
    PeekOutOfRange,
    PlanError,
    UnsupportedTimestamp,
    UpdateBeforeFrontier,
)
from ..frontier import Antichain, Row, Update
from ..ids import GlobalId
from ..plan.ordering import check_finishing
from ..plan.schema import Schema, check_row, row_checker
from ..plan.typecheck import validate_dataflow
from ..protocol.types import DataflowDescription, RowSetFinishing

__all__ = [
    "Frontier",
    "check_feed",
    "check_index_peek",
    "check_install",
    "consolidate_changes",
    "frontier_le",
    "to_antichain",
    "to_frontier",
]

Frontier: TypeAlias = int | None
"""A frontier of int times: its single element, or ``None`` for the empty frontier."""


def to_frontier(a: Antichain, what: str, executor: str) -> Frontier:
    """``a`` as a :data:`Frontier` [UnsupportedTimestamp unless empty or one int]."""
    els = a.elements
    if not els:
        return None
    if len(els) != 1 or type(els[0]) is not int:
        raise UnsupportedTimestamp(f"{what}: the {executor} needs int times, got {a!r}")
    return int(els[0])


@functools.lru_cache(maxsize=1024)
def to_antichain(f: Frontier) -> Antichain:
    """``f`` as an :class:`Antichain` (cached: frontiers are read far more often than they move)."""
    return Antichain.empty() if f is None else Antichain.from_elem(f)


def frontier_le(a: Frontier, b: Frontier) -> bool:
    """Frontier ``a`` is not ahead of ``b`` (``None`` is the top)."""
    return b is None or (a is not None and a <= b)


def check_install(
    desc: DataflowDescription,
    exported: Container[GlobalId],
    index_sinces: Mapping[GlobalId, Frontier],
    executor: str,
) -> tuple[Frontier, Frontier, dict[GlobalId, Schema]]:
    """Check ``desc`` before an executor installs it: its as_of, until and every schema.

    ``exported`` holds the ids installed dataflows export, ``index_sinces`` the
    since of each installed index. The as_of must be set [InvalidPlan], the
    frontiers int ones [UnsupportedTimestamp], the plans valid (the spec's
    plan errors), no export already exported [DuplicateExport], every index
    import installed and not compacted past the as_of [InvalidImport].
    Nothing is changed.
    """
    if desc.as_of is None:
        raise InvalidPlan(f"dataflow {desc.debug_name!r} has no as_of")
    as_of = to_frontier(desc.as_of, "as_of", executor)
    until = to_frontier(desc.until, "until", executor)
    schemas = validate_dataflow(desc)
    for eid in desc.export_ids:
        if eid in exported:
            raise DuplicateExport(f"{eid} is already exported by an installed dataflow")
    for ix in desc.index_imports:
        if ix.id not in index_sinces:
            raise InvalidImport(f"index import {ix.id}: no such index is installed")
        since = index_sinces[ix.id]
        if as_of is not None and not frontier_le(since, as_of):
            raise InvalidImport(f"index import {ix.id}: compacted to {since}, beyond as_of {as_of}")
    for sk in desc.sink_exports:
        to_frontier(sk.up_to, f"sink {sk.id} up_to", executor)
    return as_of, until, schemas


def check_feed(
    input_id: GlobalId,
    updates: Iterable[Update],
    lower: Frontier,
    upper: Antichain,
    schema: Schema | None,
    executor: str,
) -> tuple[list[Update], Frontier]:
    """Check a feed of source ``input_id`` (upper so far ``lower``): the updates as a list, the new upper.

    The one statement of what an executor accepts from ``feed``: the new upper
    an int frontier not behind ``lower`` [UnsupportedTimestamp,
    InputFrontierRegression]; each update a ``(row, time, diff)`` tuple
    [InvalidInputRow] at a non-negative int time [UnsupportedTimestamp] not
    before ``lower`` [UpdateBeforeFrontier], with an int diff and, when
    ``schema`` is given, a row of it [InvalidInputRow]. Nothing is changed.
    """
    new_upper = to_frontier(upper, f"upper of {input_id}", executor)
    if not frontier_le(lower, new_upper):
        raise InputFrontierRegression(f"{input_id}: upper {upper} is behind {to_antichain(lower)}")
    batch = list(updates)
    fast_ok = row_checker(schema) if schema is not None else None
    for u in batch:
        if type(u) is not tuple or len(u) != 3:
            raise InvalidInputRow(f"{input_id}: {u!r} is not a (row, time, diff) update")
        row, t, d = u
        if type(t) is not int or t < 0:
            raise UnsupportedTimestamp(f"{input_id}: update time {t!r} is not a non-negative int")
        if lower is None or t < lower:
            raise UpdateBeforeFrontier(
                f"{input_id}: update at {t} but the upper was already {to_antichain(lower)}"
            )
        if type(d) is not int:
            raise InvalidInputRow(f"{input_id}: diff {d!r} is not an int")
        if fast_ok is not None and not fast_ok(row):
            try:
                check_row(row, schema or Schema(()), f"{input_id} row")
            except PlanError as e:
                raise InvalidInputRow(str(e)) from None
            raise InvalidInputRow(f"{input_id}: invalid row {row!r}")
    return batch, new_upper


def consolidate_changes(
    changes: Iterable[tuple[Any, int, int]],
) -> tuple[tuple[Any, int, int], ...]:
    """Sum the diffs of equal ``(data, time)`` pairs and drop zeros, in first-seen order."""
    acc: dict[tuple[Any, int], int] = {}
    for r, t, d in changes:
        k = (r, t)
        acc[k] = acc.get(k, 0) + d
    return tuple((r, t, d) for (r, t), d in acc.items() if d)


def check_index_peek(
    index_id: GlobalId,
    time: object,
    since: Frontier,
    upper: Frontier,
    key: tuple[int, ...],
    arity: int,
    finishing: RowSetFinishing | None,
    key_lookup: tuple[Row, ...] | None,
) -> RowSetFinishing:
    """Validate a peek of an index export; return the finishing to apply.

    Raises :class:`UnsupportedTimestamp`, :class:`PeekOutOfRange` (before the
    since), :class:`PeekNotReady` (not before the upper), :class:`ArityMismatch`
    (a lookup key of the wrong shape) or the finishing's own errors.
    """
    if type(time) is not int:
        raise UnsupportedTimestamp(f"peek time {time!r} is not an int")
    if not frontier_le(since, time):
        raise PeekOutOfRange(f"peek of {index_id} at {time}: compacted to {to_antichain(since)}")
    if upper is not None and upper <= time:
        raise PeekNotReady(f"peek of {index_id} at {time}: upper is {upper}")
    if key_lookup is not None:
        for k in key_lookup:
            if type(k) is not tuple or len(k) != len(key):
                raise ArityMismatch(f"key {k!r} does not match the index key {key}")
    finishing = finishing or RowSetFinishing()
    check_finishing(finishing, arity)
    return finishing
