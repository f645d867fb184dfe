"""Hypothesis state machines for the compute protocol, reusable against your own implementations.

* :class:`ProtocolSessionsMachine` drives a :class:`ControllerSession` and a
  :class:`ReplicaSession` in lockstep with legal and illegal commands and
  responses, judged by an independent model of the rules: every legal step is
  accepted (with the right replica effects), every illegal one is rejected with
  the right :class:`ProtocolError` and leaves both sessions unchanged. Override
  :meth:`~ProtocolSessionsMachine.make_controller_session` /
  :meth:`~ProtocolSessionsMachine.make_replica_session` to check another
  implementation of the sessions.
* :class:`ReplicaConformanceMachine` sends legal command sequences to a replica
  (:class:`ReplicaUnderTest`: ``handle(command)`` and ``step()`` return
  responses) and checks every response with a :class:`ReplicaSession`; at the
  end it cancels every peek, drops every collection and checks that the replica
  pays everything it owes. Override :meth:`~ReplicaConformanceMachine.make_replica`
  to test your replica; the default is :class:`ProtocolModelReplica`.

Use them as ``TestX = MyMachine.TestCase`` in a pytest module.
"""

from ._conformance import (
    ProtocolModelReplica,
    ReplicaConformanceFailure,
    ReplicaConformanceMachine,
    ReplicaUnderTest,
)
from ._model import ProtocolCommandModel
from ._sessions import ProtocolSessionsMachine

__all__ = [
    "ProtocolCommandModel",
    "ProtocolModelReplica",
    "ProtocolSessionsMachine",
    "ReplicaConformanceFailure",
    "ReplicaConformanceMachine",
    "ReplicaUnderTest",
]
