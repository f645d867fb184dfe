"""The executor contract test, unchanged, against the SparkExecutor (bounded examples)."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from tidegate.replica.spark import SparkExecutor
from tidegate.spec.testing.executor import ExecutorContractTests

pytestmark = pytest.mark.spark


class TestSparkExecutor(ExecutorContractTests):
    max_examples = 25

    @pytest.fixture(autouse=True)
    def _session(self, spark: SparkSession) -> None:
        self.spark = spark

    def make_executor(self) -> SparkExecutor:
        return SparkExecutor(self.spark)


class TestSparkExecutorIndexesInSpark(ExecutorContractTests):
    """The contract again with every index's history in Spark from its first row on
    (``index_memory_rows=0``): each peek is a Spark job, so fewer examples."""

    max_examples = 8

    @pytest.fixture(autouse=True)
    def _session(self, spark: SparkSession) -> None:
        self.spark = spark

    def make_executor(self) -> SparkExecutor:
        return SparkExecutor(self.spark, index_memory_rows=0)


class TestSparkExecutorStateInSpark(ExecutorContractTests):
    """The contract again with every operator's state in Spark from its first change on
    (``state_memory_rows=0``; by default it stays in the driver while small): each step
    over a stateful operator is a Spark job, so fewer examples."""

    max_examples = 10

    @pytest.fixture(autouse=True)
    def _session(self, spark: SparkSession) -> None:
        self.spark = spark

    def make_executor(self) -> SparkExecutor:
        return SparkExecutor(self.spark, state_memory_rows=0)
