"""Introspection logs: per-replica collections maintained as indexes from time 0.

``CreateInstance`` names the log indexes in ``logging.index_logs`` as pairs
``(variant, GlobalId)``. Each becomes a one-object dataflow on the replica's
executor (a source fed by the replica itself, arranged as an index with
``as_of [0]``), so it is peeked, compacted and dropped like any other index.
Events are recorded only when ``logging.enable_logging`` is set; the logs'
upper advances at every step either way, so peeks on them are answered.

Known variants and their rows:

* ``peek_durations``: ``(uuid, collection, duration)`` per answered peek;
* ``dataflow_steps``: ``(step, duration, batches)`` per executor step;
* ``frontier_lag``: ``(collection, lag)``, one live row per index or
  materialized view, ``lag`` = the logs' upper minus the collection's computed
  upper (an upper of ``[]`` or a drop retracts the row).

Other variants get the one-column schema ``(event)`` and stay empty.
Durations and times come from the clock the replica was given (no clock:
durations are 0 and log time counts steps).
"""

from __future__ import annotations

from ..frontier import Antichain, Update
from ..ids import GlobalId
from ..plan.relation import Get
from ..plan.schema import Schema
from ..protocol.types import BuildDesc, DataflowDescription, IndexExport, SourceImport

__all__ = ["LOG_SCHEMAS", "log_dataflow", "log_schema"]

LOG_SCHEMAS: dict[str, Schema] = {
    "peek_durations": Schema.of(
        ("uuid", "string", False), ("collection", "string", False), ("duration", "int64", False)
    ),
    "dataflow_steps": Schema.of(
        ("step", "int64", False), ("duration", "int64", False), ("batches", "int64", False)
    ),
    "frontier_lag": Schema.of(("collection", "string", False), ("lag", "int64", False)),
}
_OTHER = Schema.of(("event", "string", False))
_OBJECT = GlobalId.transient(2**62)  # local to each log dataflow


def log_schema(variant: str) -> Schema:
    """The row schema of log ``variant``."""
    return LOG_SCHEMAS.get(variant, _OTHER)


def log_dataflow(variant: str, log_id: GlobalId) -> DataflowDescription:
    """The dataflow that maintains log ``variant`` as index ``log_id``; its source is ``log_id`` itself."""
    return DataflowDescription(
        f"log {variant}",
        source_imports=(SourceImport(log_id),),
        objects_to_build=(BuildDesc(_OBJECT, Get(log_id, log_schema(variant))),),
        index_exports=(IndexExport(log_id, _OBJECT, ()),),
        as_of=Antichain([0]),
    )


LogUpdates = dict[str, list[Update]]
"""Pending log updates by variant, stamped when the logs next advance."""
