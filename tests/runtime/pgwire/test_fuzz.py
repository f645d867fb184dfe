"""The wire server under hostile bytes: random and truncated messages, wrong and huge lengths,
messages out of order, connections dropped mid-message.

Laws, checked against the served environment after every case:

* the server never crashes: a fresh, well-behaved client connects and queries afterwards;
* a connection sees only what it asked for: no bytes of another session's rows (the
  fuzzing connections never see a secret that only another session's table holds);
* a DDL statement is applied whole or not at all: after a connection is cut while sending
  ``CREATE TABLE``/``CREATE VIEW``, each object either exists with all its columns or not at
  all, and the catalog still answers.
"""

from __future__ import annotations

import contextlib
import random
import socket
import struct
import time

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidegate.runtime.pgwire import messages as m
from tidegate.runtime.pgwire._codec import encode_frontend

from .conftest import Server

pytestmark = pytest.mark.timeout(300)

SECRET = "s3cr3t-only-for-its-owner"


def _startup() -> bytes:
    return encode_frontend(
        m.StartupMessage(3 << 16, (("user", "materialize"), ("database", "materialize")))
    )


def _send_raw(pg: Server, data: bytes, read: bool = True) -> bytes:
    """Send ``data`` on a fresh connection, read what comes back until the server closes or
    stays quiet; the bytes received."""
    out = b""
    with socket.create_connection((pg.host, pg.port), timeout=10) as s:
        try:
            s.sendall(data)
            if not read:
                return b""
            s.settimeout(0.3)
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                out += chunk
        except (TimeoutError, ConnectionResetError, BrokenPipeError):
            pass
    return out


def _healthy(pg: Server) -> None:
    with psycopg.connect(pg.url, autocommit=True, connect_timeout=10) as c:
        assert c.execute("SELECT 1 + 1 AS two FROM fuzz_secret LIMIT 1").fetchall() in ([], [(2,)])


@pytest.fixture(scope="module")
def secret_table(pg_server: Server) -> Server:
    with psycopg.connect(pg_server.url, autocommit=True) as c:
        c.execute("CREATE TABLE IF NOT EXISTS fuzz_secret (s text)")
        c.execute(f"INSERT INTO fuzz_secret VALUES ('{SECRET}')")
    return pg_server


_TAGS = [*b"QPBDECSHXdcfpF", ord("z"), 0]

frames = st.one_of(
    st.binary(max_size=64),
    st.builds(
        lambda tag, length, body: bytes([tag]) + struct.pack(">i", length) + body,
        st.sampled_from(_TAGS),
        st.one_of(st.integers(-10, 200), st.just(2**31 - 1), st.integers(2**24, 2**30)),
        st.binary(max_size=64),
    ),
    st.builds(
        lambda tag, body: bytes([tag]) + struct.pack(">i", len(body) + 4) + body,
        st.sampled_from(_TAGS),
        st.binary(max_size=64),
    ),
    st.sampled_from(
        [
            encode_frontend(x)
            for x in (
                m.Query("SELECT s FROM fuzz_secret"),
                m.Parse("x", "SELECT $1"),
                m.Bind("", "nope", (), (b"1",), ()),
                m.Execute("nowhere", 0),
                m.Sync(),
                m.CopyData(b"1\t2\n"),
                m.CopyDone(),
                m.Describe("S", "x"),
                m.Close("P", "p"),
                m.Flush(),
                m.PasswordMessage(b"n,,n=,r=abc"),
                m.SSLRequest(),
                m.CancelRequest(1, 2),
            )
        ]
    ),
)


def _send_authenticated(pg: Server, data: bytes) -> bytes:
    """``data`` on a connection past authentication (psycopg's, taken over), what comes back."""
    conn = psycopg.connect(pg.url, autocommit=True, connect_timeout=10)
    sock = socket.socket(fileno=conn.pgconn.socket)
    out = b""
    try:
        sock.sendall(data)
        sock.settimeout(0.3)
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            out += chunk
    except (TimeoutError, ConnectionResetError, BrokenPipeError, OSError):
        pass
    finally:
        # psycopg owns the descriptor: shut the connection down, let psycopg close it (closing
        # it here would let psycopg write to whatever reuses the number next)
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.detach()
        with contextlib.suppress(Exception):
            conn.close()
    return out


@settings(
    max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None
)
@given(
    st.lists(frames, max_size=8), st.sampled_from(["startup", "auth", "query"]), st.integers(0, 300)
)
def test_random_and_truncated_messages_never_hurt_the_server(
    secret_table: Server, parts: list[bytes], phase: str, cut: int
) -> None:
    """Random frames where a startup packet goes, during authentication, and in the query
    phase of an authenticated connection; cut anywhere."""
    pg = secret_table
    data = b"".join(parts)
    if phase == "auth":
        data = _startup() + data
    data = data[: max(cut, 1)] if cut < len(data) else data
    got = _send_authenticated(pg, data) if phase == "query" else _send_raw(pg, data)
    assert SECRET.encode() not in got or b"SELECT s FROM fuzz_secret" in data
    _healthy(pg)


