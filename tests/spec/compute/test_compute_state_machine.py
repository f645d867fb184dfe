"""The controller state machine (spec.testing.controller.ControllerMachine) under Hypothesis."""

from __future__ import annotations

from hypothesis import settings

from tidegate.spec.testing.controller import ControllerMachine

TestControllerMachine = ControllerMachine.TestCase
TestControllerMachine.settings = settings(
    settings.default,
    max_examples=settings.default.max_examples,
    stateful_step_count=50,
    deadline=None,
)
