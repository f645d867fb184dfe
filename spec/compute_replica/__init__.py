"""The compute replica's behaviour, written once: a sans-IO state machine over an executor.

:class:`ComputeReplica` takes the controller's commands
(:meth:`~ComputeReplica.handle_command`), storage data
(:meth:`~ComputeReplica.feed_source`), write outcomes and persist-peek results,
runs its :class:`~tidegate.spec.executor.Executor` on :meth:`~ComputeReplica.step`,
and returns :mod:`outputs <.outputs>`: validated responses for the controller
and storage work for the driver. The simulator's model replicas and the Spark
replica process both drive it; :mod:`tidegate.spec.testing.compute_replica`
checks any implementation of the same interface.
"""

from .logs import LOG_SCHEMAS, log_dataflow, log_schema
from .outputs import (
    PeekPersist,
    ReadSource,
    Reconciled,
    ReplicaOutput,
    Respond,
    StopReading,
    WriteCopyTo,
    WriteOutput,
)
from .replica import (
    MEMORY_LIMIT_EXCEEDED,
    RESULT_TOO_LARGE,
    ComputeReplica,
    compaction_error_message,
    result_size,
)

__all__ = [
    "LOG_SCHEMAS",
    "MEMORY_LIMIT_EXCEEDED",
    "RESULT_TOO_LARGE",
    "ComputeReplica",
    "PeekPersist",
    "ReadSource",
    "Reconciled",
    "ReplicaOutput",
    "Respond",
    "StopReading",
    "WriteCopyTo",
    "WriteOutput",
    "compaction_error_message",
    "log_dataflow",
    "log_schema",
    "result_size",
]
