"""The messages of the PostgreSQL frontend/backend protocol, version 3, as frozen dataclasses.

Frontend messages are what a client sends (the events :class:`~.protocol.ServerConnection`
emits); backend messages are what the server sends (what it takes). Each class names the
message as PostgreSQL's documentation does ("Message Formats"); the byte each is tagged
with is in :mod:`._codec`. Field values are already decoded (``str`` for strings, ``None``
for a NULL parameter or column value), except data that is the client's to interpret:
parameter and row values stay ``bytes``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, TypeAlias

__all__ = [
    "AuthenticationCleartextPassword",
    "AuthenticationOk",
    "AuthenticationSASL",
    "AuthenticationSASLContinue",
    "AuthenticationSASLFinal",
    "BackendKeyData",
    "BackendMessage",
    "Bind",
    "BindComplete",
    "CancelRequest",
    "Close",
    "CloseComplete",
    "CommandComplete",
    "CopyData",
    "CopyDone",
    "CopyFail",
    "CopyInResponse",
    "CopyOutResponse",
    "DataRow",
    "Describe",
    "EmptyQueryResponse",
    "ErrorResponse",
    "Execute",
    "FieldDescription",
    "Flush",
    "FrontendMessage",
    "FunctionCall",
    "GSSENCRequest",
    "NegotiateProtocolVersion",
    "NoData",
    "NoticeResponse",
    "ParameterDescription",
    "ParameterStatus",
    "Parse",
    "ParseComplete",
    "PasswordMessage",
    "PortalSuspended",
    "Query",
    "ReadyForQuery",
    "RowDescription",
    "SSLRequest",
    "StartupMessage",
    "Sync",
    "Terminate",
]


# -- frontend: the startup packet's kinds (no type byte) ----------------------------------------


@dataclass(frozen=True, slots=True)
class StartupMessage:
    """Protocol version (``major << 16 | minor``) and the connection's parameters (``user``,
    ``database``, ``application_name``, ``options``, ...)."""

    version: int
    parameters: tuple[tuple[str, str], ...]

    def get(self, name: str, default: str | None = None) -> str | None:
        return next((v for k, v in self.parameters if k == name), default)


@dataclass(frozen=True, slots=True)
class SSLRequest:
    """The client asks for TLS before its startup message (answered ``S`` or ``N``)."""


@dataclass(frozen=True, slots=True)
class GSSENCRequest:
    """The client asks for GSSAPI encryption (answered ``N``: not offered)."""


@dataclass(frozen=True, slots=True)
class CancelRequest:
    """On a new connection: cancel what the session with this key is running."""

    process_id: int
    secret_key: int


# -- frontend: typed messages -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PasswordMessage:
    """A ``p`` message: a password, or a SASL initial response or response; what it holds
    depends on what the server asked for, so it stays bytes (see :mod:`.auth`)."""

    data: bytes


@dataclass(frozen=True, slots=True)
class Query:
    """Simple query: one or more statements, separated by ``;``."""

    sql: str


@dataclass(frozen=True, slots=True)
class Parse:
    """Extended protocol: prepare ``sql`` as statement ``name`` (``""``: the unnamed one);
    ``param_types`` are OIDs the client fixes (0: the server infers)."""

    name: str
    sql: str
    param_types: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Bind:
    """Bind parameter values to a prepared statement, making portal ``portal``.

    ``param_formats``/``result_formats`` are 0 (text) or 1 (binary): none means all text,
    one means that one for all, else one per parameter / column.
    """

    portal: str
    statement: str
    param_formats: tuple[int, ...] = ()
    params: tuple[bytes | None, ...] = ()
    result_formats: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Describe:
    """Describe statement (``S``) or portal (``P``) ``name``."""

    kind: Literal["S", "P"]
    name: str


@dataclass(frozen=True, slots=True)
class Execute:
    """Run portal ``portal``, at most ``max_rows`` rows (0: all)."""

    portal: str
    max_rows: int = 0


@dataclass(frozen=True, slots=True)
class Close:
    """Close statement (``S``) or portal (``P``) ``name``."""

    kind: Literal["S", "P"]
    name: str


@dataclass(frozen=True, slots=True)
class Sync:
    """End of an extended-protocol batch: commit an implicit transaction, then ReadyForQuery."""


@dataclass(frozen=True, slots=True)
class Flush:
    """Send what is buffered."""


@dataclass(frozen=True, slots=True)
class Terminate:
    """The client closes the connection."""


@dataclass(frozen=True, slots=True)
class CopyData:
    """A chunk of ``COPY`` data (either direction)."""

    data: bytes


@dataclass(frozen=True, slots=True)
class CopyDone:
    """The end of ``COPY`` data (either direction)."""


@dataclass(frozen=True, slots=True)
class CopyFail:
    """The client aborts ``COPY FROM STDIN``."""

    message: str


@dataclass(frozen=True, slots=True)
class FunctionCall:
    """The fast-path function call (refused: ``0A000``); the arguments are not decoded."""

    function_oid: int


FrontendMessage: TypeAlias = (
    StartupMessage
    | SSLRequest
    | GSSENCRequest
    | CancelRequest
    | PasswordMessage
    | Query
    | Parse
    | Bind
    | Describe
    | Execute
    | Close
    | Sync
    | Flush
    | Terminate
    | CopyData
    | CopyDone
    | CopyFail
    | FunctionCall
)


# -- backend ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AuthenticationOk:
    pass


@dataclass(frozen=True, slots=True)
class AuthenticationCleartextPassword:
    pass


@dataclass(frozen=True, slots=True)
class AuthenticationSASL:
    mechanisms: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AuthenticationSASLContinue:
    data: bytes


@dataclass(frozen=True, slots=True)
class AuthenticationSASLFinal:
    data: bytes


@dataclass(frozen=True, slots=True)
class ParameterStatus:
    name: str
    value: str


@dataclass(frozen=True, slots=True)
class BackendKeyData:
    process_id: int
    secret_key: int


@dataclass(frozen=True, slots=True)
class ReadyForQuery:
    """``I`` idle, ``T`` in a transaction block, ``E`` in a failed one."""

    status: Literal["I", "T", "E"]


@dataclass(frozen=True, slots=True)
class FieldDescription:
    """One column of a RowDescription."""

    name: str
    type_oid: int
    type_size: int = -1
    type_modifier: int = -1
    format: int = 0
    table_oid: int = 0
    column: int = 0


@dataclass(frozen=True, slots=True)
class RowDescription:
    fields: tuple[FieldDescription, ...]


@dataclass(frozen=True, slots=True)
class DataRow:
    values: tuple[bytes | None, ...]


@dataclass(frozen=True, slots=True)
class CommandComplete:
    tag: str


@dataclass(frozen=True, slots=True)
class EmptyQueryResponse:
    pass


@dataclass(frozen=True, slots=True)
class ErrorResponse:
    """Fields by PostgreSQL's one-letter codes: ``S``/``V`` severity, ``C`` SQLSTATE, ``M``
    message, ``D`` detail, ``H`` hint, ``P`` position, ..."""

    fields: tuple[tuple[str, str], ...]

    def get(self, code: str) -> str | None:
        return next((v for k, v in self.fields if k == code), None)


@dataclass(frozen=True, slots=True)
class NoticeResponse:
    fields: tuple[tuple[str, str], ...]

    def get(self, code: str) -> str | None:
        return next((v for k, v in self.fields if k == code), None)


@dataclass(frozen=True, slots=True)
class ParseComplete:
    pass


@dataclass(frozen=True, slots=True)
class BindComplete:
    pass


@dataclass(frozen=True, slots=True)
class CloseComplete:
    pass


@dataclass(frozen=True, slots=True)
class ParameterDescription:
    type_oids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class NoData:
    pass


@dataclass(frozen=True, slots=True)
class PortalSuspended:
    pass


@dataclass(frozen=True, slots=True)
class CopyInResponse:
    """``format`` 0 text, 1 binary; one format per column."""

    format: int
    column_formats: tuple[int, ...] = field(default=())


@dataclass(frozen=True, slots=True)
class CopyOutResponse:
    format: int
    column_formats: tuple[int, ...] = field(default=())


@dataclass(frozen=True, slots=True)
class NegotiateProtocolVersion:
    """The newest minor version the server speaks, and the ``_pq_.`` options it ignored."""

    newest_minor: int
    unrecognized: tuple[str, ...] = ()


BackendMessage: TypeAlias = (
    AuthenticationOk
    | AuthenticationCleartextPassword
    | AuthenticationSASL
    | AuthenticationSASLContinue
    | AuthenticationSASLFinal
    | ParameterStatus
    | BackendKeyData
    | ReadyForQuery
    | RowDescription
    | DataRow
    | CommandComplete
    | EmptyQueryResponse
    | ErrorResponse
    | NoticeResponse
    | ParseComplete
    | BindComplete
    | CloseComplete
    | ParameterDescription
    | NoData
    | PortalSuspended
    | CopyInResponse
    | CopyOutResponse
    | CopyData
    | CopyDone
    | NegotiateProtocolVersion
)
