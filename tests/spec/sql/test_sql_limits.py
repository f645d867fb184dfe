"""Statements past the parser's limits are refused with a typed error before anything
recurses into them, and those within the limits parse (PostgreSQL's SQLSTATEs 54001/54000)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tidegate.spec.errors import ProgramLimitExceeded, StatementTooComplex
from tidegate.spec.sql.parse import MAX_ARRAY_DIMENSIONS, MAX_SQL_NESTING, parse_one

NESTED: dict[str, Callable[[int], str]] = {
    "parentheses": lambda n: "SELECT " + "(" * n + "1" + ")" * n,
    "arithmetic": lambda n: "SELECT " + "1 + (" * n + "1" + ")" * n,
    "case": lambda n: "SELECT " + "CASE WHEN true THEN " * n + "1" + " END" * n,
    "subqueries": lambda n: "SELECT " + "(SELECT " * n + "1" + ")" * n,
    "derived tables": lambda n: "SELECT * FROM " + "(SELECT * FROM " * n + "t" + ") x" * n,
    "functions": lambda n: "SELECT " + "abs(" * n + "1" + ")" * n,
    "exists": lambda n: "SELECT " + "EXISTS (SELECT " * n + "1" + ")" * n,
}


@pytest.mark.parametrize("form", sorted(NESTED))
def test_statements_nest_up_to_the_limit_and_no_further(form: str) -> None:
    parse_one(NESTED[form](MAX_SQL_NESTING))
    with pytest.raises(StatementTooComplex) as info:
        parse_one(NESTED[form](MAX_SQL_NESTING + 1))
    e = info.value
    assert e.sqlstate == "54001" and f"deeper than {MAX_SQL_NESTING} levels" in e.message
    assert e.position is not None and e.position > 1


def test_nesting_the_token_count_cannot_see_is_refused_typed() -> None:
    with pytest.raises(StatementTooComplex):
        parse_one("SELECT " + "NOT " * 30_000 + "true")


def test_array_constructors_nest_as_deep_as_postgresql_allows_dimensions() -> None:
    """Nested ``ARRAY[`` constructors cost sqlglot time exponential in their depth; PostgreSQL
    allows six dimensions, and so the seventh is refused at once."""

    def nested(n: int) -> str:
        return "SELECT " + "ARRAY[" * n + "1" + "]" * n

    parse_one(nested(MAX_ARRAY_DIMENSIONS))
    parse_one("SELECT ARRAY[1, 2][1], " + ", ".join(["ARRAY[ARRAY[1]]"] * 50))
    for depth in (MAX_ARRAY_DIMENSIONS + 1, 40):
        with pytest.raises(ProgramLimitExceeded, match=r"array dimensions \(7\) exceeds") as info:
            parse_one(nested(depth))
        assert info.value.sqlstate == "54000" and info.value.position == len("SELECT ") + 1 + 6 * 6


def test_the_parser_leaves_the_recursion_limit_as_it_found_it() -> None:
    """The frames deep statements need are lent while one is parsed or bound, not for good:
    code that relies on the default limit to refuse deep input keeps meeting it."""
    import sys

    before = sys.getrecursionlimit()
    parse_one(NESTED["parentheses"](MAX_SQL_NESTING))
    with pytest.raises(StatementTooComplex):
        parse_one(NESTED["parentheses"](MAX_SQL_NESTING + 1))
    assert sys.getrecursionlimit() == before
