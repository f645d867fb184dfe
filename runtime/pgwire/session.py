"""One wire connection's conversation: frontend messages to the SQL session, results to
backend messages.

:class:`WireSession` takes the messages :class:`~.protocol.ServerConnection`
decodes (through a ``receive`` callable) and answers through ``send``: it
authenticates (:mod:`.auth`), reports the session's variables
(``ParameterStatus``), hands each statement to its
:class:`~tidegate.runtime.sql_session.SqlSession` and writes what comes back
(``RowDescription``, ``DataRow`` in text or binary per column, ``CommandComplete``,
``COPY`` data, notices). It owns the extended protocol's bookkeeping: prepared
statements and portals by name, a portal's remaining rows after ``Execute``
with a row limit (``PortalSuspended``), and the formats each column travels in.

Errors become ``ErrorResponse`` with their SQLSTATE, position and hint
(:func:`error_fields`), and the connection goes on: the session is usable after
an error. A statement runs inside a cancel scope that a ``CancelRequest``
(through :class:`Registry`) or ``statement_timeout`` cancels (57014).
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from tidegate.spec.errors import (
    ProtocolViolation,
    QueryCanceled,
    SqlError,
    TidegateError,
)
from tidegate.spec.sql import pgtypes as T

from ..sql import SqlEnvironment, SqlResult
from ..sql_session import (
    CopyIn,
    CopyOut,
    Prepared,
    RowStream,
    SqlSession,
    copy_text,
    shown,
)
from . import messages as m
from .auth import AuthConfig, AuthenticationFailed, ScramExchange, parse_sasl_initial

if TYPE_CHECKING:
    from ..catalog_queries import CatalogEngine

__all__ = ["Closed", "Raw", "Registry", "WireSession", "error_fields", "sqlstate_of"]

Receive = Callable[[], Awaitable[m.FrontendMessage]]
Send = Callable[[list[Any]], Awaitable[None]]
"""Sends backend messages (and :class:`Raw` bytes: DataRows encoded in bulk)."""


class Closed(Exception):
    """The client went away (or said Terminate)."""


# -- errors --------------------------------------------------------------------------------------

_SQLSTATES: dict[str, str] = {
    "UnknownCatalogObject": "42P01",
    "DuplicateCatalogName": "42P07",
    "HasDependents": "2BP01",
    "TypeMismatch": "42804",
    "ArityMismatch": "22P04",
    "UnknownColumn": "42703",
    "DivisionByZero": "22012",
    "NumericOverflow": "22003",
    "InvalidCast": "22P02",
    "InvalidArgument": "22023",
    "SinceViolation": "40001",
    "ReadBeyondUpper": "40001",
    "PeekOutOfRange": "40001",
    "DependencyDropped": "40001",
    "ResultTooLarge": "54000",
    "ReadOnlyEnvironment": "25006",
    # A write that reached storage but cannot be acknowledged (a newer controller took over
    # meanwhile): PostgreSQL's transaction_resolution_unknown
    "AppendOutcomeUnknown": "08007",
    "EnvironmentFenced": "57P01",
    "OracleFenced": "57P01",  # a newer controller's oracle took over: this one is going
    "ReplicasNotConnected": "57P03",
    "DriverNotRunning": "57P03",
    "ReplicaMissing": "42704",
    "PlanTooDeep": "54001",
    "SourceSchemaMismatch": "42804",
    # A read needs a source whose status reports an error: stalled (retry later, as for
    # replicas not yet connected) or ceased (drop and re-create it first)
    "SourceStalled": "57P03",
    "SourceCeased": "55000",
    "InvalidId": "42602",
    # A damaged record or file (its checksum does not match): PostgreSQL's data_corrupted
    "ConsensusCorrupt": "XX001",
    "BlobCorrupt": "XX001",
    "ConsensusStoreCorrupt": "XX001",
}


def sqlstate_of(e: BaseException) -> str:
    """PostgreSQL's SQLSTATE for an error: its own ``sqlstate`` if it has one, else by type."""
    state = getattr(e, "sqlstate", None)
    if isinstance(state, str) and len(state) == 5:
        return state
    for cls in type(e).__mro__:
        found = _SQLSTATES.get(cls.__name__)
        if found is not None:
            return found
    text = str(e).lower()
    if "division by zero" in text:
        return "22012"
    if "out of range" in text:
        return "22003"
    return "XX000"


