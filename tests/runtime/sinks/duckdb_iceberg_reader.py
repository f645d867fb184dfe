"""Reads an Iceberg table with DuckDB's ``iceberg`` extension: an independent reader for the sink tests.

    python duckdb_iceberg_reader.py METADATA_LOCATION

Prints one JSON array per row (the table's columns in order; dates and
timestamps as ISO text). Runs with ``PYTHONPATH`` set to a directory holding
DuckDB 1.5.5 and the PyPI packages of its ``iceberg`` and ``avro`` extensions
(``duckdb-extension-iceberg``, ``duckdb-extension-avro``): the project's own
DuckDB is 2.x, for which no extension package exists, and DuckDB's own
extension download needs a network this machine does not have.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path

import duckdb
import duckdb_extension_avro
import duckdb_extension_iceberg


def _extension(package: object, name: str) -> str:
    root = Path(str(package.__file__)).parent
    [path] = root.glob(f"extensions/*/{name}.duckdb_extension")
    return str(path)


def _json(value: object) -> object:
    if isinstance(value, dt.date | dt.datetime):
        return value.isoformat()
    return value


def main() -> None:
    location = sys.argv[1]
    con = duckdb.connect(
        config={"allow_unsigned_extensions": True, "autoinstall_known_extensions": False}
    )
    con.execute(f"LOAD '{_extension(duckdb_extension_avro, 'avro')}'")
    con.execute(f"LOAD '{_extension(duckdb_extension_iceberg, 'iceberg')}'")
    for row in con.execute("SELECT * FROM iceberg_scan(?)", [location]).fetchall():
        print(json.dumps([_json(v) for v in row]))


if __name__ == "__main__":
    main()
