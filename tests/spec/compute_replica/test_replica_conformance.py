"""The compute replica against the reference, through the reusable conformance machine."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

from tidegate.spec.testing.compute_replica import ComputeReplicaMachine


class SpecReplicaMachine(ComputeReplicaMachine):
    """The default replica under test: ``ComputeReplica`` over the ``PythonExecutor``."""


SpecReplicaMachine.TestCase.settings = settings(
    settings.default,
    stateful_step_count=40,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestComputeReplicaConformance = SpecReplicaMachine.TestCase
