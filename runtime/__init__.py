"""tidegate's production runtime: transport, controller driver, storage (shards), orchestration.

The embedding API is re-exported here (imported on first use, so that
``import tidegate.runtime.storage`` stays light):

* :class:`Environment` -- the async API (``async with Environment.open(...) as env``);
* :class:`SyncEnvironment` -- its blocking twin for scripts and notebooks;
* :class:`EnvironmentOptions` -- how to open one (every option of :meth:`Environment.open`);
* :class:`ReplicaSpec` -- a replica to run or connect to;
* :class:`ControllerDriver` -- the spec controller driven over gRPC and the shard store.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # type checkers see the real classes; at run time they load on first use
    from .controller.driver import ControllerDriver
    from .environment import Environment
    from .options import EnvironmentOptions, ReplicaSpec
    from .sync import SyncEnvironment

__all__ = [
    "ControllerDriver",
    "Environment",
    "EnvironmentOptions",
    "ReplicaSpec",
    "SyncEnvironment",
]

_EXPORTS = {
    "ControllerDriver": "tidegate.runtime.controller.driver",
    "Environment": "tidegate.runtime.environment",
    "EnvironmentOptions": "tidegate.runtime.options",
    "ReplicaSpec": "tidegate.runtime.options",
    "SyncEnvironment": "tidegate.runtime.sync",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
