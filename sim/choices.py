"""The one source of nondeterminism in a simulation run.

Every choice -- which message is delivered next, its delay, whether and when a
fault fires, what a client does -- is drawn from a :class:`ChoiceSource`. A
campaign uses :class:`SeededChoices` (replayable from the seed); a Hypothesis
test uses :class:`HypothesisChoices`, so a failing run shrinks to a minimal
schedule and workload.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from typing import Any, Protocol, TypeVar

__all__ = ["ChoiceSource", "HypothesisChoices", "SeededChoices", "stream"]

T = TypeVar("T")


class ChoiceSource(Protocol):
    """Draws integers; everything else is derived from them so that both sources agree."""

    def integer(self, low: int, high: int) -> int:
        """A value in ``[low, high]`` (inclusive)."""
        ...


class SeededChoices:
    """Choices from a seeded ``random.Random``: the same seed gives the same run."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._rng = random.Random(seed)
        self._randbelow = self._rng._randbelow  # type: ignore[attr-defined]

    def integer(self, low: int, high: int) -> int:
        if high < low:
            raise ValueError(f"empty range [{low}, {high}]")
        # Exactly what ``randint(low, high)`` computes (it is ``low + _randbelow(width)``),
        # without two layers of argument checking on this hot path.
        value: int = low + self._randbelow(high - low + 1)
        return value


class HypothesisChoices:
    """Choices drawn from a Hypothesis ``data`` object, so failures shrink towards small values."""

    def __init__(self, data: Any) -> None:
        from hypothesis import strategies as st

        self._data = data
        self._st = st

    def integer(self, low: int, high: int) -> int:
        if high < low:
            raise ValueError(f"empty range [{low}, {high}]")
        value: int = self._data.draw(self._st.integers(low, high))
        return value


def stream(seed: int, name: str) -> SeededChoices:
    """An independent stream of choices named ``name``, derived from a run's ``seed``.

    A run draws each kind of choice (fault plan, workload, latencies...) from
    its own stream, so replacing one kind by explicit data (a saved plan)
    leaves every other draw as it was.
    """
    digest = hashlib.blake2b(f"{seed}/{name}".encode(), digest_size=8).digest()
    return SeededChoices(int.from_bytes(digest, "big"))


def chance(source: ChoiceSource, per_mille: int) -> bool:
    """True with probability ``per_mille / 1000``."""
    return source.integer(0, 999) < per_mille


def pick(source: ChoiceSource, items: Sequence[T]) -> T:
    """One of ``items`` (which must be in a deterministic order)."""
    if not items:
        raise ValueError("pick from an empty sequence")
    return items[source.integer(0, len(items) - 1)]


def subset(source: ChoiceSource, items: Sequence[T]) -> list[T]:
    """A subset of ``items``, in their order (swarm testing: which features are on)."""
    return [item for item in items if source.integer(0, 1)]
