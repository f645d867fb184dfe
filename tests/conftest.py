"""Test-session configuration shared by every test package.

Hypothesis profiles: ``dev`` (default, quick), ``ci`` (what ``make test``
uses under CI), ``nightly`` (long). Pick one with ``HYPOTHESIS_PROFILE``.

The Spark fixtures (``spark``, ``standalone_cluster``) come from the plugin
module ``tests/spark_cluster.py``, ``postgres_url`` (a throw-away PostgreSQL
cluster ready for logical replication) from ``tests/postgres_cluster.py``,
``s3_endpoint`` (moto's S3 server) from ``tests/s3_server.py``.
Spark's Python workers of an in-process session run this interpreter (the one
with tidegate installed), not whatever ``python3`` is first on the PATH.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from hypothesis import HealthCheck, settings

sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

pytest_plugins = ["postgres_cluster", "s3_server", "spark_cluster", "tiers"]

settings.register_profile("dev", max_examples=50, deadline=None)
settings.register_profile(
    "ci", max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "nightly", max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))
