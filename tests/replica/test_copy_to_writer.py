"""The replica's copy-to writer: Parquet files under a blob URL, through the Blob layer."""

from __future__ import annotations

import io
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tidegate.replica._copy_to import CopyToWriteFailed, copy_to_file_names, write_copy_to
from tidegate.runtime.storage.urls import open_blob
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan.schema import Schema

CT = GlobalId.transient(3)
SCHEMA = Schema.of(("k", "int64", False), ("s", "string"))


def test_rows_are_written_with_multiplicity_and_split_into_files(tmp_path: Path) -> None:
    rows = [((1, "a"), 3), ((2, None), 1), ((3, "c"), 1)]
    n = write_copy_to(f"file://{tmp_path}", CT, 7, SCHEMA, rows, rows_per_file=2)
    assert n == 5
    names = copy_to_file_names(CT, 7, 3)
    assert sorted(p.name for p in tmp_path.iterdir()) == names
    got = [r for name in names for r in pq.read_table(tmp_path / name).to_pylist()]
    assert got == [{"k": 1, "s": "a"}] * 3 + [{"k": 2, "s": None}, {"k": 3, "s": "c"}]
    assert pq.read_table(tmp_path / names[0]).schema.field("k").nullable is False


def test_an_empty_collection_gets_one_empty_file_and_repeated_names_are_positional() -> None:
    schema = Schema.of(("x", "int64"), ("x", "float64"))
    assert write_copy_to("mem://copy-to-empty", CT, 1, schema, []) == 0
    blob = open_blob("mem://copy-to-empty")
    [name] = copy_to_file_names(CT, 1, 1)
    data = blob.get(name)
    assert data is not None
    table = pq.read_table(io.BytesIO(data))
    assert table.num_rows == 0 and table.column_names == ["c0", "c1"]


def test_bad_urls_are_typed_errors(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(CopyToWriteFailed, match="not writable"):
        write_copy_to(f"file://{blocker}/sub", CT, 1, SCHEMA, [((1, "a"), 1)])
    with pytest.raises(CopyToWriteFailed, match="unsupported scheme"):
        write_copy_to("ftp://host/x", CT, 1, SCHEMA, [((1, "a"), 1)])
    with pytest.raises(CopyToWriteFailed, match="not writable"):
        write_copy_to("file://remotehost/x", CT, 1, SCHEMA, [((1, "a"), 1)])