def test_huge_lengths_are_refused_without_reading_them(secret_table: Server) -> None:
    for header in (
        struct.pack(">i", 2**31 - 1) + struct.pack(">i", 3 << 16),
        struct.pack(">i", -8) + b"\0" * 8,
        struct.pack(">i", 10_001) + b"\0" * 16,
    ):
        got = _send_raw(secret_table, header)
        assert b"E" in got[:1] or got == b""  # a FATAL ErrorResponse, or just closed
    _healthy(secret_table)


def test_out_of_order_messages_get_typed_errors(pg_server: Server) -> None:
    with psycopg.connect(pg_server.url, autocommit=True) as c:
        pgconn = c.pgconn
        sock = socket.socket(fileno=pgconn.socket)
        try:
            # a Bind of a statement that does not exist, then Sync: an error, then ready
            sock.sendall(
                encode_frontend(m.Bind("", "no_such", (), (), ())) + encode_frontend(m.Sync())
            )
            sock.settimeout(10)
            reply = b""
            while b"Z\0\0\0\x05" not in reply:
                chunk = sock.recv(65536)
                assert chunk
                reply += chunk
            assert reply.startswith(b"E") and b"26000" in reply
            # a CopyDone outside COPY is ignored, as PostgreSQL ignores it
            sock.sendall(
                encode_frontend(m.CopyDone())
                + encode_frontend(m.Query("SELECT 1 AS one FROM fuzz_secret LIMIT 0"))
            )
            reply = b""
            while b"Z\0\0\0\x05" not in reply:
                chunk = sock.recv(65536)
                assert chunk
                reply += chunk
            assert reply.startswith(b"T") or reply.startswith(b"E")
        finally:
            sock.detach()


def test_ddl_cut_mid_message_is_applied_whole_or_not_at_all(pg_server: Server) -> None:
    """An authenticated connection sends part (or all) of a ``CREATE TABLE`` and goes away."""
    rng = random.Random(7)
    names = []
    pids: set[int] = set()
    for i in range(16):
        name = f"fuzz_ddl_{i}"
        names.append(name)
        wire = encode_frontend(
            m.Query(f"CREATE TABLE {name} (a bigint NOT NULL, b text, c double precision)")
        )
        cut = rng.randrange(1, len(wire) + 1) if i % 4 else len(wire)
        conn = psycopg.connect(pg_server.url, autocommit=True)
        pids.add(conn.info.backend_pid)
        sock = socket.socket(fileno=conn.pgconn.socket)
        sock.sendall(wire[:cut])
        sock.shutdown(socket.SHUT_RDWR)  # psycopg closes the descriptor (see above)
        sock.detach()
        with contextlib.suppress(Exception):
            conn.close()
    # the whole CREATE TABLEs still run (a client that goes away does not stop DDL midway):
    # wait for their sessions to end before looking
    deadline = time.monotonic() + 60
    while any(s.pid in pids for s in pg_server.server.registry.sessions()):
        assert time.monotonic() < deadline, "the cut sessions did not end"
        time.sleep(0.05)
    with psycopg.connect(pg_server.url, autocommit=True) as c:
        made = 0
        for name in names:
            cols = c.execute(
                "SELECT c.name FROM mz_columns c JOIN mz_tables t ON c.id = t.id "
                "WHERE t.name = %s ORDER BY c.position",
                [name],
            ).fetchall()
            assert cols in ([], [("a",), ("b",), ("c",)]), (name, cols)
            made += bool(cols)
            if cols:  # and a table that exists is a table that works
                c.execute(f"INSERT INTO {name} VALUES (1, 'x', 0.5)")
                assert c.execute(f"SELECT * FROM {name}").fetchall() == [(1, "x", 0.5)]
        assert made < len(names)  # the cut ones were not applied


def test_a_client_that_goes_away_mid_subscription_ends_it(pg_server: Server) -> None:
    """A streaming SUBSCRIBE whose client disconnects is cancelled at once (the server reads
    ahead and sees the end of input), not when a later row fails to send."""

    with psycopg.connect(pg_server.url, autocommit=True) as c:
        c.execute("CREATE TABLE fuzz_gone (k bigint)")
        c.execute("INSERT INTO fuzz_gone VALUES (1)")
    conn = psycopg.connect(pg_server.url, autocommit=True)
    pid = conn.info.backend_pid

    def alive() -> bool:
        return any(s.pid == pid for s in pg_server.server.registry.sessions())

    sock = socket.socket(fileno=conn.pgconn.socket)
    try:
        sock.sendall(encode_frontend(m.Query("SUBSCRIBE fuzz_gone")))
        sock.settimeout(30)
        got = b""
        while b"D" not in got[:1] and b"\nD" not in got and len(got) < 10:
            chunk = sock.recv(65536)
            assert chunk
            got += chunk
            if b"D\0\0" in got:
                break
        assert alive()
        sock.shutdown(socket.SHUT_RDWR)
    finally:
        sock.detach()
        with contextlib.suppress(Exception):
            conn.close()
    deadline = time.monotonic() + 30
    while alive():
        assert time.monotonic() < deadline, "the streaming session did not end"
        time.sleep(0.05)
