"""The SQL dialect tidegate parses: sqlglot's PostgreSQL dialect, with what it loses kept.

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
from sqlglot.tokens import TokenType

__all__ = ["DIALECT", "is_unknown"]


class _Parser(PostgresParser):
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
            node = self.PRIMARY_PARSERS[TokenType.NULL](self, self._prev)
            node.meta["unknown"] = True
            return node
        return super()._parse_null()


class TidegatePostgres(Postgres):
    """PostgreSQL as sqlglot reads it, keeping ``IS [NOT] UNKNOWN`` apart from ``IS NULL``."""

    Parser = _Parser


DIALECT = TidegatePostgres()


def is_unknown(node: Any) -> bool:
    """Whether ``node`` is the ``UNKNOWN`` of ``x IS [NOT] UNKNOWN``."""
    return isinstance(node, exp.Null) and bool(node.meta.get("unknown"))