def error_fields(e: BaseException, severity: str = "ERROR") -> tuple[tuple[str, str], ...]:
    """An ErrorResponse's fields for ``e``: severity, SQLSTATE, message, position, hint."""
    own = getattr(e, "message", None)
    if isinstance(e, TidegateError) and isinstance(own, str) and own:
        message = own  # a replica's error as it said it, not "peek of t3 at 17... failed: ..."
    elif isinstance(e, TidegateError):
        message = str(e)
    else:
        message = f"internal error: {type(e).__name__}: {e}"
    out = [("S", severity), ("V", severity), ("C", sqlstate_of(e)), ("M", message)]
    detail = getattr(e, "detail", None)
    if isinstance(detail, str) and detail:
        out.append(("D", detail))
    hint = getattr(e, "hint", None)
    if isinstance(hint, str) and hint:
        out.append(("H", hint))
    position = getattr(e, "position", None)
    if isinstance(position, int) and position > 0:
        out.append(("P", str(position)))
    return tuple(out)


def _error(e: BaseException, severity: str = "ERROR") -> m.ErrorResponse:
    return m.ErrorResponse(error_fields(e, severity))


def _notice(severity: str, message: str, code: str = "00000") -> m.NoticeResponse:
    if severity == "WARNING" and code == "00000":
        code = "01000"
    return m.NoticeResponse((("S", severity), ("V", severity), ("C", code), ("M", message)))


# -- cancellation --------------------------------------------------------------------------------


class Registry:
    """The sessions of one server by process id, with their secret keys, for CancelRequest."""

    def __init__(self) -> None:
        self._sessions: dict[int, WireSession] = {}
        self._next = 1

    def add(self, session: WireSession) -> tuple[int, int]:
        pid = self._next
        self._next += 1
        secret = secrets.randbits(31)
        self._sessions[pid] = session
        return pid, secret

    def remove(self, pid: int) -> None:
        self._sessions.pop(pid, None)

    def cancel(self, pid: int, secret: int) -> bool:
        """Cancel what the session ``pid`` runs, if ``secret`` is its key (else nothing)."""
        session = self._sessions.get(pid)
        if session is None or session.secret != secret:
            return False
        session.cancel()
        return True

    def __len__(self) -> int:
        return len(self._sessions)

    def sessions(self) -> list[WireSession]:
        return list(self._sessions.values())


# -- portals -------------------------------------------------------------------------------------


@dataclass
class _Portal:
    prepared: Prepared
    params: list[Any]
    formats: tuple[int, ...]  # per result column, once known
    result_formats: tuple[int, ...]
    outcome: Any = None
    rows: list[Any] | None = None  # rows not sent yet
    sent_description: bool = False
    done: bool = False
    tag: str = ""


@dataclass
class _Columns:
    names: tuple[str, ...]
    types: tuple[T.PgType, ...]
    formats: tuple[int, ...] = field(default=())


def _formats(requested: Sequence[int], n: int) -> tuple[int, ...]:
    if not requested:
        return (0,) * n
    if len(requested) == 1:
        return (requested[0],) * n
    if len(requested) != n:
        raise ProtocolViolation(
            f"bind message has {len(requested)} result formats but query has {n} columns",
            fatal=False,
        )
    return tuple(requested)


def _description(cols: _Columns) -> m.RowDescription:
    return m.RowDescription(
        tuple(
            m.FieldDescription(name, t.oid, t.length, -1, f)
            for name, t, f in zip(cols.names, cols.types, cols.formats, strict=True)
        )
    )


