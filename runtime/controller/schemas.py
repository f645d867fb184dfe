"""Row schemas of shards: the spec's :class:`~tidegate.spec.plan.Schema` as an Arrow schema.

Every collection's shard is named ``str(global_id)`` (:func:`shard_name`) and stores its rows with
the columns of :func:`arrow_schema`: positional names ``c0, c1, ...`` (plan
schemas may repeat names; positions never clash) and the Arrow type of each
column's scalar type, nullable as declared.
"""

from __future__ import annotations

import pyarrow as pa

from tidegate.spec.ids import GlobalId
from tidegate.spec.plan.schema import ScalarType, Schema

__all__ = ["ARROW_TYPES", "arrow_schema", "parse_shard_name", "shard_name"]

ARROW_TYPES: dict[ScalarType, pa.DataType] = {
    ScalarType.INT64: pa.int64(),
    ScalarType.FLOAT64: pa.float64(),
    ScalarType.STRING: pa.string(),
    ScalarType.BOOL: pa.bool_(),
    ScalarType.DATE: pa.date32(),
    ScalarType.TIMESTAMP: pa.timestamp("us"),
    ScalarType.NUMERIC: pa.binary(),  # its text: arrow_values.NUMERIC_ARROW says why
    ScalarType.INT16: pa.int16(),
    ScalarType.INT32: pa.int32(),
    ScalarType.FLOAT32: pa.float32(),
}
"""The Arrow type of each scalar type (shards, replica state and results share it)."""


def arrow_schema(schema: Schema) -> pa.Schema:
    """The shard row schema for rows of ``schema``."""
    return pa.schema(
        [
            pa.field(f"c{i}", ARROW_TYPES[c.type.scalar], nullable=c.type.nullable)
            for i, c in enumerate(schema.columns)
        ]
    )


_GENERATIONS: dict[GlobalId, int] = {GlobalId.system(1): 2, GlobalId.system(2): 2}
"""The system collections whose row schema changed after data directories held them, with
their schema's generation: as Materialize's builtin migrations give a changed builtin
collection a new shard, each generation has a shard of its own (``s1.v2``), so a data
directory written before opens with a fresh one; the old shard is no collection's. The
status histories' generation 2 added ``occurred_at``."""


def shard_name(id: GlobalId) -> str:
    """The shard that holds collection ``id``: ``str(id)``, with its schema's generation for a
    system collection whose schema changed (the replica processes use the same name)."""
    generation = _GENERATIONS.get(id)
    return str(id) if generation is None else f"{id}.v{generation}"


def parse_shard_name(name: str) -> tuple[GlobalId, bool] | None:
    """The collection a shard name is of, and whether it is that collection's current shard
    (``s1`` is not, once ``s1.v2`` is); ``None`` for a name no collection's shard has."""
    base, dot, generation = name.partition(".v")
    try:
        id = GlobalId.parse(base)
    except Exception:
        return None
    if dot and not (generation.isdigit() and int(generation) >= 2):
        return None
    return id, shard_name(id) == name
