"""Shared fixtures for the storage controller tests."""

from __future__ import annotations

import pytest

from tidegate.spec.storage import StorageController
from tidegate.spec.testing import ShardStoreModel


@pytest.fixture
def ctl() -> StorageController:
    return StorageController()


@pytest.fixture
def store() -> ShardStoreModel:
    return ShardStoreModel()
