"""The temporal-filter law (:mod:`tidegate.spec.testing.temporal`) on the SparkExecutor: at
every time of random histories, compacted and restarted, its index holds exactly the rows
whose ``mz_now()`` predicates hold then -- with the state of the count after the filter in
the driver, and in Spark."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from pyspark.sql import SparkSession

from tidegate.replica.spark import SparkExecutor
from tidegate.spec.testing.temporal import TemporalCase, check_temporal_case, temporal_cases

pytestmark = pytest.mark.spark


def test_the_spark_executor_holds_the_rows_valid_at_every_time(spark: SparkSession) -> None:
    @settings(max_examples=25, deadline=None)
    @given(temporal_cases())
    def prop(case: TemporalCase) -> None:
        check_temporal_case(lambda: SparkExecutor(spark), case)

    prop()


def test_the_law_with_operator_state_in_spark(spark: SparkSession) -> None:
    @settings(max_examples=4, deadline=None)
    @given(temporal_cases())
    def prop(case: TemporalCase) -> None:
        check_temporal_case(lambda: SparkExecutor(spark, state_memory_rows=0), case)

    prop()
