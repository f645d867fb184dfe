"""Read policies: how far behind its write frontier a collection stays readable.

A policy maps a collection's write frontier (upper) to the since it *implies*
(its own read hold, the "implied capability"). The controllers re-evaluate it
whenever the upper advances or the policy changes, and move the implied hold
forward with :func:`apply_policy` -- never backward.

>>> LagWriteFrontier(lag=10, max_granularity=5).frontier(Antichain([27]))
Antichain([15])
>>> Multiple([ValidFrom(Antichain([4])), StepBack()]).frontier(Antichain([9]))
Antichain([4])
>>> Multiple([]).frontier(Antichain([9]))
Antichain([])
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass

from ..errors.frontier import InvalidReadPolicy
from .antichain import Antichain

__all__ = [
    "LagWriteFrontier",
    "Multiple",
    "NoPolicy",
    "ReadPolicy",
    "StepBack",
    "ValidFrom",
    "apply_policy",
    "lag_writes_by",
    "step_back",
]


class ReadPolicy(ABC):
    """A rule computing the since a collection's upper implies.

    Subclass it (as a frozen dataclass, so policies are hashable values) and
    implement :meth:`frontier`; it must be a pure function of the upper.
    """

    __slots__ = ()

    @abstractmethod
    def frontier(self, write_frontier: Antichain) -> Antichain:
        """The since implied by ``write_frontier``."""


def _check_antichain(value: object, what: str) -> Antichain:
    if not isinstance(value, Antichain):
        raise InvalidReadPolicy(f"{what} must be an Antichain, got {value!r}")
    return value


def _int_upper(write_frontier: Antichain, policy: ReadPolicy) -> int | None:
    """The single int element of an int upper (``None`` for ``[]``); other kinds are rejected."""
    _check_antichain(write_frontier, "write frontier")
    els = write_frontier.elements
    if not els:
        return None
    t = els[0]
    if len(els) != 1 or type(t) is not int:
        raise InvalidReadPolicy(
            f"{policy!r} applies to int timestamps only, got upper {write_frontier!r}"
        )
    return t


@dataclass(frozen=True, slots=True)
class NoPolicy(ReadPolicy):
    """No policy was set yet: the since stays at ``initial_since`` whatever the upper."""

    initial_since: Antichain

    def __post_init__(self) -> None:
        _check_antichain(self.initial_since, "NoPolicy.initial_since")

    def frontier(self, write_frontier: Antichain) -> Antichain:
        return self.initial_since


@dataclass(frozen=True, slots=True)
class ValidFrom(ReadPolicy):
    """Readable from ``frontier`` on, whatever the upper. ``ValidFrom([])`` releases the collection."""

    valid_from: Antichain

    def __init__(self, frontier: Antichain) -> None:
        object.__setattr__(self, "valid_from", _check_antichain(frontier, "ValidFrom.frontier"))

    def frontier(self, write_frontier: Antichain) -> Antichain:
        return self.valid_from

    def __repr__(self) -> str:
        return f"ValidFrom({self.valid_from!r})"


@dataclass(frozen=True, slots=True)
class LagWriteFrontier(ReadPolicy):
    """Stay ``lag`` behind the upper, rounded down to a multiple of ``min(lag, max_granularity)``.

    Ints only (Materialize's ``lag_writes_by``). The upper ``[]`` (a closed
    collection) maps to ``[0]``, so closing never frees the since by itself;
    ``lag == 0`` otherwise returns the upper unchanged. Rounding cuts down the
    number of compaction messages as the upper ticks forward.

    >>> LagWriteFrontier(0, 1).frontier(Antichain([7]))
    Antichain([7])
    >>> LagWriteFrontier(3, 100).frontier(Antichain([2]))
    Antichain([0])
    >>> LagWriteFrontier(3, 100).frontier(Antichain())
    Antichain([0])
    """

    lag: int
    max_granularity: int

    def __post_init__(self) -> None:
        if type(self.lag) is not int or self.lag < 0:
            raise InvalidReadPolicy(f"lag must be a non-negative int, got {self.lag!r}")
        if type(self.max_granularity) is not int or self.max_granularity < 1:
            raise InvalidReadPolicy(
                f"max_granularity must be a positive int, got {self.max_granularity!r}"
            )

    def frontier(self, write_frontier: Antichain) -> Antichain:
        u = _int_upper(write_frontier, self)
        if u is None:
            return Antichain.bottom(0)
        if self.lag == 0:
            return write_frontier
        x = max(0, u - self.lag)
        return Antichain.from_elem(x - x % min(self.lag, self.max_granularity))


@dataclass(frozen=True, slots=True)
class StepBack(ReadPolicy):
    """One tick behind the upper: ``[u]`` gives ``[u - 1]`` (``[0]`` at 0), ``[]`` gives ``[0]``. Ints only.

    >>> StepBack().frontier(Antichain([5])), StepBack().frontier(Antichain())
    (Antichain([4]), Antichain([0]))
    """

    def frontier(self, write_frontier: Antichain) -> Antichain:
        u = _int_upper(write_frontier, self)
        if u is None or u == 0:
            return Antichain.bottom(0)
        return Antichain.from_elem(u - 1)


@dataclass(frozen=True, slots=True)
class Multiple(ReadPolicy):
    """The least restrictive of several policies: the meet of their frontiers (``[]`` for none)."""

    policies: tuple[ReadPolicy, ...]

    def __init__(self, policies: Iterable[ReadPolicy]) -> None:
        members = tuple(policies)
        for p in members:
            if not isinstance(p, ReadPolicy):
                raise InvalidReadPolicy(f"Multiple takes read policies, got {p!r}")
        object.__setattr__(self, "policies", members)

    def frontier(self, write_frontier: Antichain) -> Antichain:
        return Antichain.meet_all(p.frontier(write_frontier) for p in self.policies)

    def __repr__(self) -> str:
        return f"Multiple([{', '.join(repr(p) for p in self.policies)}])"


def lag_writes_by(lag: int, max_granularity: int) -> LagWriteFrontier:
    """Materialize's name for :class:`LagWriteFrontier`."""
    return LagWriteFrontier(lag, max_granularity)


def step_back() -> StepBack:
    """Materialize's name for :class:`StepBack`."""
    return StepBack()


def apply_policy(implied: Antichain, policy: ReadPolicy, write_frontier: Antichain) -> Antichain:
    """The implied capability after evaluating ``policy`` at ``write_frontier``.

    The policy's frontier replaces ``implied`` only if it is at or beyond it
    (``implied <= new``); a frontier behind or incomparable is ignored, so the
    implied capability never regresses.

    >>> apply_policy(Antichain([5]), ValidFrom(Antichain([3])), Antichain([9]))
    Antichain([5])
    >>> apply_policy(Antichain([5]), StepBack(), Antichain([9]))
    Antichain([8])
    """
    _check_antichain(implied, "implied capability")
    new = policy.frontier(write_frontier)
    return new if implied <= new else implied
