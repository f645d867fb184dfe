"""Statements past the parser's limits are refused with a typed error before anything
recurses into them, and those within the limits parse (PostgreSQL's SQLSTATEs 54001/54000)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tidegate.spec.errors import ProgramLimitExceeded, StatementTooComplex
from tidegate.spec.sql._dialect import DIALECT
from tidegate.spec.sql.parse import (
    MAX_ARRAY_DIMENSIONS,
    MAX_SQL_BYTES,
    MAX_SQL_NESTING,
    MAX_STATEMENT_TOKENS,
    MAX_TARGET_LIST,
    parse,
    parse_one,
    split_statements,
)

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


def test_a_query_string_over_the_size_limit_is_refused_before_it_is_tokenized() -> None:
    """A 10 MB ``SELECT 1+1+...`` held the controller for minutes and 3.7 GB; now it is refused
    at once, as PostgreSQL refuses what is over a limit (54000), naming the size and the limit
    and without the text (an error must not echo 10 MB)."""
    huge = "SELECT " + "+".join(["1"] * 5_000_000)
    for refuse in (split_statements, parse_one, parse):
        with pytest.raises(ProgramLimitExceeded) as info:
            refuse(huge)
        e = info.value
        assert e.sqlstate == "54000" and not isinstance(e, StatementTooComplex)
        assert f"statement of {len(huge)} bytes" in e.message
        assert f"limit of {MAX_SQL_BYTES} bytes" in e.message
        assert e.sql is None
    # bytes of UTF-8, not characters: a string literal of 4-byte characters
    text = "SELECT '" + "\U0001f30a" * (MAX_SQL_BYTES // 4) + "'"
    with pytest.raises(ProgramLimitExceeded, match=f"statement of {len(text.encode())} bytes"):
        split_statements(text)
    fits = "SELECT '" + "x" * (MAX_SQL_BYTES - 9) + "'"  # a long literal is one token
    assert len(fits.encode()) == MAX_SQL_BYTES
    assert len(split_statements(fits)) == 1 and parse_one(fits) is not None


def _in_list(tokens: int) -> str:
    """``SELECT 1 WHERE 1 IN (1, 1, ...)`` of exactly ``tokens`` tokens (an even number)."""
    items = (tokens - 6) // 2  # SELECT 1 WHERE 1 IN ( ... ): 7 tokens, one comma fewer
    text = "SELECT 1 WHERE 1 IN (" + ",".join(["1"] * items) + ")"
    assert len(DIALECT.tokenize(text)) == tokens
    return text


def test_a_statement_is_refused_past_the_token_limit_before_it_is_parsed() -> None:
    """Within the byte limit, a flat statement of 200,000 terms still cost seconds of parsing
    and binding: one of more than :data:`MAX_STATEMENT_TOKENS` tokens is refused (54001) from
    the tokenizer's count; one at the limit parses. Each statement of a script counts alone."""
    limit = MAX_STATEMENT_TOKENS - MAX_STATEMENT_TOKENS % 2
    at_limit = _in_list(limit)
    assert parse_one(at_limit) is not None
    over = _in_list(limit + 2)
    for refuse in (split_statements, parse_one):
        with pytest.raises(StatementTooComplex) as info:
            refuse(over)
        assert info.value.sqlstate == "54001"
        assert f"limit of {MAX_STATEMENT_TOKENS} tokens" in info.value.message
    flat = "SELECT " + "+".join(["1"] * 200_000)
    assert len(flat.encode()) < MAX_SQL_BYTES
    with pytest.raises(StatementTooComplex, match="statement of 400000 tokens"):
        split_statements(flat)
    assert len(split_statements(at_limit + ";" + at_limit)) == 2


def test_a_select_list_is_at_most_as_wide_as_postgresql_allows() -> None:
    """Binding a ``SELECT`` list takes time quadratic in its width (25,000 columns within the
    token limit took three seconds): past PostgreSQL's 1664 entries, its 54011."""
    from tidegate.spec.sql.catalog import DictCatalog
    from tidegate.spec.sql.lower import lower_query

    def lower(width: int) -> object:
        text = "SELECT " + ", ".join(["1"] * width)
        return lower_query(parse_one(text).query, DictCatalog(), (), text)

    assert lower(MAX_TARGET_LIST) is not None
    with pytest.raises(ProgramLimitExceeded) as info:
        lower(MAX_TARGET_LIST + 1)
    e = info.value
    assert e.sqlstate == "54011" and e.message == "target lists can have at most 1664 entries"
    assert e.position == len("SELECT ") + 3 * MAX_TARGET_LIST + 1
