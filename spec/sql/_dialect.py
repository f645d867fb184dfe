"""The SQL dialect tidegate parses: sqlglot's PostgreSQL dialect, with what it loses kept.

sqlglot reads ``TIMESTAMP '2024-01-01 10:00'::date`` as a timestamp of the text
cast to a date; in PostgreSQL the typed literal binds first: the parser here
builds the typed literal before the ``::``.

sqlglot rewrites ``INTERVAL '1 day 02:00'`` as ``INTERVAL '1' DAY`` (losing the
rest of the text): the parser keeps the text as written in
``node.meta["interval_text"]``. And sqlglot reads ``x IS UNKNOWN`` as ``x IS NULL``, which PostgreSQL does not:
``IS UNKNOWN`` needs a boolean (``'x'::text IS UNKNOWN`` is an error). The
parser here marks the NULL that an ``UNKNOWN`` keyword became
(``node.meta["unknown"]``), so the binder can tell the two apart. A dialect
subclass is sqlglot's own way to extend a dialect.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp
from sqlglot.dialects.postgres import Postgres
from sqlglot.parsers.postgres import PostgresParser
from sqlglot.tokenizer_core import Token, TokenType

__all__ = ["DIALECT", "is_unknown", "tokenize"]


class _Parser(PostgresParser):
    def _parse_type(self, parse_interval: bool = True, fallback_to_identifier: bool = False) -> Any:
        # PostgreSQL's typed literal TYPE 'text' binds tighter than ::, so that
        # TIMESTAMP '2024-01-01 10:00'::date is a timestamp cast to a date; sqlglot applies
        # the :: to the text first
        curr, nxt = self._curr, self._next
        if (
            not fallback_to_identifier
            and curr is not None
            and nxt is not None
            and curr.token_type in self.TYPE_TOKENS
            and curr.token_type != TokenType.INTERVAL
            and nxt.token_type == TokenType.STRING
        ):
            index = self._index
            data_type = self._parse_types(check_func=True, allow_identifiers=False)
            if isinstance(data_type, exp.DataType) and self._match(TokenType.STRING, advance=False):
                literal = self._parse_primary()
                return self._parse_column_ops(self.expression(exp.Cast(this=literal, to=data_type)))
            self._retreat(index)
        return super()._parse_type(parse_interval, fallback_to_identifier)

    def _parse_interval_span(self, this: Any, parse_function_unit: bool = True) -> Any:
        # sqlglot rewrites INTERVAL '1 day 02:00' as INTERVAL '1' DAY, dropping the rest: keep
        # the text as written for the binder
        text = this.name if isinstance(this, exp.Literal) and this.is_string else None
        node = super()._parse_interval_span(this, parse_function_unit)
        inner = node.this
        if text is not None and isinstance(inner, exp.Literal) and inner.name != text:
            node.meta["interval_text"] = text
        return node

    def _parse_null(self) -> Any:
        if self._match(TokenType.UNKNOWN):
            node = self.PRIMARY_PARSERS[TokenType.NULL](self, self._prev)  # type: ignore[no-untyped-call]
            node.meta["unknown"] = True
            return node
        return super()._parse_null()


class TidegatePostgres(Postgres):
    """PostgreSQL as sqlglot reads it, keeping ``IS [NOT] UNKNOWN`` apart from ``IS NULL``."""

    Parser = _Parser


DIALECT = TidegatePostgres()


def tokenize(text: str) -> list[Token]:
    """sqlglot's tokens of ``text`` [TokenError].

    A space goes after the text first: sqlglot's tokenizer refuses a text that ends in an empty
    string literal after a ``$n`` parameter (``WHERE a = $1 AND b = ''``), as drivers send."""
    return DIALECT.tokenize(text + " ")


def is_unknown(node: Any) -> bool:
    """Whether ``node`` is the ``UNKNOWN`` of ``x IS [NOT] UNKNOWN``."""
    return isinstance(node, exp.Null) and bool(node.meta.get("unknown"))
