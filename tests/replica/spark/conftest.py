"""One SparkSession (local[2], 2 shuffle partitions) shared by every Spark test of the session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from tidegate.replica.spark import spark_session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = spark_session("local[2]", shuffle_partitions=2)
    yield session
    session.stop()
