"""Row schemas of shards: the spec's :class:`~tidegate.spec.plan.Schema` as an Arrow schema.

Every collection's shard is named ``str(global_id)`` and stores its rows with
the columns of :func:`arrow_schema`: positional names ``c0, c1, ...`` (plan
schemas may repeat names; positions never clash) and the Arrow type of each
column's scalar type, nullable as declared.
"""

from __future__ import annotations

import pyarrow as pa

from tidegate.spec.ids import GlobalId
from tidegate.spec.plan.schema import ScalarType, Schema

__all__ = ["ARROW_TYPES", "arrow_schema", "shard_name"]

ARROW_TYPES: dict[ScalarType, pa.DataType] = {
    ScalarType.INT64: pa.int64(),
    ScalarType.FLOAT64: pa.float64(),
    ScalarType.STRING: pa.string(),
    ScalarType.BOOL: pa.bool_(),
    ScalarType.DATE: pa.date32(),
    ScalarType.TIMESTAMP: pa.timestamp("us"),
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


def shard_name(id: GlobalId) -> str:
    """The shard that holds collection ``id`` (the replica process uses the same name)."""
    return str(id)