def _encoder(t: T.PgType, fmt: int) -> Callable[[Any], bytes]:
    if fmt == 1:
        return lambda v: T.binary_out(v, t)
    if t is T.TEXT:
        return lambda v: v.encode() if type(v) is str else T.text_out(v).encode()
    return lambda v: T.text_out(v, t).encode()


def _row_encoder(cols: _Columns) -> Callable[[Sequence[Any]], bytes]:
    from ._codec import encode_data_row

    encoders = [_encoder(t, f) for t, f in zip(cols.types, cols.formats, strict=True)]
    pairs = list(enumerate(encoders))

    def encode(row: Sequence[Any]) -> bytes:
        return encode_data_row([None if row[i] is None else enc(row[i]) for i, enc in pairs])

    return encode


class Raw:
    """Already-encoded bytes among backend messages (DataRows encoded in bulk)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


# -- the session ---------------------------------------------------------------------------------


class WireSession:
    """One connection's session (see the module docstring)."""

    def __init__(
        self,
        env: SqlEnvironment,
        *,
        auth: AuthConfig,
        tls: bool,
        registry: Registry,
        engine: CatalogEngine | None = None,
        nonce: Callable[[], bytes] = lambda: secrets.token_bytes(18),
    ) -> None:
        self.env = env
        self.auth = auth
        self.tls = tls
        self.registry = registry
        self.engine = engine
        self.nonce = nonce
        self.sql: SqlSession | None = None
        self.pid = 0
        self.secret = 0
        self.user = ""
        self._statements: dict[str, Prepared] = {}
        self._portals: dict[str, _Portal] = {}
        self._scope: anyio.CancelScope | None = None
        self._cancelled = False
        self.state = "new"  # new, authenticating, ready, closed

    def cancel(self) -> None:
        """Cancel the statement running now (a CancelRequest)."""
        if self._scope is not None:
            self._cancelled = True
            self._scope.cancel()

    # -- startup --------------------------------------------------------------------------------

    async def start(self, startup: m.StartupMessage, receive: Receive, send: Send) -> bool:
        """Authenticate and report; False if the client is turned away (a FATAL was sent)."""
        self.state = "authenticating"
        user = startup.get("user") or ""
        if not user:
            await send([_fatal("28000", "no PostgreSQL user name specified in startup packet")])
            return False
        self.user = user
        database = startup.get("database") or "materialize"
        if database != "materialize":
            await send([_fatal("3D000", f'database "{database}" does not exist')])
            return False
        try:
            await self._authenticate(user, receive, send)
        except AuthenticationFailed as e:
            await send([_error(e, "FATAL")])
            return False
        options = _startup_options(startup)
        try:
            self.sql = SqlSession(
                self.env, user=user, database=database, options=options, engine=self.engine
            )
        except SqlError as e:  # a startup parameter with a value it cannot take
            await send([_error(e, "FATAL")])
            return False
        self.pid, self.secret = self.registry.add(self)
        self.sql.pid = self.pid
        out: list[m.BackendMessage] = [m.AuthenticationOk()]
        minor = startup.version & 0xFFFF
        ignored = tuple(k for k, _v in startup.parameters if k.startswith("_pq_."))
        if minor > 0 or ignored:
            out.insert(0, m.NegotiateProtocolVersion(0, ignored))
        out += [m.ParameterStatus(k, v) for k, v in self.sql.reported()]
        out.append(m.BackendKeyData(self.pid, self.secret))
        out += self._pending()
        out.append(m.ReadyForQuery("I"))
        await send(out)
        self.state = "ready"
        return True

    async def _authenticate(self, user: str, receive: Receive, send: Send) -> None:
        auth = self.auth
        if auth.method == "trust":
            return
        if auth.method == "password" and self.tls:
            await send([m.AuthenticationCleartextPassword()])
            msg = await receive()
            if not isinstance(msg, m.PasswordMessage):
                raise AuthenticationFailed("expected a password", "08P01")
            password = msg.data.rstrip(b"\0").decode(errors="replace")
            if not auth.check_password(user, password):
                raise AuthenticationFailed(f'password authentication failed for user "{user}"')
            return
        await send([m.AuthenticationSASL(("SCRAM-SHA-256",))])
        first = await receive()
        if not isinstance(first, m.PasswordMessage):
            raise AuthenticationFailed("expected a SASL response", "08P01")
        mechanism, client_first = parse_sasl_initial(first.data)
        if mechanism != "SCRAM-SHA-256":
            raise AuthenticationFailed(f"unsupported SASL mechanism {mechanism!r}", "28000")
        salt = self.nonce()[:16]
        exchange = ScramExchange(auth.verifier(user, salt), self.nonce())
        await send([m.AuthenticationSASLContinue(exchange.first(client_first))])
        final = await receive()
        if not isinstance(final, m.PasswordMessage):
            raise AuthenticationFailed("expected a SASL response", "08P01")
        try:
            server_final = exchange.final(final.data)
        except AuthenticationFailed as e:
            if e.sqlstate == "28P01":
                raise AuthenticationFailed(
                    f'password authentication failed for user "{user}"'
                ) from None
            raise
        await send([m.AuthenticationSASLFinal(server_final)])

    def close(self) -> None:
        if self.pid:
            self.registry.remove(self.pid)
        self.state = "closed"

    # -- the query phase ------------------------------------------------------------------------

    def _pending(self) -> list[m.BackendMessage]:
        """Notices and changed parameters the SQL session has for the client."""
        sql = self.sql
        if sql is None:
            return []
        out: list[m.BackendMessage] = [_notice(sev, msg) for sev, msg in sql.notices]
        out += [m.ParameterStatus(k, v) for k, v in sql.changed]
        sql.notices.clear()
        sql.changed.clear()
        return out

    def _ready(self) -> m.ReadyForQuery:
        assert self.sql is not None
        return m.ReadyForQuery(self.sql.transaction_status)  # type: ignore[arg-type]

    async def handle(self, msg: m.FrontendMessage, receive: Receive, send: Send) -> None:
        """Answer one message of the query phase [Closed]."""
        assert self.sql is not None
        if isinstance(msg, m.Terminate):
            raise Closed
        if isinstance(msg, m.Query):
            await self._simple(msg.sql, receive, send)
            return
        if isinstance(msg, m.Sync):
            self._portals.pop("", None)
            await send([*self._pending(), self._ready()])
            return
        if isinstance(msg, m.Flush):
            return
        try:
            out = await self._extended(msg, receive, send)
        except Closed:
            raise
        except BaseException as e:
            if not self._answerable(e):
                raise
            self.sql.fail()
            await send([*self._pending(), _error(self._canceled(e))])
            return
        if out:
            await send(out)

    def _answerable(self, e: BaseException) -> bool:
        """Whether ``e`` ends the statement with an ``ErrorResponse`` and the session goes on:
        an error, or the cancellation a CancelRequest asked for. Anything else (another
        cancellation, the process exiting or being killed) ends the session."""
        if isinstance(e, anyio.get_cancelled_exc_class()):
            return self._cancelled
        return isinstance(e, Exception)

    def _canceled(self, e: BaseException) -> BaseException:
        if isinstance(e, anyio.get_cancelled_exc_class()) or self._cancelled:
            self._cancelled = False
            return QueryCanceled("canceling statement due to user request")
        if isinstance(e, TimeoutError) and getattr(e, "statement_timeout", False):
            return e
        return e

    async def _run(self, coro: Callable[[], Awaitable[Any]], interruptible: bool = True) -> Any:
        """``coro()`` inside a scope that a CancelRequest or ``statement_timeout`` cancels; a
        statement that is not ``interruptible`` (DDL, writes) runs shielded to its end."""
        assert self.sql is not None
        if not interruptible:
            with anyio.CancelScope(shield=True):
                return await coro()
        timeout = self.sql.timeout_ms("statement_timeout")
        with anyio.CancelScope() as scope:
            self._scope = scope
            self._cancelled = False
            try:
                if timeout:
                    with anyio.fail_after(timeout / 1000):
                        return await coro()
                return await coro()
            except TimeoutError:
                raise QueryCanceled(
                    "canceling statement due to statement timeout",
                    hint="Consider increasing the maximum allowed statement duration for this "
                    "session by setting the statement_timeout session variable. For example, "
                    "`SET statement_timeout = '60s'`.",
                ) from None
            finally:
                self._scope = None
        # the scope was cancelled: a CancelRequest
        self._cancelled = False
        raise QueryCanceled("canceling statement due to user request")

    async def _simple(self, sql: str, receive: Receive, send: Send) -> None:
        session = self.sql
        assert session is not None
        try:
            statements = await session.split(sql)
        except SqlError as e:
            session.fail()
            await send([_error(e), self._ready()])
            return
        if not statements:
            await send([m.EmptyQueryResponse(), self._ready()])
            return
        text = sql
        try:
            # A script is one implicit transaction: an error midway (raised through the
            # block) leaves the catalog, the controller and the tables as they were.
            async with session.script(statements):
                for text, _offset in statements:
                    prepared = await session.prepare_async(text)

                    def run(p: Prepared = prepared) -> Awaitable[Any]:
                        return session.execute(p, [])

                    outcome = await self._run(run, session.interruptible(prepared))
                    await self._answer(outcome, None, 0, receive, send, simple=True)
        except Closed:
            raise
        except BaseException as e:
            if not self._answerable(e):
                raise
            session.fail()
            err = self._canceled(e)
            if isinstance(err, SqlError):
                err.located(shown(text))
            await send([*self._pending(), _error(err), self._ready()])
            return
        await send([*self._pending(), self._ready()])

    async def _extended(
        self, msg: m.FrontendMessage, receive: Receive, send: Send
    ) -> list[m.BackendMessage]:
        session = self.sql
        assert session is not None
        if isinstance(msg, m.Parse):
            if msg.name and msg.name in self._statements:
                err = SqlError(f'prepared statement "{msg.name}" already exists')
                err.sqlstate = "42P05"
                raise err
            prepared = await session.prepare_async(msg.sql, msg.param_types)
            self._statements[msg.name] = prepared
            return [m.ParseComplete()]
        if isinstance(msg, m.Bind):
            prepared = self._statement(msg.statement)
            if msg.portal and msg.portal in self._portals:
                err = SqlError(f'portal "{msg.portal}" already exists')
                err.sqlstate = "42P03"
                raise err
            params = _decode_params(prepared, msg)
            self._portals[msg.portal] = _Portal(prepared, params, (), msg.result_formats)
            return [m.BindComplete()]
        if isinstance(msg, m.Describe):
            if msg.kind == "S":
                prepared = self._statement(msg.name)
                d = await self._run(lambda: session.describe(prepared))
                out: list[m.BackendMessage] = [
                    m.ParameterDescription(tuple(t.oid for t in d.params))
                ]
                if d.columns is None:
                    out.append(m.NoData())
                else:
                    cols = _Columns(d.columns, d.pg_types, (0,) * len(d.columns))
                    out.append(_description(cols))
                return out
            portal = self._portal(msg.name)
            d = await self._run(lambda: session.describe(portal.prepared))
            if d.columns is None:
                return [m.NoData()]
            portal.formats = _formats(portal.result_formats, len(d.columns))
            portal.sent_description = True
            return [_description(_Columns(d.columns, d.pg_types, portal.formats))]
        if isinstance(msg, m.Execute):
            portal = self._portal(msg.portal)
            await self._execute(portal, msg.max_rows, receive, send)
            return []
        if isinstance(msg, m.Close):
            if msg.kind == "S":
                self._statements.pop(msg.name, None)
            else:
                closed = self._portals.pop(msg.name) if msg.name in self._portals else None
                if closed is not None and isinstance(closed.outcome, RowStream):
                    await closed.outcome.aclose()
            return [m.CloseComplete()]
        if isinstance(msg, m.FunctionCall):
            err = SqlError("the fast-path function call protocol is not supported")
            err.sqlstate = "0A000"
            raise err
        if isinstance(msg, m.PasswordMessage | m.StartupMessage):
            raise ProtocolViolation(f"unexpected {type(msg).__name__}", fatal=False)
        return []

    def _statement(self, name: str) -> Prepared:
        found = self._statements.get(name)
        if found is None:
            err = SqlError(f'prepared statement "{name}" does not exist')
            err.sqlstate = "26000"
            raise err
        return found

    def _portal(self, name: str) -> _Portal:
        found = self._portals.get(name)
        if found is None:
            err = SqlError(f'portal "{name}" does not exist')
            err.sqlstate = "34000"
            raise err
        return found

    async def _execute(self, portal: _Portal, max_rows: int, receive: Receive, send: Send) -> None:
        session = self.sql
        assert session is not None
        if portal.done:
            await send([m.CommandComplete(portal.tag or "SELECT 0")])
            return
        if portal.outcome is None:
            prepared, params = portal.prepared, portal.params
            portal.outcome = await self._run(
                lambda: session.execute(prepared, params), session.interruptible(prepared)
            )
        await self._answer(portal.outcome, portal, max_rows, receive, send, simple=False)

    # -- answering ------------------------------------------------------------------------------

    async def _answer(
        self,
        outcome: Any,
        portal: _Portal | None,
        max_rows: int,
        receive: Receive,
        send: Send,
        *,
        simple: bool,
    ) -> None:
        """Send what one statement answered (all of it, or ``max_rows`` rows of a portal)."""
        session = self.sql
        assert session is not None
        pending = self._pending()
        if isinstance(outcome, SqlResult):
            if outcome.notice and (portal is None or portal.outcome is not None):
                pending += [_notice("NOTICE", n) for n in outcome.notice.split("\n") if n]
                outcome.notice = None  # said once, even if a portal is executed again
            if outcome.status == "EMPTY":
                await send([*pending, m.EmptyQueryResponse()])
                return
            if not outcome.columns:
                if portal is not None:
                    portal.done, portal.tag = True, outcome.status
                await send([*pending, m.CommandComplete(outcome.status)])
                return
            types = outcome.pg_types or tuple(T.for_scalar(t.scalar) for t in outcome.types)
            await self._rows(
                pending,
                outcome.columns,
                types,
                outcome.rows,
                outcome.status,
                portal,
                max_rows,
                send,
                simple,
            )
            return
        if isinstance(outcome, RowStream):
            await self._stream(pending, outcome, portal, max_rows, send, simple)
            return
        if isinstance(outcome, CopyOut):
            await self._copy_out(pending, outcome, send)
            if portal is not None:
                portal.done = True
            return
        if isinstance(outcome, CopyIn):
            result = await self._copy_in(pending, outcome, receive, send)
            if portal is not None:
                portal.done, portal.tag = True, result.status
            await send([m.CommandComplete(result.status)])
            return
        raise TypeError(f"unknown outcome {outcome!r}")

    async def _rows(
        self,
        pending: list[m.BackendMessage],
        names: tuple[str, ...],
        types: tuple[T.PgType, ...],
        rows: list[Any],
        tag: str,
        portal: _Portal | None,
        max_rows: int,
        send: Send,
        simple: bool,
    ) -> None:
        out: list[Any] = list(pending)
        if portal is None:
            cols = _Columns(names, types, (0,) * len(names))
            out.append(_description(cols))
            batch = rows
        else:
            if not portal.formats:
                portal.formats = _formats(portal.result_formats, len(names))
            cols = _Columns(names, types, portal.formats)
            if portal.rows is None:
                portal.rows = list(rows)
                portal.tag = tag
            if max_rows > 0 and len(portal.rows) > max_rows:
                batch, portal.rows = portal.rows[:max_rows], portal.rows[max_rows:]
                encode = _row_encoder(cols)
                out.append(Raw(b"".join(encode(r) for r in batch)))
                out.append(m.PortalSuspended())
                await send(out)
                return
            batch, portal.rows = portal.rows, []
            portal.done = True
        encode = _row_encoder(cols)
        out.append(Raw(b"".join(encode(r) for r in batch)))
        if portal is not None and tag.startswith("SELECT"):
            tag = f"SELECT {len(batch)}"  # PostgreSQL counts the rows of this Execute
        out.append(m.CommandComplete(tag))
        await send(out)

    async def _stream(
        self,
        pending: list[m.BackendMessage],
        stream: RowStream,
        portal: _Portal | None,
        max_rows: int,
        send: Send,
        simple: bool,
    ) -> None:
        """A subscription's rows as they come: until it ends or is cancelled (simple query, or
        Execute without a limit), or ``max_rows`` of them (PortalSuspended)."""
        names, types = stream.columns, stream.pg_types
        if portal is not None:
            if not portal.formats:
                portal.formats = _formats(portal.result_formats, len(names))
            cols = _Columns(names, types, portal.formats)
        else:
            cols = _Columns(names, types, (0,) * len(names))
            pending = [*pending, _description(cols)]
        encode = _row_encoder(cols)
        buffered = portal.rows if portal is not None and portal.rows else []
        sent = 0
        first: list[Any] = list(pending)
        try:
            while True:
                if max_rows > 0 and len(buffered) >= max_rows - sent:
                    take = max_rows - sent
                    chunk, buffered = buffered[:take], buffered[take:]
                    first.append(Raw(b"".join(encode(r) for r in chunk)))
                    first.append(m.PortalSuspended())
                    assert portal is not None
                    portal.rows = buffered
                    await send(first)
                    return
                if buffered:
                    first.append(Raw(b"".join(encode(r) for r in buffered)))
                    sent += len(buffered)
                    buffered = []
                if first:
                    await send(first)
                    first = []
                try:
                    batch = await self._run(lambda: anext(stream.batches))
                except StopAsyncIteration:
                    break
                buffered = list(batch)
        except BaseException:
            await stream.aclose()
            raise
        await stream.aclose()
        if portal is not None:
            portal.done, portal.tag = True, f"SUBSCRIBE {sent}"
        await send([*first, m.CommandComplete(f"SUBSCRIBE {sent}")])

    async def _copy_out(self, pending: list[m.BackendMessage], copy: CopyOut, send: Send) -> None:
        opts = copy.options
        n = len(copy.columns)
        binary = opts.format == "binary"
        out: list[Any] = [
            *pending,
            m.CopyOutResponse(1 if binary else 0, (1 if binary else 0,) * n),
        ]
        if binary:
            out.append(m.CopyData(b"PGCOPY\n\xff\r\n\0" + b"\0\0\0\0" + b"\0\0\0\0"))
        elif opts.header:
            out.append(m.CopyData(copy_text(copy.columns, opts)))

        def encode(row: Any) -> bytes:
            if not binary:
                return copy_text(row, opts, copy.pg_types)
            parts = [len(row).to_bytes(2, "big", signed=True)]
            for v, t in zip(row, copy.pg_types, strict=True):
                if v is None:
                    parts.append(b"\xff\xff\xff\xff")
                else:
                    data = T.binary_out(v, t)
                    parts.append(len(data).to_bytes(4, "big", signed=True) + data)
            return b"".join(parts)

        count = 0
        if copy.rows is not None:  # one row per CopyData, as PostgreSQL sends (psycopg reads so)
            data = b"".join(_copy_data(encode(row)) for row in copy.rows)
            out.append(Raw(data))
            count = len(copy.rows)
        else:
            stream = copy.stream
            assert stream is not None
            await send(out)
            out = []
            try:
                while True:
                    try:
                        batch = await self._run(lambda: anext(stream.batches))
                    except StopAsyncIteration:
                        break
                    if batch:
                        count += len(batch)
                        await send([Raw(b"".join(_copy_data(encode(r)) for r in batch))])
            finally:
                await stream.aclose()
        if binary:
            out.append(m.CopyData(b"\xff\xff"))
        out += [m.CopyDone(), m.CommandComplete(f"COPY {count}")]
        await send(out)

    async def _copy_in(
        self, pending: list[m.BackendMessage], copy: CopyIn, receive: Receive, send: Send
    ) -> SqlResult:
        session = self.sql
        assert session is not None
        n = len(copy.columns)
        await send([*pending, m.CopyInResponse(0, (0,) * n)])
        chunks: list[bytes] = []
        failed: BaseException | None = None
        while True:
            msg = await receive()
            if isinstance(msg, m.CopyData):
                chunks.append(msg.data)
            elif isinstance(msg, m.CopyDone):
                break
            elif isinstance(msg, m.CopyFail):
                err = SqlError(f"COPY from stdin failed: {msg.message}")
                err.sqlstate = "57014"
                failed = err
                break
            elif isinstance(msg, m.Terminate):
                raise Closed
        if failed is not None:
            raise failed
        data = b"".join(chunks)
        return await self._run(  # type: ignore[no-any-return]
            lambda: session.copy_in(copy, data), interruptible=False
        )


