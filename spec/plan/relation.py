"""Relational operators: the plan IR.

A plan is a tree of these frozen dataclasses (a DAG once ``Let`` bindings are
shared). Each denotes a collection: a multiset of rows that changes over
time. Columns are referred to by position; :func:`~.typecheck.typecheck`
computes every node's :class:`~.schema.Schema`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeAlias

from ..errors import InvalidPlan
from ..frontier import Row
from ..ids import GlobalId
from ..protocol.types import ColumnOrder
from .scalar import ScalarExpr
from .schema import Schema

__all__ = [
    "AggFunc",
    "Aggregate",
    "ArrangeBy",
    "Constant",
    "Distinct",
    "Filter",
    "Get",
    "Join",
    "JoinKind",
    "Let",
    "LetRef",
    "Map",
    "Negate",
    "Plan",
    "Project",
    "Reduce",
    "TemporalFilter",
    "TemporalOp",
    "Threshold",
    "TopK",
    "Union",
    "Window",
    "WindowBound",
    "WindowBoundKind",
    "WindowFrame",
    "WindowFunc",
    "WindowFuncKind",
    "children",
]


@dataclass(frozen=True, slots=True)
class Get:
    """The collection ``id`` (an import, or another object of the same dataflow) with its schema."""

    id: GlobalId
    schema: Schema


@dataclass(frozen=True, slots=True)
class Constant:
    """A fixed collection: each ``(row, diff)`` present at every time."""

    rows: tuple[tuple[Row, int], ...]
    schema: Schema


@dataclass(frozen=True, slots=True)
class Map:
    """Append one column per expression (each may use the columns appended before it)."""

    input: Plan
    exprs: tuple[ScalarExpr, ...]
    names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Filter:
    """Keep rows for which every predicate is ``true`` (NULL and ``false`` drop the row)."""

    input: Plan
    predicates: tuple[ScalarExpr, ...]


class TemporalOp(StrEnum):
    """How ``mz_now()`` is compared with a bound: ``mz_now() <op> bound``."""

    EQ = "="
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="


@dataclass(frozen=True, slots=True)
class TemporalFilter:
    """Keep each row at the times ``t`` at which every ``mz_now() <op> bound`` holds (a
    temporal filter, Materialize's ``mz_now()`` in ``WHERE``).

    Each bound is evaluated on the row, an ``int64`` (milliseconds, as times are) or a
    ``timestamp`` (its milliseconds since 1970-01-01, rounded down); a negative value
    is the error "mz_timestamp out of range". Together the predicates give the row a
    validity interval ``[lower, upper)`` of times: ``lower`` the greatest of the
    ``>=``/``=`` bounds and of the ``>`` bounds plus one, ``upper`` the least of the
    ``<`` bounds and of the ``<=``/``=`` bounds plus one (unbounded without them). A
    row whose bound is NULL is never kept. At time ``t`` the output is the input's rows
    whose interval contains ``t``; incrementally, an update ``(row, t, d)`` becomes
    ``(row, max(t, lower), d)`` and ``(row, max(t, upper), -d)`` (nothing if
    ``max(t, lower) >= upper``), so the row leaves the output when time reaches
    ``upper`` with no new input.
    """

    input: Plan
    predicates: tuple[tuple[TemporalOp, ScalarExpr], ...]


@dataclass(frozen=True, slots=True)
class Project:
    """Keep the listed columns, in that order (repeats allowed)."""

    input: Plan
    columns: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Union:
    """The multiset sum of inputs of one shape (names from the first input)."""

    inputs: tuple[Plan, ...]


@dataclass(frozen=True, slots=True)
class Negate:
    """Every multiplicity negated (``Union(a, Negate(b))`` is ``a - b``)."""

    input: Plan


class JoinKind(StrEnum):
    INNER = "inner"
    LEFT = "left"
    RIGHT = "right"
    FULL = "full"


@dataclass(frozen=True, slots=True)
class Join:
    """Equi-join of ``inputs`` over their concatenated columns.

    Each class in ``equivalences`` lists column positions (of the concatenated
    row) that must all be non-NULL and every two of them equal, compared as
    SQL compares them: an int64 with a float64 as float64 (``2**62 + 1``
    equals ``2.0**62``), columns of one type exactly. An outer join (``LEFT``,
    ``RIGHT``, ``FULL``) needs exactly two inputs and every class must name
    columns of both. ``LEFT`` is defined as ``inner + pad(left - semijoin)``,
    where ``semijoin`` is the left rows that match a distinct right key (of
    positive multiplicity), and ``pad`` appends NULLs; ``RIGHT`` is the mirror
    image (the right input's unmatched rows, with NULLs in the left columns);
    ``FULL`` is ``inner`` plus both paddings (see :mod:`.lower`). The output
    columns are always the left input's, then the right one's; the padded side's
    columns are nullable. Multiplicities follow from the definition, also for
    negative ones: an unmatched row keeps its multiplicity.
    """

    inputs: tuple[Plan, ...]
    equivalences: tuple[tuple[int, ...], ...] = ()
    kind: JoinKind = JoinKind.INNER


class AggFunc(StrEnum):
    COUNT = "count"
    SUM = "sum"
    MIN = "min"
    MAX = "max"
    AVG = "avg"
    BOOL_AND = "bool_and"
    BOOL_OR = "bool_or"
    STRING_AGG = "string_agg"


@dataclass(frozen=True, slots=True)
class Aggregate:
    """One aggregate of a ``Reduce``. ``column=None`` only for ``count(*)``.

    Over a group's accumulated rows (row multiplicity ``c``, non-zero):
    ``count`` = Σc over rows whose value is non-NULL (all rows for
    ``count(*)``); ``sum`` = Σ v·c over those rows, NULL if there are none
    (float sums are exact, rounded once); ``avg`` = sum / count as float64,
    NULL if there are no such rows or the count is 0; ``min``/``max`` over
    values whose total multiplicity is positive, NULL if none. With
    ``distinct``, each value of positive total multiplicity counts once. A
    ``sum`` beyond its type (int64, or float64 once rounded) or an ``avg``
    beyond float64 makes the group one evaluation error ("integer out of
    range", "float out of range") instead of a row, like any other overflow.

    ``bool_and``/``bool_or`` (of a bool column) are ``min``/``max`` with
    ``false < true``: over values of positive total multiplicity, NULL if
    none. ``string_agg`` (of a string column, with ``separator``) joins the
    values of positive total multiplicity, each repeated that many times (once
    with ``distinct``), in ascending code point order -- SQL leaves the order
    to the engine unless the call has an ``ORDER BY``; tidegate always sorts,
    so the result is deterministic -- and is NULL if there are none.
    ``separator`` is set for ``string_agg`` only.
    """

    func: AggFunc
    column: int | None = None
    distinct: bool = False
    separator: str | None = None


@dataclass(frozen=True, slots=True)
class Reduce:
    """Group by ``group_key`` columns; output is the key columns then one column per aggregate.

    A group is present while its accumulated input is non-empty.
    """

    input: Plan
    group_key: tuple[int, ...]
    aggregates: tuple[Aggregate, ...]


@dataclass(frozen=True, slots=True)
class Distinct:
    """Each row with positive multiplicity, once."""

    input: Plan


@dataclass(frozen=True, slots=True)
class Threshold:
    """Rows with positive multiplicity, with that multiplicity; others dropped."""

    input: Plan


@dataclass(frozen=True, slots=True)
class TopK:
    """Per group, rows ``offset .. offset+limit`` in ``order_by`` order (``limit=None``: all).

    Only positive multiplicities count; a row of multiplicity ``c`` fills ``c``
    slots. Ties are broken by the whole row, ascending in ``row_sort_key``
    order, so the result is deterministic.
    """

    input: Plan
    group_key: tuple[int, ...] = ()
    order_by: tuple[ColumnOrder, ...] = ()
    limit: int | None = None
    offset: int = 0


class WindowFuncKind(StrEnum):
    ROW_NUMBER = "row_number"
    RANK = "rank"
    DENSE_RANK = "dense_rank"
    LAG = "lag"
    LEAD = "lead"
    FIRST_VALUE = "first_value"
    LAST_VALUE = "last_value"
    AGGREGATE = "aggregate"


class WindowBoundKind(StrEnum):
    UNBOUNDED_PRECEDING = "unbounded_preceding"
    PRECEDING = "preceding"
    CURRENT_ROW = "current_row"
    FOLLOWING = "following"
    UNBOUNDED_FOLLOWING = "unbounded_following"


@dataclass(frozen=True, slots=True)
class WindowBound:
    """One end of a frame; ``offset`` (a non-negative number) only for ``PRECEDING``/``FOLLOWING``."""

    kind: WindowBoundKind
    offset: int | float | None = None


@dataclass(frozen=True, slots=True)
class WindowFrame:
    """``ROWS`` (``range=False``: offsets count rows) or ``RANGE`` (offsets are distances of the
    single ``order_by`` column's value; ``CURRENT ROW`` means the row's peers) ``BETWEEN start
    AND end``. The default, SQL's, is ``RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW``."""

    range: bool = True
    start: WindowBound = WindowBound(WindowBoundKind.UNBOUNDED_PRECEDING)
    end: WindowBound = WindowBound(WindowBoundKind.CURRENT_ROW)


@dataclass(frozen=True, slots=True)
class WindowFunc:
    """One function of a :class:`Window`, computed for each row of its partition.

    ``row_number``, ``rank``, ``dense_rank``: the row's position, its first peer's
    position, its peer group's number (from 1). ``lag``/``lead``: ``column`` of the
    row ``offset`` rows before/after (a negative offset looks the other way), else
    the ``default`` column of the current row (NULL if ``default`` is None).
    ``first_value``/``last_value``: ``column`` of the frame's first/last row (NULL
    if the frame is empty). ``aggregate``: ``aggregate`` (a :class:`Aggregate`
    without ``distinct``) over the frame's rows, each slot once. The ranking
    functions and ``lag``/``lead`` ignore the frame.
    """

    kind: WindowFuncKind
    column: int | None = None
    offset: int = 1
    default: int | None = None
    aggregate: Aggregate | None = None
    frame: WindowFrame = WindowFrame()


@dataclass(frozen=True, slots=True)
class Window:
    """The input's rows, each with one more column per function of ``funcs``.

    Rows are partitioned by ``partition_key`` and, within a partition, ordered
    by ``order_by``, ties broken by the whole row as in :class:`TopK` (peers,
    for ``rank`` and ``RANGE`` frames, are rows equal in ``order_by`` alone).
    Only positive multiplicities count: a row of multiplicity ``c`` fills ``c``
    consecutive slots, each its own output row (``row_number`` 1, 2, ... for
    duplicates). A partition whose aggregate overflows outputs one error
    instead of its rows. The output of a partition depends on that partition
    only, so executors recompute just the partitions a change touches.
    """

    input: Plan
    partition_key: tuple[int, ...] = ()
    order_by: tuple[ColumnOrder, ...] = ()
    funcs: tuple[WindowFunc, ...] = ()


@dataclass(frozen=True, slots=True)
class ArrangeBy:
    """The input, indexed by each key in ``keys`` (semantically the identity)."""

    input: Plan
    keys: tuple[tuple[int, ...], ...]


@dataclass(frozen=True, slots=True)
class Let:
    """Bind ``value`` to ``name`` within ``body``; each :class:`LetRef` shares one computation."""

    name: str
    value: Plan
    body: Plan


@dataclass(frozen=True, slots=True)
class LetRef:
    """The value bound to ``name`` by an enclosing :class:`Let`."""

    name: str


Plan: TypeAlias = (
    Get
    | Constant
    | Map
    | Filter
    | TemporalFilter
    | Project
    | Union
    | Negate
    | Join
    | Reduce
    | Distinct
    | Threshold
    | TopK
    | Window
    | ArrangeBy
    | Let
    | LetRef
)


def children(plan: Plan) -> tuple[Plan, ...]:
    """The direct inputs of ``plan`` (for ``Let``: the value, then the body)."""
    if isinstance(plan, Union | Join):
        return plan.inputs
    if isinstance(plan, Let):
        return (plan.value, plan.body)
    if isinstance(plan, Get | Constant | LetRef):
        return ()
    if isinstance(
        plan,
        Map
        | Filter
        | TemporalFilter
        | Project
        | Negate
        | Reduce
        | Distinct
        | Threshold
        | TopK
        | Window
        | ArrangeBy,
    ):
        return (plan.input,)
    raise InvalidPlan(f"not a plan node: {plan!r} ({type(plan).__name__})")


def with_children(plan: Plan, new: tuple[Plan, ...]) -> Plan:
    """``plan`` with its direct inputs replaced by ``new`` (in the order of :func:`children`)."""
    if len(new) != len(children(plan)):
        raise InvalidPlan(f"{type(plan).__name__} has {len(children(plan))} inputs, got {len(new)}")
    if isinstance(plan, Union | Join):
        return dataclasses.replace(plan, inputs=new)
    if isinstance(plan, Let):
        return dataclasses.replace(plan, value=new[0], body=new[1])
    if isinstance(plan, Get | Constant | LetRef):
        return plan
    return dataclasses.replace(plan, input=new[0])


def replace_gets(plan: Plan, ids: Mapping[GlobalId, GlobalId]) -> Plan:
    """``plan`` reading collection ``ids[g]`` wherever it read ``g`` (other reads unchanged).

    >>> from tidegate.spec.plan import Schema
    >>> p = Filter(Get(GlobalId.user(1), Schema.of(("x", "int64"))), ())
    >>> replace_gets(p, {GlobalId.user(1): GlobalId.user(7)}).input.id
    GlobalId.parse('u7')
    """
    if isinstance(plan, Get):
        target = ids.get(plan.id)
        return plan if target is None else dataclasses.replace(plan, id=target)
    inputs = children(plan)
    if not inputs:
        return plan
    return with_children(plan, tuple(replace_gets(c, ids) for c in inputs))
