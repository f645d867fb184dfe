"""Resumption frontiers (the meet of the outputs' uppers) and the deterministic load generators."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidegate.spec.errors import InvalidUsage
from tidegate.spec.frontier import Antichain, accumulate
from tidegate.spec.plan.schema import check_row
from tidegate.spec.storage import (
    LoadGenerator,
    loadgen_batch,
    loadgen_schema,
    loadgen_updates,
    loadgen_upper,
    resumption_frontier,
)
from tidegate.spec.strategies import load_generators

uppers = st.one_of(st.just(Antichain()), st.integers(0, 50).map(lambda t: Antichain([t])))


@given(st.lists(uppers, min_size=1, max_size=5))
def test_resumption_is_never_beyond_what_every_output_made_durable(
    outputs: list[Antichain],
) -> None:
    r = resumption_frontier(outputs)
    assert all(r <= u for u in outputs)


@given(st.lists(uppers, min_size=1, max_size=5), uppers)
def test_resumption_skips_nothing_some_output_lacks(outputs: list[Antichain], f: Antichain) -> None:
    # Any frontier at or below every output's upper is at or below the resumption frontier:
    # resuming there re-derives at least everything some output lacks.
    if all(f <= u for u in outputs):
        assert f <= resumption_frontier(outputs)


@given(st.lists(uppers, min_size=1, max_size=5), st.data())
def test_resumption_is_monotone_in_the_uppers(
    outputs: list[Antichain], data: st.DataObject
) -> None:
    i = data.draw(st.integers(0, len(outputs) - 1))
    moved = list(outputs)
    moved[i] = moved[i].join(data.draw(uppers))
    assert resumption_frontier(outputs) <= resumption_frontier(moved)


def test_resumption_of_no_outputs_is_the_beginning() -> None:
    assert resumption_frontier([]) == Antichain([0])
    assert resumption_frontier([Antichain(), Antichain()]) == Antichain()


@given(load_generators(), st.integers(0, 10_000))
def test_a_load_generator_is_a_function_of_the_offset_and_types_its_rows(
    gen: LoadGenerator, offset: int
) -> None:
    gen = LoadGenerator(
        gen.kind, gen.tick_ms, gen.seed, gen.max_cardinality, min(gen.rows_per_tick, 5)
    )
    first = loadgen_updates(gen, offset)
    assert first == loadgen_updates(gen, offset)  # a restart re-emits the same updates
    schema = loadgen_schema(gen)
    for row, o, diff in first:
        assert o == offset and diff in (1, -1)
        check_row(row, schema)
    assert sum(1 for _, _, d in first if d > 0) == gen.rows_per_tick


@given(load_generators(), st.integers(0, 40), st.integers(0, 40))
def test_max_cardinality_bounds_the_live_rows(gen: LoadGenerator, lo: int, span: int) -> None:
    gen = LoadGenerator(
        gen.kind, gen.tick_ms, gen.seed, gen.max_cardinality, min(gen.rows_per_tick, 3)
    )
    batch = loadgen_batch(gen, 0, lo + span)
    contents = accumulate(batch.updates, lo + span)
    assert all(c == 1 for c in contents.values())
    rows = (lo + span) * gen.rows_per_tick
    limit = rows if gen.max_cardinality is None else min(rows, gen.max_cardinality)
    assert len(contents) == limit
    # Batches split anywhere hold the same updates.
    assert (
        loadgen_batch(gen, 0, lo).updates + loadgen_batch(gen, lo, lo + span).updates
        == batch.updates
    )


def test_the_seed_decides_the_auction_values() -> None:
    a = LoadGenerator("auction", seed=1)
    b = LoadGenerator("auction", seed=2)
    assert [loadgen_updates(a, o) for o in range(5)] != [loadgen_updates(b, o) for o in range(5)]
    assert loadgen_updates(LoadGenerator("counter", seed=1), 3) == loadgen_updates(
        LoadGenerator("counter", seed=2), 3
    )


def test_pacing_and_refusals() -> None:
    gen = LoadGenerator(tick_ms=100)
    assert loadgen_upper(gen, 5, 1_000, 999) == 5
    assert loadgen_upper(gen, 5, 1_000, 1_000) == 6
    assert loadgen_upper(gen, 5, 1_000, 1_250) == 8
    for bad in (LoadGenerator("nope"), LoadGenerator(tick_ms=0), LoadGenerator(rows_per_tick=0)):  # type: ignore[arg-type]
        with pytest.raises(InvalidUsage):
            loadgen_updates(bad, 0)
    with pytest.raises(InvalidUsage):
        loadgen_updates(gen, -1)
    with pytest.raises(InvalidUsage):
        loadgen_batch(gen, 3, 2)
