"""Materialize's load generators as pure, seeded functions of the offset.

The updates at an offset depend only on the generator's parameters (its
``seed`` among them) and the offset, so a source restarted at any offset
re-emits exactly the updates it emitted before -- what reclocking needs
(:mod:`.reclock`). A driver wraps these as a :class:`~.SourceBatch` producer,
one offset per ``tick_ms`` of its clock (:func:`loadgen_upper`).

* ``counter``: offset ``n`` inserts rows ``(n * k + 1,) ... (n * k + k,)``
  (``k = rows_per_tick``); with ``max_cardinality = m`` the insertion of row
  ``r`` also retracts row ``r - m``, so at most ``m`` rows are live.
* ``auction``: offset ``n`` inserts ``k`` bids ``(id, auction_id, buyer,
  amount, item)``; every value but the id is drawn from the seed and the id;
  ``max_cardinality`` retracts old bids the same way.

>>> gen = LoadGenerator("counter", rows_per_tick=2, max_cardinality=3)
>>> loadgen_updates(gen, 0), loadgen_updates(gen, 1)
((((1,), 0, 1), ((2,), 0, 1)), (((3,), 1, 1), ((4,), 1, 1), ((1,), 1, -1)))
>>> loadgen_batch(gen, 0, 2).upper
2
"""

from __future__ import annotations

from ..errors import InvalidUsage
from ..frontier import Row
from ..plan.schema import Schema
from .connections import LoadGenerator, SourceBatch, SourceUpdate

__all__ = [
    "AUCTION_SCHEMA",
    "COUNTER_SCHEMA",
    "loadgen_batch",
    "loadgen_schema",
    "loadgen_updates",
    "loadgen_upper",
]

COUNTER_SCHEMA = Schema.of(("counter", "int64", False))
AUCTION_SCHEMA = Schema.of(
    ("id", "int64", False),
    ("auction_id", "int64", False),
    ("buyer", "int64", False),
    ("amount", "int64", False),
    ("item", "string", False),
)
_ITEMS = ("Best Pizza in Town", "Gift Basket", "City Bar Crawl", "Custom Art", "Signed Memorabilia")
_MASK = (1 << 64) - 1


def _check(gen: LoadGenerator) -> None:
    if gen.kind not in ("counter", "auction"):
        raise InvalidUsage(f"unknown load generator kind {gen.kind!r}")
    if type(gen.tick_ms) is not int or gen.tick_ms <= 0:
        raise InvalidUsage(f"load generator tick_ms must be a positive int, got {gen.tick_ms!r}")
    if type(gen.rows_per_tick) is not int or gen.rows_per_tick <= 0:
        raise InvalidUsage(f"rows_per_tick must be a positive int, got {gen.rows_per_tick!r}")
    if gen.max_cardinality is not None and (
        type(gen.max_cardinality) is not int or gen.max_cardinality <= 0
    ):
        raise InvalidUsage(f"max_cardinality must be a positive int, got {gen.max_cardinality!r}")


def _mix(x: int) -> int:
    """splitmix64: a fixed, well-spread 64-bit hash (the same on every platform and run)."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def loadgen_schema(gen: LoadGenerator) -> Schema:
    """The schema of the rows ``gen`` produces."""
    _check(gen)
    return COUNTER_SCHEMA if gen.kind == "counter" else AUCTION_SCHEMA


def _row(gen: LoadGenerator, number: int) -> Row:
    """Row number ``number`` (1-based) of ``gen``."""
    if gen.kind == "counter":
        return (number,)
    h = _mix(_mix(gen.seed & _MASK) ^ number)
    auction = number // 8 + (h & 3)
    buyer = (h >> 8) % 100
    amount = 1 + (h >> 16) % 1000
    item = _ITEMS[(h >> 32) % len(_ITEMS)]
    return (number, auction, buyer, amount, item)


def loadgen_updates(gen: LoadGenerator, offset: int) -> tuple[SourceUpdate, ...]:
    """The updates ``gen`` emits at ``offset`` (a function of the parameters and the offset only)."""
    _check(gen)
    if type(offset) is not int or offset < 0:
        raise InvalidUsage(f"offset must be a non-negative int, got {offset!r}")
    k = gen.rows_per_tick
    out: list[SourceUpdate] = []
    retract: list[SourceUpdate] = []
    for i in range(k):
        number = offset * k + i + 1
        out.append((_row(gen, number), offset, 1))
        m = gen.max_cardinality
        if m is not None and number > m:
            retract.append((_row(gen, number - m), offset, -1))
    return (*out, *retract)


def loadgen_batch(gen: LoadGenerator, lower: int, upper: int) -> SourceBatch:
    """Every update of offsets ``[lower, upper)``, as one batch with offset upper ``upper``."""
    if type(lower) is not int or type(upper) is not int or not 0 <= lower <= upper:
        raise InvalidUsage(f"offsets [{lower!r}, {upper!r}) are not an interval of ints >= 0")
    updates = tuple(u for offset in range(lower, upper) for u in loadgen_updates(gen, offset))
    return SourceBatch(updates, upper)


def loadgen_upper(gen: LoadGenerator, start_offset: int, started_ms: int, now_ms: int) -> int:
    """The offset upper a generator started at ``start_offset`` at ``started_ms`` has reached at ``now_ms``.

    One offset per ``tick_ms``; the first one at the start.
    """
    _check(gen)
    if now_ms < started_ms:
        return start_offset
    return start_offset + 1 + (now_ms - started_ms) // gen.tick_ms
