"""Errors of the SQL front end (:mod:`tidegate.spec.sql`): they read like PostgreSQL's.

Every one carries the statement text it is about (``sql``), the 1-based
character position in it (``position``, as PostgreSQL's error field ``P``;
``None`` when no one place is to blame) and an optional ``hint``. ``str(e)``
is the message alone; :meth:`SqlError.render` adds the offending line with a
caret under the position, and the hint, as ``psql`` prints them::

    column "nmae" does not exist
    LINE 1: SELECT nmae FROM t
                   ^
    HINT:  Perhaps you meant to reference the column "name".
"""

from __future__ import annotations

from .base import TidegateError

__all__ = [
    "AmbiguousColumn",
    "SqlError",
    "SqlSyntaxError",
    "SqlTypeError",
    "UndefinedColumn",
    "UndefinedObject",
    "UnsupportedSql",
    "WrongObjectType",
]


class SqlError(TidegateError, ValueError):
    """Base class of the SQL front end's errors: a statement refused before anything ran."""

    sqlstate = "XX000"
    """PostgreSQL's SQLSTATE for this kind of error."""

    def __init__(
        self,
        message: str,
        *,
        position: int | None = None,
        sql: str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.position = position
        """1-based character offset into ``sql`` (PostgreSQL's ``P`` field), or None."""
        self.sql = sql
        self.hint = hint

    def __str__(self) -> str:
        if self.position is None:
            return self.message
        line, col = self.line_col()
        return f"{self.message} (at line {line}, column {col})"

    def line_col(self) -> tuple[int, int]:
        """The 1-based line and column of :attr:`position` (``(1, position)`` without the text)."""
        if self.position is None:
            return (1, 1)
        if self.sql is None:
            return (1, self.position)
        before = self.sql[: self.position - 1]
        line = before.count("\n") + 1
        col = self.position - (before.rfind("\n") + 1)
        return (line, col)

    def render(self) -> str:
        """The message, the statement's line with a caret under the position, and the hint."""
        out = [f"ERROR:  {self.message}"]
        if self.position is not None and self.sql is not None:
            line, col = self.line_col()
            text = self.sql.splitlines()[line - 1] if self.sql.splitlines() else ""
            prefix = f"LINE {line}: "
            out.append(prefix + text)
            out.append(" " * (len(prefix) + col - 1) + "^")
        if self.hint:
            out.append(f"HINT:  {self.hint}")
        return "\n".join(out)

    def located(self, sql: str, offset: int = 0) -> SqlError:
        """This error with its position moved by ``offset`` into the text ``sql`` (if it has none yet)."""
        if self.sql is None:
            self.sql = sql
            if self.position is not None:
                self.position += offset
        return self


class SqlSyntaxError(SqlError):
    """Text that does not parse as SQL (SQLSTATE 42601)."""

    sqlstate = "42601"


class UnsupportedSql(SqlError):
    """Valid SQL that tidegate does not support (yet): names the construct (SQLSTATE 0A000)."""

    sqlstate = "0A000"

    def __init__(self, construct: str, **kwargs: object) -> None:
        super().__init__(f"{construct} not supported", **kwargs)  # type: ignore[arg-type]
        self.construct = construct


class UndefinedColumn(SqlError):
    """A column name no relation in scope has (SQLSTATE 42703); the hint suggests a near one."""

    sqlstate = "42703"


class AmbiguousColumn(SqlError):
    """A column name more than one relation in scope has (SQLSTATE 42702)."""

    sqlstate = "42702"


class UndefinedObject(SqlError):
    """A table, view or index name the catalog does not have (SQLSTATE 42P01)."""

    sqlstate = "42P01"


class WrongObjectType(SqlError):
    """An object of another kind than the statement needs, e.g. ``DROP TABLE`` of a view (42809)."""

    sqlstate = "42809"


class SqlTypeError(SqlError):
    """Operands or values of types that do not go together; names both types (SQLSTATE 42804)."""

    sqlstate = "42804"
