"""Test-session configuration shared by every test package.

Hypothesis profiles: ``dev`` (default, quick), ``ci`` (what ``make test``
uses under CI), ``nightly`` (long). Pick one with ``HYPOTHESIS_PROFILE``.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile("dev", max_examples=50, deadline=None)
settings.register_profile(
    "ci", max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "nightly", max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))
