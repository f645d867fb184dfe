"""The protocol state machines of tidegate.spec.testing, run against the spec's own sessions and model replica."""

from __future__ import annotations

import doctest
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

import tidegate.spec.protocol.controller_session as controller_session_module
import tidegate.spec.protocol.replica_session as replica_session_module
from tidegate.spec.protocol import ComputeResponse, SubscribeDroppedAt, SubscribeResponse
from tidegate.spec.testing import (
    ProtocolModelReplica,
    ProtocolSessionsMachine,
    ReplicaConformanceFailure,
    ReplicaConformanceMachine,
    ReplicaUnderTest,
)

ProtocolSessionsMachine.TestCase.settings = settings(settings(), stateful_step_count=60)
TestProtocolSessions = ProtocolSessionsMachine.TestCase

ReplicaConformanceMachine.TestCase.settings = settings(settings(), stateful_step_count=40)
TestReplicaConformance = ReplicaConformanceMachine.TestCase


class ForgetsDroppedAt(ProtocolModelReplica):
    """A faulty replica: it never tells the controller that a dropped subscribe ended."""

    def step(self) -> Sequence[ComputeResponse]:
        return [
            r
            for r in super().step()
            if not (isinstance(r, SubscribeResponse) and isinstance(r.result, SubscribeDroppedAt))
        ]


class ForgetfulReplicaMachine(ReplicaConformanceMachine):
    def make_replica(self) -> ReplicaUnderTest:
        return ForgetsDroppedAt()


def test_conformance_machine_catches_a_replica_that_owes_dropped_at() -> None:
    quick = settings(
        max_examples=200,
        stateful_step_count=30,
        phases=[Phase.generate],
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    with pytest.raises(ReplicaConformanceFailure, match="DroppedAt"):
        run_state_machine_as_test(ForgetfulReplicaMachine, settings=quick)


@pytest.mark.parametrize("module", [controller_session_module, replica_session_module])
def test_session_doctests(module: object) -> None:
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)  # type: ignore[arg-type]
    assert result.attempted > 0
    assert result.failed == 0
