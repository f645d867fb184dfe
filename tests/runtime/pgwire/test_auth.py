"""SCRAM-SHA-256 against scramp's client (the implementation pg8000 uses): the exchange
succeeds with the password, fails with another, and refuses malformed messages, typed."""

from __future__ import annotations

import pytest
import scramp
from hypothesis import given
from hypothesis import strategies as st

from tidegate.runtime.pgwire.auth import (
    AuthConfig,
    AuthenticationFailed,
    ScramExchange,
    ScramVerifier,
    parse_sasl_initial,
)


def _exchange(password: str, stored: str) -> None:
    client = scramp.ScramClient(["SCRAM-SHA-256"], "materialize", password)
    verifier = ScramVerifier.from_password(stored, b"0123456789abcdef", 4096)
    server = ScramExchange(verifier, b"server-nonce-bytes")
    first = server.first(client.get_client_first().encode())
    client.set_server_first(first.decode())
    final = server.final(client.get_client_final().encode())
    client.set_server_final(final.decode())  # the client checks the server's signature


def test_scram_with_the_right_password() -> None:
    _exchange("correct horse", "correct horse")


def test_scram_with_a_wrong_password_fails() -> None:
    with pytest.raises(AuthenticationFailed) as e:
        _exchange("wrong", "correct horse")
    assert e.value.sqlstate == "28P01"


@given(st.binary(max_size=80), st.binary(max_size=80))
def test_malformed_messages_are_typed_errors(first: bytes, final: bytes) -> None:
    server = ScramExchange(ScramVerifier.from_password("p", b"s" * 16, 64), b"n" * 18)
    try:
        server.first(first)
        server.final(final)
    except AuthenticationFailed as e:
        assert e.sqlstate in ("08P01", "28P01")
    with pytest.raises(AuthenticationFailed):
        parse_sasl_initial(first.replace(b"\0", b""))


def test_config() -> None:
    token = AuthConfig("tok")
    assert token.check_password("anyone", "tok") and not token.check_password("anyone", "x")
    users = AuthConfig({"ann": "a"})
    assert users.check_password("ann", "a") and not users.check_password("bob", "a")
    with pytest.raises(ValueError):
        AuthConfig(None)  # no password: only trust, asked for by name
    assert AuthConfig.trust().method == "trust"
