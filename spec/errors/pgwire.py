"""Errors of the SQL session (transactions, session variables, cursors, ``COPY``) and of the
PostgreSQL frontend/backend protocol.

The session's errors are :class:`~tidegate.spec.errors.sql.SqlError`\\ s: each carries
PostgreSQL's SQLSTATE (``sqlstate``), which the wire protocol sends in its
``ErrorResponse``. :class:`ProtocolViolation` is the peer breaking the protocol itself
(a malformed or out-of-order message): the connection cannot go on after it.
"""

from __future__ import annotations

from .base import TidegateError
from .sql import SqlError

__all__ = [
    "ActiveSqlTransaction",
    "InFailedSqlTransaction",
    "InvalidCursorName",
    "InvalidTransactionState",
    "NoActiveSqlTransaction",
    "ProtocolViolation",
    "QueryCanceled",
    "ReadOnlySqlTransaction",
    "UndefinedParameter",
    "UndefinedPreparedStatement",
]


class UndefinedParameter(SqlError):
    """``SET``/``SHOW`` of a variable that does not exist (SQLSTATE 42704)."""

    sqlstate = "42704"


class InvalidTransactionState(SqlError):
    """A statement the current transaction cannot take: a read in a write-only transaction,
    DDL inside a transaction block (SQLSTATE 25000 and kin)."""

    sqlstate = "25000"


class ReadOnlySqlTransaction(InvalidTransactionState):
    """A write in a read-only transaction (SQLSTATE 25006)."""

    sqlstate = "25006"


class ActiveSqlTransaction(InvalidTransactionState):
    """A statement that cannot run inside a transaction block (SQLSTATE 25001)."""

    sqlstate = "25001"


class NoActiveSqlTransaction(InvalidTransactionState):
    """A statement that needs a transaction block, outside one (``DECLARE`` without ``BEGIN``:
    SQLSTATE 25P01)."""

    sqlstate = "25P01"


class InFailedSqlTransaction(InvalidTransactionState):
    """A statement in a transaction that already failed: ignored until ``ROLLBACK`` (25P02)."""

    sqlstate = "25P02"

    def __init__(self) -> None:
        super().__init__(
            "current transaction is aborted, commands ignored until end of transaction block"
        )


class InvalidCursorName(SqlError):
    """``FETCH``/``CLOSE`` of a cursor that does not exist, or a second ``DECLARE`` of one
    (SQLSTATE 34000; a duplicate is 42P03)."""

    sqlstate = "34000"

    def __init__(self, message: str, *, sqlstate: str = "34000", **kwargs: object) -> None:
        super().__init__(message, **kwargs)  # type: ignore[arg-type]
        self.sqlstate = sqlstate


class UndefinedPreparedStatement(SqlError):
    """``Bind``/``Describe``/``Execute`` of a statement or portal that does not exist
    (SQLSTATE 26000 for a statement, 34000 for a portal)."""

    sqlstate = "26000"

    def __init__(self, message: str, *, sqlstate: str = "26000", **kwargs: object) -> None:
        super().__init__(message, **kwargs)  # type: ignore[arg-type]
        self.sqlstate = sqlstate


class QueryCanceled(SqlError):
    """A statement cancelled by a ``CancelRequest`` or by ``statement_timeout`` (SQLSTATE 57014)."""

    sqlstate = "57014"


class ProtocolViolation(TidegateError, ValueError):
    """The peer broke the frontend/backend protocol: an unknown or malformed message, a length
    out of bounds, a message the connection's state does not take (SQLSTATE 08P01).

    ``fatal`` says whether the connection must close: a message whose framing cannot be
    trusted (a bad length, bytes before a startup packet) is fatal; a well-framed message
    that is merely unexpected is answered with an error and the connection goes on.
    """

    sqlstate = "08P01"

    def __init__(self, message: str, *, fatal: bool = True, sqlstate: str = "08P01") -> None:
        super().__init__(message)
        self.message = message
        self.fatal = fatal
        self.sqlstate = sqlstate
