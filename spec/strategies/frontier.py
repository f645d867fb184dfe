"""Hypothesis strategies for times, frontiers, updates, change batches and read policies.

Two kinds of timestamp are generated: ``"int"`` (total order) and
``"product"`` (:class:`Product` of two ints, a partial order). A property that
should hold for any timestamp is best checked over both::

    @pytest.mark.parametrize("kind", TIME_KINDS)
    @given(data=st.data())
    def test_meet_is_below(kind, data):
        a = data.draw(antichains(times(kind)))
        b = data.draw(antichains(times(kind)))
        assert a.meet(b) <= a

Inputs default to small components (``0..6``) so that generated times often
coincide or compare; laws that quantify over "every time" should probe a
larger range (:func:`probe_times`, ``0..12``) so edges do not truncate them.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, Literal, TypeAlias, TypeVar

from hypothesis import strategies as st

from ..frontier import (
    Antichain,
    ChangeBatch,
    LagWriteFrontier,
    Multiple,
    MutableAntichain,
    NoPolicy,
    Product,
    ReadPolicy,
    Row,
    StepBack,
    Update,
    ValidFrom,
)

__all__ = [
    "INPUT_MAX",
    "PROBE_MAX",
    "TIME_KINDS",
    "TimeKind",
    "antichains",
    "change_batches",
    "changes",
    "int_times",
    "mutable_antichains",
    "nonempty_antichains",
    "probe_times",
    "product_times",
    "read_policies",
    "small_rows",
    "times",
    "updates",
    "write_frontiers",
]

TimeKind: TypeAlias = Literal["int", "product"]
"""Which timestamp type a strategy generates."""

TIME_KINDS: tuple[TimeKind, ...] = ("int", "product")
"""Every kind of timestamp tidegate ships, for ``pytest.mark.parametrize``."""

INPUT_MAX = 6
"""Default largest component of generated input times."""

PROBE_MAX = 12
"""Default largest component of probe times (see the module docstring)."""

K = TypeVar("K", bound=Hashable)


def int_times(max_value: int = INPUT_MAX) -> st.SearchStrategy[int]:
    """Integer timestamps in ``0..max_value``."""
    return st.integers(min_value=0, max_value=max_value)


def product_times(max_value: int = INPUT_MAX) -> st.SearchStrategy[Product]:
    """``Product(outer, inner)`` timestamps with both components in ``0..max_value``."""
    return st.builds(Product, int_times(max_value), int_times(max_value))


def times(kind: TimeKind = "int", max_value: int = INPUT_MAX) -> st.SearchStrategy[Any]:
    """Timestamps of one ``kind`` (``"int"`` or ``"product"``), components in ``0..max_value``.

    Never mixes kinds: times of different kinds are not comparable.
    """
    if kind == "int":
        return int_times(max_value)
    if kind == "product":
        return product_times(max_value)
    raise ValueError(f"unknown time kind {kind!r}; expected one of {TIME_KINDS}")


def probe_times(kind: TimeKind = "int", max_value: int = PROBE_MAX) -> st.SearchStrategy[Any]:
    """Times over a wider range than the inputs, for laws quantified over all times."""
    return times(kind, max_value)


def antichains(
    times: st.SearchStrategy[Any] | None = None, *, min_size: int = 0, max_size: int = 4
) -> st.SearchStrategy[Antichain]:
    """Antichains built from up to ``max_size`` drawn times (default: :func:`int_times`).

    The result holds the minimal elements of the drawn times, so it may be
    smaller than drawn; with ``min_size=0`` the empty antichain ``[]`` (the
    top frontier) is included.
    """
    elems = int_times() if times is None else times
    return st.lists(elems, min_size=min_size, max_size=max_size).map(Antichain)


def nonempty_antichains(
    times: st.SearchStrategy[Any] | None = None, *, max_size: int = 4
) -> st.SearchStrategy[Antichain]:
    """Antichains with at least one element (never the top ``[]``)."""
    return antichains(times, min_size=1, max_size=max_size)


def write_frontiers(max_value: int = INPUT_MAX) -> st.SearchStrategy[Antichain]:
    """Int uppers as a collection reports them: ``[u]`` for ``u`` in ``0..max_value``, or ``[]``."""
    return st.one_of(st.just(Antichain.empty()), int_times(max_value).map(Antichain.from_elem))


def small_rows(max_value: int = 3, width: int = 1) -> st.SearchStrategy[Row]:
    """Rows for :func:`updates`: tuples of ``width`` ints in ``0..max_value``.

    Few distinct rows, so updates collide often. (Schema-typed rows are
    :func:`tidegate.spec.strategies.plan.schema_rows`.)
    """
    return st.tuples(*(st.integers(min_value=0, max_value=max_value) for _ in range(width)))


def updates(
    times: st.SearchStrategy[Any] | None = None,
    rows: st.SearchStrategy[Row] | None = None,
    *,
    min_diff: int = -3,
    max_diff: int = 3,
    max_size: int = 20,
) -> st.SearchStrategy[list[Update]]:
    """Lists of differential updates ``(row, time, diff)``; diffs may be zero or negative.

    Defaults: rows from :func:`small_rows`, times from :func:`int_times`.
    """
    r = small_rows() if rows is None else rows
    t = int_times() if times is None else times
    diffs = st.integers(min_value=min_diff, max_value=max_diff)
    return st.lists(st.tuples(r, t, diffs), max_size=max_size)


def changes(
    keys: st.SearchStrategy[K] | None = None,
    *,
    min_delta: int = -3,
    max_delta: int = 3,
    max_size: int = 20,
) -> st.SearchStrategy[list[tuple[K, int]]]:
    """Lists of raw ``(key, delta)`` pairs (default keys: :func:`int_times`); deltas may be 0."""
    k: st.SearchStrategy[Any] = int_times() if keys is None else keys
    deltas = st.integers(min_value=min_delta, max_value=max_delta)
    return st.lists(st.tuples(k, deltas), max_size=max_size)


def change_batches(
    keys: st.SearchStrategy[K] | None = None, *, max_size: int = 20
) -> st.SearchStrategy[ChangeBatch[K]]:
    """Change batches built from :func:`changes` (zero sums already dropped)."""
    return changes(keys, max_size=max_size).map(ChangeBatch)


def mutable_antichains(
    times: st.SearchStrategy[Any] | None = None, *, max_size: int = 10
) -> st.SearchStrategy[MutableAntichain]:
    """Mutable antichains after one batch of :func:`changes` (counts may be negative)."""

    def build(cs: list[tuple[Any, int]]) -> MutableAntichain:
        m = MutableAntichain()
        m.update_iter(cs)
        return m

    return changes(times, max_size=max_size).map(build)


def read_policies(
    kind: TimeKind = "int", *, max_lag: int = 20, max_granularity: int = 10, max_depth: int = 2
) -> st.SearchStrategy[ReadPolicy]:
    """Read policies evaluable at uppers of ``kind``.

    Ints: ``NoPolicy``, ``ValidFrom``, ``LagWriteFrontier`` (lag ``0..max_lag``,
    granularity ``1..max_granularity``), ``StepBack`` and nested ``Multiple``.
    Products: the constant policies and ``Multiple`` only (lag and step-back
    are defined for ints alone).
    """
    frontiers = antichains(times(kind))
    leaves: list[st.SearchStrategy[ReadPolicy]] = [
        st.builds(NoPolicy, frontiers),
        st.builds(ValidFrom, frontiers),
    ]
    if kind == "int":
        leaves.append(
            st.builds(
                LagWriteFrontier,
                st.integers(min_value=0, max_value=max_lag),
                st.integers(min_value=1, max_value=max_granularity),
            )
        )
        leaves.append(st.just(StepBack()))
    base: st.SearchStrategy[ReadPolicy] = st.one_of(leaves)
    return st.recursive(
        base,
        lambda inner: st.lists(inner, max_size=3).map(Multiple),
        max_leaves=2**max_depth + 1,
    )
