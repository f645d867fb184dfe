"""The secret store: the values of secrets, kept apart from the catalog's printable state.

The catalog records a secret's name and id (:class:`~tidegate.runtime.catalog.SecretEntry`);
its value lives here, one file per secret named by its id, in
``DATA_DIR/secrets/`` (a directory 0700, files 0600: readable by the data
directory's owner only, as Materialize's local secrets controller keeps them).
A file is written atomically before the catalog records the secret, and
deleted after the catalog dropped it; a value whose secret was never recorded
(a crash in between) is harmless and is overwritten if its id is used.

:func:`resolve` turns a connection that names a secret into the connection a
reader or writer needs: the password is put into its URL, which then exists
only in memory, on its way to the upstream (and, for a source, to the storage
replica, over the authenticated, optionally TLS, stream). Nothing that stores
or prints connections (the catalog, ``SHOW CREATE``, ``describe``, status) sees
the password.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import TypeVar
from urllib.parse import quote, urlsplit, urlunsplit

from tidegate.spec.ids import GlobalId
from tidegate.spec.storage.connections import IcebergSink, PostgresSource, redact_passwords

from .errors import SecretMissing, SecretsUnavailable
from .files import mkdir_private, write_private

__all__ = ["SecretStore", "redact_error", "resolve", "with_password"]

C = TypeVar("C")


class SecretStore:
    """Secrets' values as files under ``root`` (``None``: an environment without a data
    directory, which keeps no secrets: :class:`SecretsUnavailable`)."""

    def __init__(self, root: str | os.PathLike[str] | None) -> None:
        self.root = None if root is None else Path(root)

    def _path(self, id: GlobalId) -> Path:
        if self.root is None:
            raise SecretsUnavailable(
                "secrets need a data directory to be kept in: open the environment with one"
            )
        return self.root / str(id)

    def put(self, id: GlobalId, value: str) -> None:
        """Write secret ``id``'s value (atomically, 0600)."""
        path = self._path(id)
        mkdir_private(path.parent)
        write_private(path, value.encode("utf-8"))

    def get(self, id: GlobalId, name: str) -> str:
        """Secret ``id``'s value [SecretMissing if its file is gone, SecretsUnavailable]."""
        try:
            return self._path(id).read_bytes().decode("utf-8")
        except FileNotFoundError:
            raise SecretMissing(name, str(self._path(id))) from None

    def delete(self, id: GlobalId) -> None:
        """Remove secret ``id``'s value (nothing if it has none)."""
        if self.root is not None:
            self._path(id).unlink(missing_ok=True)


def with_password(url: str, password: str) -> str:
    """``url`` with ``password`` in it: a URL's userinfo (percent-encoded), or a libpq
    conninfo's ``password`` keyword (quoted)."""
    if "://" not in url:
        escaped = password.replace("\\", "\\\\").replace("'", "\\'")
        return f"{url} password='{escaped}'"
    parts = urlsplit(url)
    user = parts.username or ""
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    netloc = f"{quote(user, safe='')}:{quote(password, safe='')}@{host}"
    return urlunsplit(parts._replace(netloc=netloc))


def resolve(connection: C, lookup: dict[str, str]) -> C:
    """``connection`` as a reader or writer needs it: the value of the secret it names (from
    ``lookup``, secret name to value) put into its URL; any other connection as it is."""
    if isinstance(connection, PostgresSource) and connection.password_secret is not None:
        url = with_password(connection.url, lookup[connection.password_secret])
        return dataclasses.replace(connection, url=url, password_secret=None)
    if isinstance(connection, IcebergSink) and connection.password_secret is not None:
        url = with_password(connection.catalog_url, lookup[connection.password_secret])
        return dataclasses.replace(connection, catalog_url=url, password_secret=None)
    return connection


E = TypeVar("E", bound=BaseException)


def redact_error(e: E, *values: str) -> E:
    """``e`` with every password in its message starred out: connection passwords
    (:func:`~tidegate.spec.storage.connections.redact_passwords`) and ``values`` (a secret's
    value, as given and percent-encoded), in its arguments and its text attributes."""

    def clean(text: str) -> str:
        for v in values:
            if v:
                text = text.replace(v, "***").replace(quote(v, safe=""), "***")
        return redact_passwords(text)

    e.args = tuple(clean(a) if isinstance(a, str) else a for a in e.args)
    for name, value in list(vars(e).items()) if hasattr(e, "__dict__") else []:
        if isinstance(value, str):
            setattr(e, name, clean(value))
    return e