def _copy_data(data: bytes) -> bytes:
    return b"d" + (len(data) + 4).to_bytes(4, "big") + data


def _fatal(code: str, message: str) -> m.ErrorResponse:
    return m.ErrorResponse((("S", "FATAL"), ("V", "FATAL"), ("C", code), ("M", message)))


def _startup_options(startup: m.StartupMessage) -> dict[str, str]:
    """The session variables a startup message sets: its parameters (``application_name``,
    ``client_encoding``, ...) and ``options`` (``-c name=value`` or ``--name=value``)."""
    out: dict[str, str] = {}
    for k, v in startup.parameters:
        if k in ("user", "database", "options", "replication") or k.startswith("_pq_."):
            continue
        out[k] = v
    options = startup.get("options") or ""
    words = _split_options(options)
    i = 0
    while i < len(words):
        w = words[i]
        if w == "-c" and i + 1 < len(words):
            name, _, value = words[i + 1].partition("=")
            out[name.replace("-", "_")] = value
            i += 2
            continue
        if w.startswith("--") or w.startswith("-c"):
            name, _, value = w[2:].partition("=")
            out[name.replace("-", "_")] = value
        i += 1
    return out


def _split_options(text: str) -> list[str]:
    """libpq's options string: words split at spaces, ``\\ `` a space inside a word."""
    words: list[str] = []
    cur = ""
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            cur += text[i + 1]
            i += 2
            continue
        if ch.isspace():
            if cur:
                words.append(cur)
            cur = ""
        else:
            cur += ch
        i += 1
    if cur:
        words.append(cur)
    return words


def _decode_params(prepared: Prepared, bind: m.Bind) -> list[Any]:
    types = prepared.params
    values = bind.params
    if len(values) != len(types):
        raise ProtocolViolation(
            f"bind message supplies {len(values)} parameters, but prepared statement "
            f"requires {len(types)}",
            fatal=False,
        )
    formats = bind.param_formats
    if formats and len(formats) not in (1, len(values)):
        raise ProtocolViolation(
            f"bind message has {len(formats)} parameter formats but {len(values)} parameters",
            fatal=False,
        )
    out: list[Any] = []
    for i, (raw, t) in enumerate(zip(values, types, strict=True)):
        fmt = formats[0] if len(formats) == 1 else formats[i] if formats else 0
        if raw is None:
            out.append(None)
        elif fmt == 1:
            out.append(T.binary_in(raw, t))
        else:
            try:
                text = raw.decode()
            except UnicodeDecodeError:
                raise ProtocolViolation(
                    "invalid byte sequence for encoding UTF8", fatal=False, sqlstate="22021"
                ) from None
            out.append(T.text_in(text, t))
    return out
