"""The controller state machine on the composed controller (real storage controller behind the port)."""

from __future__ import annotations

from hypothesis import settings

from tidegate.spec.testing.controller import ComposedControllerMachine

TestComposedControllerMachine = ComposedControllerMachine.TestCase
TestComposedControllerMachine.settings = settings(
    settings.default, stateful_step_count=50, deadline=None
)
