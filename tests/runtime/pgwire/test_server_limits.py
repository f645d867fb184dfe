"""The wire server's bounds against clients that send too much or too slowly: a query string
over the SQL size limit is refused typed and the session goes on; a length prefix over the
message limit is refused before anything is buffered; connections that never finish their
startup are closed after ``startup_timeout_s`` while other clients are served."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import errors as pgerr

from tidegate.runtime.pgwire import AuthConfig, PgwireOptions, PgwireServer
from tidegate.spec.sql.parse import MAX_SQL_BYTES

from .conftest import Server


def _connect(host: str, port: int, password: str) -> psycopg.Connection:
    return psycopg.connect(
        host=host,
        port=port,
        user="materialize",
        password=password,
        dbname="materialize",
        autocommit=True,
        connect_timeout=60,
    )


def test_a_query_string_over_the_size_limit_is_refused_and_the_session_goes_on(
    pg_server: Server,
) -> None:
    big = "SELECT '" + "x" * MAX_SQL_BYTES + "'"
    with _connect(pg_server.host, pg_server.port, pg_server.password) as conn:
        with pytest.raises(pgerr.ProgramLimitExceeded) as info:
            conn.execute(big.encode())
        assert f"limit of {MAX_SQL_BYTES} bytes" in str(info.value)
        with pytest.raises(pgerr.ProgramLimitExceeded):  # the extended protocol's Parse too
            conn.execute(big.encode(), prepare=True)
        assert conn.execute("SELECT 1").fetchone() == (1,)


def _recv_all(sock: socket.socket) -> bytes:
    out = b""
    while chunk := sock.recv(65536):
        out += chunk
    return out


def test_a_length_prefix_over_the_limit_is_refused_before_anything_is_buffered(
    pg_server: Server,
) -> None:
    """A startup packet announcing 2 GiB: a FATAL ``ErrorResponse`` and the connection closed at
    once, the announced bytes never sent nor waited for."""
    with socket.create_connection((pg_server.host, pg_server.port), timeout=30) as sock:
        sock.sendall(struct.pack(">ii", 2**31 - 1, 196608))
        reply = _recv_all(sock)
    assert reply[:1] == b"E" and b"FATAL" in reply and b"08P01" in reply


@pytest.fixture
def slow_start(pg_server: Server) -> Iterator[tuple[str, int]]:
    """A second server over the same environment whose connections have 2 s to start up."""
    options = PgwireOptions(AuthConfig(pg_server.password), startup_timeout_s=2.0)
    server = PgwireServer(pg_server.env, options)
    future, address = pg_server.portal.start_task(server.serve, "127.0.0.1", 0)
    yield address
    future.cancel()


def test_half_sent_startup_packets_time_out_and_others_are_served_meanwhile(
    pg_server: Server, slow_start: tuple[str, int]
) -> None:
    """64 connections each send half a startup packet and stop: a client that starts up is
    served meanwhile, and each of the 64 is closed once its startup time is up (they used to
    stay open for ever, each holding a connection)."""
    host, port = slow_start
    half = []
    for _ in range(64):
        sock = socket.create_connection((host, port), timeout=60)
        sock.sendall(struct.pack(">ii", 80, 196608) + b"user\x00mat")  # 80 bytes announced
        half.append(sock)
    try:
        with _connect(host, port, pg_server.password) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        for sock in half:  # closed without a word (the client is in the middle of a packet)
            assert _recv_all(sock) == b""
    finally:
        for sock in half:
            sock.close()
