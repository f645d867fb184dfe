"""The sqllogictest files of ``tests/slt/`` on tidegate, and on PostgreSQL to check the files.

Every ``*.slt`` file here runs on a fresh tidegate environment (``tidegate`` in
``skipif``/``onlyif``); the same files run on a fresh PostgreSQL database
(``postgresql``), so an expected answer in a file is PostgreSQL's answer (or marked
``onlyif tidegate`` where tidegate follows Materialize, see docs/sql.md). The public
SQLite corpus is not on this machine (nor on PyPI); these files are the project's own.
``regressions.slt`` holds every disagreement the PostgreSQL oracle found.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from runner import parse, run

FILES = sorted(Path(__file__).parent.glob("*.slt"))

pytestmark = pytest.mark.timeout(600)


def test_the_runner_reads_the_standard_format() -> None:
    recs = parse(
        "# a comment\nstatement ok\nCREATE TABLE t (a BIGINT)\n\n"
        "skipif postgresql\nquery IT rowsort label-x\nSELECT 1, 'a'\nUNION ALL SELECT 0, ''\n"
        "----\n0\n(empty)\n1\na\n\nstatement error 42P01\nSELECT * FROM nosuch\n\nhalt\n\n"
        "statement ok\nnot read\n"
    )
    assert [r.kind for r in recs] == ["statement", "query", "statement"]
    q = recs[1]
    assert q.types == "IT" and q.sort == "rowsort" and q.label == "label-x"
    assert q.sql == "SELECT 1, 'a'\nUNION ALL SELECT 0, ''" and q.results == [
        "0",
        "(empty)",
        "1",
        "a",
    ]
    assert not q.runs_on("postgresql") and q.runs_on("tidegate")
    assert recs[2].expect_error and recs[2].error == "42P01"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_slt_file_on_tidegate(path: Path, tidegate_engine: Any) -> None:
    failures = run(parse(path.read_text()), tidegate_engine, path.name)
    assert not failures, "\n".join(str(f) for f in failures)


@pytest.mark.postgres
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_slt_file_on_postgresql(path: Path, postgres_engine: Any) -> None:
    failures = run(parse(path.read_text()), postgres_engine, path.name)
    assert not failures, "\n".join(str(f) for f in failures)
