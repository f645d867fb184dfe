"""Executors: how a replica runs dataflows.

:class:`Executor` is the contract (install a dataflow at an as_of, feed its
inputs, step, read exports' changes and frontiers, compact, peek, drop);
:class:`IntTimeExecutor` is the bookkeeping every int-time executor shares
(subclasses say how operators run), with :class:`IndexHistory` keeping index
exports' output for peeks; :class:`PythonExecutor` is the pure-Python
incremental implementation, used by the simulator's model replicas and by
fast tests. Executors are checked against :mod:`tidegate.spec.plan.reference`
by :mod:`tidegate.spec.testing.executor`.
"""

from .contract import DataflowHandle, ErrorUpdate, Executor, ExportBatch
from .core import IntTimeExecutor
from .index_history import IndexHistory
from .python import PythonExecutor

__all__ = [
    "DataflowHandle",
    "ErrorUpdate",
    "Executor",
    "ExportBatch",
    "IndexHistory",
    "IntTimeExecutor",
    "PythonExecutor",
]
