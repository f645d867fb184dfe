"""The SQL oracle against the ``SparkExecutor`` (the shared ``local[2]`` session of the test run).

The same cases, translation and comparison as ``test_sql_oracle.py`` (whose
docstring says how results are compared and which SQL differences are
emulated), fewer of them, with more times (``0..7``) and updates, so that
stateful operators ship state to Spark (after four changes), and half of them
with the index's history in Spark (``index_memory_rows=0``: every peek a
Spark job). 20 cases under the ``dev`` and ``ci`` profiles, 200 under
``nightly``.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle_cases import OracleCase, oracle_cases
from oracle_harness import check_case
from pyspark.sql import SparkSession

from tidegate.replica.spark import SparkExecutor

_PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "dev")
SPARK_CASES = 200 if _PROFILE == "nightly" else 20

pytestmark = [pytest.mark.spark, pytest.mark.timeout(3600 if _PROFILE == "nightly" else 600)]


@settings(
    max_examples=SPARK_CASES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(case=oracle_cases(max_depth=3, max_time=7, max_events=12), index_in_spark=st.booleans())
def test_spark_executor_agrees_with_sql(
    spark: SparkSession, case: OracleCase, index_in_spark: bool
) -> None:
    # index_in_spark: the index's history in Spark from its first row on, so every peek of it
    # is a Spark job (else the driver keeps it and answers)
    rows = 0 if index_in_spark else None

    def make() -> SparkExecutor:
        if rows is None:
            return SparkExecutor(spark)
        return SparkExecutor(spark, index_memory_rows=rows)

    check_case(case, {"SparkExecutor": make}, reference=False)
