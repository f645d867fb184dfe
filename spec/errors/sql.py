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

from .base import InvalidText, TidegateError

__all__ = [
    "AbsurdSubscribeBounds",
    "AmbiguousColumn",
    "AmbiguousFunction",
    "CannotCoerce",
    "CharacterNotInRepertoire",
    "DependentObjects",
    "DuplicateAlias",
    "DuplicateColumn",
    "DuplicateRelation",
    "GroupingError",
    "InvalidAsOf",
    "InvalidColumnReference",
    "InvalidName",
    "InvalidParameterValue",
    "InvalidTextRepresentation",
    "NotNullViolation",
    "NumericValueOutOfRange",
    "ObjectNotInPrerequisiteState",
    "ProgramLimitExceeded",
    "SqlDataError",
    "SqlDivisionByZero",
    "SqlError",
    "SqlSyntaxError",
    "SqlTypeError",
    "StatementTooComplex",
    "StringDataRightTruncation",
    "UndefinedColumn",
    "UndefinedFunction",
    "UndefinedObject",
    "UndefinedPlaceholder",
    "UnsupportedSql",
    "WrongObjectType",
    "data_error",
]


class SqlError(TidegateError, ValueError):
    """Base class of the SQL front end's errors: a statement refused before anything ran, or
    (:class:`SqlDataError`) a query whose evaluation failed.

    :attr:`sqlstate` is PostgreSQL's code for the condition (a class attribute of each
    subclass), so a client of the PostgreSQL wire protocol sees the code PostgreSQL would send.
    """

    sqlstate = "XX000"
    """PostgreSQL's SQLSTATE for this kind of error."""

    def __init__(
        self,
        message: str,
        *,
        position: int | None = None,
        sql: str | None = None,
        hint: str | None = None,
        sqlstate: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if sqlstate is not None:  # a more precise code than the class's (22P04 for a 22P02)
            self.sqlstate = sqlstate
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
            # Printable anywhere: a code point no encoder takes (a surrogate) is shown as U+FFFD.
            text = "".join("\ufffd" if "\ud800" <= ch <= "\udfff" else ch for ch in text)
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


class UndefinedFunction(SqlTypeError):
    """A function or operator that does not exist for these argument types (SQLSTATE 42883)."""

    sqlstate = "42883"


class AmbiguousFunction(SqlTypeError):
    """A call more than one function fits, as for an untyped argument
    (``extract(year FROM NULL)``, SQLSTATE 42725)."""

    sqlstate = "42725"


class CannotCoerce(SqlTypeError):
    """A cast between types that do not convert (``cannot cast type date to boolean``, 42846)."""

    sqlstate = "42846"


class GroupingError(SqlError):
    """A column neither grouped nor aggregated, or an aggregate where none may be (42803)."""

    sqlstate = "42803"


class InvalidColumnReference(SqlError):
    """An ``ORDER BY``/``GROUP BY`` position out of the select list, or an ``ORDER BY`` a set
    operation cannot sort by (SQLSTATE 42P10)."""

    sqlstate = "42P10"


class InvalidName(SqlError):
    """A name an object cannot have (empty, padded, reserved; SQLSTATE 42602)."""

    sqlstate = "42602"


class DuplicateAlias(SqlError):
    """A table or ``WITH`` name given twice in one ``FROM`` or ``WITH`` (SQLSTATE 42712)."""

    sqlstate = "42712"


class DuplicateColumn(SqlError):
    """A column named twice (in ``CREATE TABLE``, an ``INSERT`` column list, ...; 42701)."""

    sqlstate = "42701"


class DuplicateRelation(SqlError):
    """``CREATE`` of a name that is taken (``relation "t" already exists``, SQLSTATE 42P07)."""

    sqlstate = "42P07"


class DependentObjects(SqlError):
    """A ``DROP`` (or ``CREATE OR REPLACE``) of an object others read (SQLSTATE 2BP01)."""

    sqlstate = "2BP01"


class UndefinedPlaceholder(SqlError):
    """A ``$n`` with no ``n``-th parameter given (SQLSTATE 42P02, undefined_parameter)."""

    sqlstate = "42P02"


class InvalidAsOf(SqlError):
    """An ``AS OF`` time at which an input cannot be read (compacted past it), SQLSTATE 22023."""

    sqlstate = "22023"


class AbsurdSubscribeBounds(SqlError):
    """A ``SUBSCRIBE`` whose ``UP TO`` is before its as_of (given by ``AS OF`` or chosen), as
    Materialize refuses it (SQLSTATE 22000, as PostgreSQL answers a degenerate range)."""

    sqlstate = "22000"


class SqlDataError(SqlError):
    """A value a statement meets that its operation refuses (SQLSTATE class 22), found while
    binding constants or while the query ran (a replica's evaluation error)."""

    sqlstate = "22000"


class InvalidTextRepresentation(SqlDataError):
    """Text that is not a value of the type it is read as (``'abc'::bigint``, a wire parameter,
    a ``COPY`` field; SQLSTATE 22P02, binary data in the wrong format 22P03)."""

    sqlstate = "22P02"


class NumericValueOutOfRange(SqlDataError):
    """A number beyond its type (overflow, underflow, SQLSTATE 22003)."""

    sqlstate = "22003"


class SqlDivisionByZero(SqlDataError):
    """``x / 0``, ``x % 0`` (SQLSTATE 22012)."""

    sqlstate = "22012"


class InvalidParameterValue(SqlDataError):
    """An argument outside a function's or type modifier's domain, or ``SET name = value`` with
    a value the variable does not take (SQLSTATE 22023; a read-only variable 55P02)."""

    sqlstate = "22023"


class StringDataRightTruncation(SqlDataError):
    """A string too long for its ``varchar(n)`` column (SQLSTATE 22001)."""

    sqlstate = "22001"


class NotNullViolation(SqlError):
    """NULL written into a ``NOT NULL`` column (SQLSTATE 23502)."""

    sqlstate = "23502"


class ProgramLimitExceeded(SqlError):
    """An answer larger than the environment allows (SQLSTATE 54000)."""

    sqlstate = "54000"


class StatementTooComplex(ProgramLimitExceeded):
    """A statement nested deeper than the parser allows (SQLSTATE 54001, PostgreSQL's
    ``statement_too_complex``): refused before anything recurses into it."""

    sqlstate = "54001"


class ObjectNotInPrerequisiteState(SqlError):
    """An object a statement needs went away while it ran (dropped meanwhile, SQLSTATE 55000)."""

    sqlstate = "55000"


def data_error(message: str) -> SqlDataError:
    """The :class:`SqlDataError` of a query's evaluation error, from its recorded message.

    Evaluation errors travel as text (an error collection holds strings), worded by
    :mod:`tidegate.spec.plan.scalar_eval`; the wording says which kind it is.
    """
    low = message.lower()
    cls: type[SqlDataError]
    if "division by zero" in low:
        cls = SqlDivisionByZero
    elif "out of range" in low or "overflow" in low:  # numeric's "field overflow" too
        cls = NumericValueOutOfRange
    elif "invalid input syntax" in low:
        cls = InvalidTextRepresentation
    elif "too long for type" in low:
        cls = StringDataRightTruncation
    else:  # an argument outside its function's domain
        cls = InvalidParameterValue
    err = cls(message)
    for words, code in _DATA_CODES:
        if words in low:
            err.sqlstate = code  # the exact code, where PostgreSQL has one of its own
            break
    return err


_DATA_CODES = (
    ("more than one record produced in subquery", "21000"),
    ("square root of a negative", "2201F"),
    ("raised to a", "2201F"),
    ("logarithm", "2201E"),
    ("null character not permitted", "54000"),
    ("requested character", "54000"),
    ("requested length too large", "54000"),
    ("invalid regular expression", "2201B"),
    ("like pattern must not end", "22025"),
    ("invalid escape string", "22025"),
    ("negative substring length", "22011"),
)


class CharacterNotInRepertoire(SqlError, InvalidText):
    """SQL text (or a parameter) that is not Unicode scalar values: a lone UTF-16 surrogate
    (SQLSTATE 22021, what PostgreSQL answers for bytes that are not valid UTF-8)."""

    sqlstate = "22021"
