"""The storage message strategies: every message type, well-typed, and values a codec can round-trip."""

from __future__ import annotations

import copy
import pickle
from typing import Any, get_args

from hypothesis import given, settings
from hypothesis import strategies as st

from tidegate.spec.frontier import Antichain
from tidegate.spec.storage import (
    SinkStatistics,
    SourceStatistics,
    StatisticsUpdate,
    StorageCommand,
    StorageResponse,
)
from tidegate.spec.strategies import source_batches, storage_commands, storage_responses


def test_every_message_type_is_generated() -> None:
    seen: set[type] = set()

    @settings(max_examples=300)
    @given(st.one_of(storage_commands(), storage_responses()))
    def collect(m: Any) -> None:
        seen.add(type(m))

    collect()
    assert seen == set(get_args(StorageCommand)) | set(get_args(StorageResponse))


@given(st.one_of(storage_commands(), storage_responses()))
def test_messages_are_frozen_values_that_round_trip(m: Any) -> None:
    assert pickle.loads(pickle.dumps(m)) == m
    assert copy.deepcopy(m) == m
    hash(m)


@given(storage_responses())
def test_statistics_merge_sums_counters_and_keeps_known_gauges(m: Any) -> None:
    if not isinstance(m, StatisticsUpdate):
        return
    s = m.statistics
    if isinstance(s, SourceStatistics):
        twice = s.merged(s)
        assert twice.messages_received == 2 * s.messages_received
        assert twice.offset_known == s.offset_known
        assert s.merged(SourceStatistics()) == s
    else:
        assert isinstance(s, SinkStatistics)
        assert s.merged(SinkStatistics()) == s
        assert s.merged(s).bytes_committed == 2 * s.bytes_committed


@given(st.integers(0, 100).flatmap(lambda lo: st.tuples(st.just(lo), source_batches(lo))))
def test_source_batches_are_well_formed(case: tuple[int, Any]) -> None:
    lower, batch = case
    assert batch.upper >= lower
    assert all(lower <= o < batch.upper for _, o, _ in batch.updates)
    assert Antichain([batch.upper]) >= Antichain([lower])
