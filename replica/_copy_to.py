"""Copy-to sinks: a collection's contents at one time, written as Parquet files under a blob URL.

The replica core hands its driver a :class:`~tidegate.spec.compute_replica.WriteCopyTo`
(the rows at the as_of, with their counts, and their plan schema) once they
are complete; :func:`write_copy_to` writes them through the shard store's
Blob layer (:func:`~tidegate.runtime.storage.urls.open_blob`: ``file://`` and
``s3://``; ``mem://`` for tests) and returns the number of rows written.

Layout: files ``part-<sink id>-<as_of>-<n>.parquet`` (``n`` from ``0000``)
directly under the URL, each holding at most ``rows_per_file`` rows; a row
with count ``k`` is written ``k`` times. An empty collection still gets one
(empty) file, so the schema is there to read. Columns carry the schema's
names (``c0, c1, ...`` when names repeat) and its types, nullable as declared.
The file names depend only on the copy-to, so every replica of a copy-to
writes the same files with the same contents: a second writer overwrites the
first with identical bytes.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.parquet as pq

from tidegate.runtime.controller.schemas import ARROW_TYPES
from tidegate.runtime.storage.urls import open_blob
from tidegate.spec.errors import TidegateError
from tidegate.spec.frontier import Row
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan.numeric import numeric_text
from tidegate.spec.plan.schema import ScalarType, Schema

__all__ = ["COPY_TO_SCHEMES", "CopyToWriteFailed", "copy_to_file_names", "write_copy_to"]

COPY_TO_SCHEMES = ("file", "s3", "mem")
"""Blob URL schemes a copy-to can write to (``mem://`` is process-local: tests only)."""

DEFAULT_ROWS_PER_FILE = 1_000_000


class CopyToWriteFailed(TidegateError):
    """A copy-to could not be written (a bad or unwritable URL, a failing store)."""


def copy_to_file_names(sink_id: GlobalId, as_of: int, files: int) -> list[str]:
    """The blob keys a copy-to of ``files`` files writes (relative to its URL)."""
    return [f"part-{sink_id}-{as_of}-{n:04d}.parquet" for n in range(max(files, 1))]


_COPY_TYPES = {**ARROW_TYPES, ScalarType.NUMERIC: pa.string()}
"""The Parquet column types of a copy: the shards' own, but a numeric is its exact text in a
``string`` column (no Parquet decimal holds every numeric; any reader casts the text)."""


def _texts(values: list[Any]) -> list[Any]:
    return [numeric_text(v) if type(v) is Decimal else v for v in values]


def _arrow_schema(schema: Schema) -> pa.Schema:
    names = [c.name for c in schema.columns]
    if len(set(names)) != len(names) or not all(names):
        names = [f"c{i}" for i in range(len(names))]
    return pa.schema(
        [
            pa.field(name, _COPY_TYPES[c.type.scalar], nullable=c.type.nullable)
            for name, c in zip(names, schema.columns, strict=True)
        ]
    )


def _encode(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="snappy")
    return buf.getvalue()


def write_copy_to(
    url: str,
    sink_id: GlobalId,
    as_of: int,
    schema: Schema,
    rows: Sequence[tuple[Row, int]],
    *,
    rows_per_file: int = DEFAULT_ROWS_PER_FILE,
) -> int:
    """Write ``rows`` (``(row, count)`` pairs) as Parquet under ``url``; the number of rows written.

    Raises :class:`CopyToWriteFailed` naming the URL when it cannot be written
    (unknown scheme, a directory that cannot be created, a store that fails).
    """
    scheme = urlsplit(url).scheme
    if scheme not in COPY_TO_SCHEMES:
        raise CopyToWriteFailed(
            f"copy-to URL {url!r}: unsupported scheme {scheme!r} (file://, s3://)"
        )
    arrow = _arrow_schema(schema)
    expanded: list[Row] = []
    for row, count in rows:
        expanded.extend([row] * count)
    try:
        blob = open_blob(url)
        chunks = [
            expanded[i : i + rows_per_file] for i in range(0, len(expanded), rows_per_file)
        ] or [[]]
        names = copy_to_file_names(sink_id, as_of, len(chunks))
        for name, chunk in zip(names, chunks, strict=True):
            columns: list[Any] = [
                pa.array(_texts([r[i] for r in chunk]), arrow.field(i).type)
                for i in range(len(arrow))
            ]
            table = pa.Table.from_arrays(columns, schema=arrow)
            blob.set(name, _encode(table))
    except CopyToWriteFailed:
        raise
    except Exception as e:  # OSError (not writable), ValueError (a bad URL), store failures
        raise CopyToWriteFailed(
            f"copy-to URL {url!r} is not writable: {type(e).__name__}: {e}"
        ) from e
    return len(expanded)
