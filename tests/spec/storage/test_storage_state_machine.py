"""The storage controller's state machine (tidegate.spec.testing.StorageControllerMachine) under Hypothesis."""

from hypothesis import settings

from tidegate.spec.testing import StorageControllerMachine

TestStorageController = StorageControllerMachine.TestCase
TestStorageController.settings = settings(
    TestStorageController.settings, stateful_step_count=40, deadline=None
)
