"""Authentication of a wire connection: SCRAM-SHA-256 (RFC 5802, 7677), cleartext, trust.

Sans-IO: randomness comes in as arguments (the server nonce), and each step
takes the client's bytes and answers the server's. :class:`ScramVerifier` is
what the server keeps of a password (salt, iterations, stored and server keys:
never the password itself, as PostgreSQL's ``pg_authid`` keeps it);
:class:`ScramExchange` is one client's exchange against it. A failed proof, a
malformed message or a nonce that is not the server's is an
:class:`AuthenticationFailed` (SQLSTATE 28P01, or 08P01 for a broken message),
and the connection closes with it.

:class:`AuthConfig` is what a server checks: users and passwords (any user
name with one password when ``users`` is a single string: the control
endpoint's token), and the method. SCRAM is the default; ``password``
(cleartext) is allowed only over TLS, and a plain connection falls back to
SCRAM; ``trust`` lets anyone in and is used only when asked for.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass, field
from typing import Literal

from tidegate.spec.errors import TidegateError

__all__ = [
    "AuthConfig",
    "AuthenticationFailed",
    "ScramExchange",
    "ScramVerifier",
    "parse_sasl_initial",
]

Method = Literal["scram-sha-256", "password", "trust"]


class AuthenticationFailed(TidegateError, PermissionError):
    """The client did not prove it knows the password (28P01), or broke the exchange (08P01)."""

    def __init__(self, message: str, sqlstate: str = "28P01") -> None:
        super().__init__(message)
        self.message = message
        self.sqlstate = sqlstate


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _h(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def _hmac(key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, hashlib.sha256).digest()


@dataclass(frozen=True)
class ScramVerifier:
    """A password as SCRAM-SHA-256 stores it: salt, iterations, StoredKey and ServerKey."""

    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes

    @classmethod
    def from_password(cls, password: str, salt: bytes, iterations: int = 4096) -> ScramVerifier:
        salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
        return cls(salt, iterations, _h(_hmac(salted, b"Client Key")), _hmac(salted, b"Server Key"))


def parse_sasl_initial(data: bytes) -> tuple[str, bytes]:
    """A SASLInitialResponse's mechanism and client-first message [AuthenticationFailed]."""
    end = data.find(b"\0")
    if end < 0 or len(data) < end + 5:
        raise AuthenticationFailed("malformed SASLInitialResponse", "08P01")
    mechanism = data[:end].decode("latin-1")
    length = int.from_bytes(data[end + 1 : end + 5], "big", signed=True)
    body = data[end + 5 :]
    if length != len(body):
        raise AuthenticationFailed("malformed SASLInitialResponse length", "08P01")
    return mechanism, body


def _attributes(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in text.split(","):
        if len(part) < 2 or part[1] != "=":
            raise AuthenticationFailed(f"malformed SCRAM attribute {part!r}", "08P01")
        out[part[0]] = part[2:]
    return out


class ScramExchange:
    """One SCRAM-SHA-256 exchange: :meth:`first` answers server-first, :meth:`final` checks
    the proof and answers server-final."""

    def __init__(self, verifier: ScramVerifier, server_nonce: bytes) -> None:
        self.verifier = verifier
        self._server_nonce = _b64(server_nonce)
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._gs2 = ""

    def first(self, client_first: bytes) -> bytes:
        try:
            text = client_first.decode()
        except UnicodeDecodeError:
            raise AuthenticationFailed("malformed SCRAM message", "08P01") from None
        parts = text.split(",", 2)
        if len(parts) != 3 or parts[0] not in ("n", "y") or parts[1]:
            # p=...: channel binding, which this server does not offer
            raise AuthenticationFailed("unsupported SCRAM channel binding", "08P01")
        self._gs2 = f"{parts[0]},,"
        bare = parts[2]
        attrs = _attributes(bare)
        client_nonce = attrs.get("r")
        if not client_nonce or "m" in attrs:
            raise AuthenticationFailed("malformed SCRAM client-first message", "08P01")
        self._client_first_bare = bare
        self._nonce = client_nonce + self._server_nonce
        v = self.verifier
        self._server_first = f"r={self._nonce},s={_b64(v.salt)},i={v.iterations}"
        return self._server_first.encode()

    def final(self, client_final: bytes) -> bytes:
        try:
            text = client_final.decode()
        except UnicodeDecodeError:
            raise AuthenticationFailed("malformed SCRAM message", "08P01") from None
        without_proof, sep, proof_part = text.rpartition(",p=")
        if not sep or not self._server_first:
            raise AuthenticationFailed("malformed SCRAM client-final message", "08P01")
        attrs = _attributes(without_proof)
        expected_binding = _b64(self._gs2.encode())
        if attrs.get("c") != expected_binding:
            raise AuthenticationFailed("SCRAM channel binding check failed", "08P01")
        if attrs.get("r") != self._nonce:
            raise AuthenticationFailed("SCRAM nonce does not match", "08P01")
        try:
            proof = base64.b64decode(proof_part, validate=True)
        except ValueError:
            raise AuthenticationFailed("malformed SCRAM proof", "08P01") from None
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        v = self.verifier
        signature = _hmac(v.stored_key, auth_message)
        if len(proof) != len(signature):
            raise AuthenticationFailed("password authentication failed")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(_h(client_key), v.stored_key):
            raise AuthenticationFailed("password authentication failed")
        return f"v={_b64(_hmac(v.server_key, auth_message))}".encode()


@dataclass(frozen=True)
class AuthConfig:
    """Who may connect: ``users`` maps user names to passwords, or is one password any user
    name may use (the control endpoint's token); ``method`` as in ``pg_hba.conf``."""

    users: dict[str, str] | str | None = None
    method: Method = "scram-sha-256"
    iterations: int = 4096
    _verifiers: dict[str, ScramVerifier] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.method not in ("scram-sha-256", "password", "trust"):
            raise ValueError(f"unknown authentication method {self.method!r}")
        if self.method != "trust" and not self.users:
            raise ValueError(f"authentication method {self.method!r} needs users or a password")

    @classmethod
    def trust(cls) -> AuthConfig:
        """Anyone may connect as anyone: only when asked for explicitly."""
        return cls(None, "trust")

    def password_of(self, user: str) -> str | None:
        if isinstance(self.users, str):
            return self.users
        if self.users is None:
            return None
        return self.users.get(user)

    def verifier(self, user: str, salt: bytes) -> ScramVerifier:
        """The stored verifier of ``user`` (a made-up one for an unknown user, so that a failed
        login says nothing about which names exist)."""
        key = user if not isinstance(self.users, str) else ""
        found = self._verifiers.get(key)
        if found is None:
            password = self.password_of(user)
            found = ScramVerifier.from_password(
                password if password is not None else _b64(salt) + "\0unknown",
                salt,
                self.iterations,
            )
            if password is not None:
                self._verifiers[key] = found
        return found

    def check_password(self, user: str, password: str) -> bool:
        expected = self.password_of(user)
        return expected is not None and hmac.compare_digest(expected.encode(), password.encode())
