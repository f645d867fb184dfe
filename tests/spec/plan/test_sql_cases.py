"""The reference evaluator gives what SQL (PostgreSQL) gives on the edge cases where engines most often part from SQL.

The same cases run on every executor through ``ExecutorContractTests.test_sql_cases``.
"""

from __future__ import annotations

import pytest

from tidegate.spec.testing import SQL_CASES, SqlCase, check_sql_case


@pytest.mark.parametrize("case", SQL_CASES, ids=lambda c: c.name)
def test_reference_gives_what_sql_gives(case: SqlCase) -> None:
    check_sql_case(case)
