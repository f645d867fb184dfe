"""Secrets in the catalog: a name and an id (the value is kept apart), depended on by the
connections that name them; a connection URL that holds a password is refused."""

from __future__ import annotations

import pytest

from tidegate.runtime.catalog import (
    CatalogState,
    CreateSecret,
    CreateSource,
    Drop,
    apply_ops,
    decode_catalog,
    encode_catalog,
    has_password,
)
from tidegate.runtime.errors import (
    DuplicateCatalogName,
    HasDependents,
    InvalidCatalogOp,
    UnknownCatalogObject,
)
from tidegate.runtime.secrets import redact_error, resolve, with_password
from tidegate.spec.errors import TidegateError
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import Schema
from tidegate.spec.storage import PostgresSource
from tidegate.spec.storage.connections import redact_passwords

U = GlobalId.user
SCHEMA = Schema.of(("id", "int64", False))


def _source(url: str, secret: str | None) -> CreateSource:
    return CreateSource("s", U(2), PostgresSource(url, "t", "p", "slot", secret), SCHEMA, U(3))


def test_a_secret_is_a_named_object_connections_depend_on() -> None:
    s = apply_ops(CatalogState(), [CreateSecret("pw", U(1)), _source("postgresql://u@h/d", "pw")])
    assert s.secret("pw") is not None and s.dependents(U(1)) == (U(2),)
    with pytest.raises(DuplicateCatalogName):
        apply_ops(s, [CreateSecret("s", U(9))])  # one namespace with collections
    with pytest.raises(HasDependents):
        apply_ops(s, [Drop(U(1))])
    gone = apply_ops(s, [Drop(U(1), cascade=True)])
    assert gone.secrets == () and gone.sources == () and gone.progress == ()
    data = encode_catalog(s)
    assert decode_catalog(data) == s and b"password_secret" in data


def test_a_connection_names_an_existing_secret_and_holds_no_password() -> None:
    with pytest.raises(UnknownCatalogObject):
        apply_ops(CatalogState(), [_source("postgresql://u@h/d", "nope")])
    for url in (
        "postgresql://u:pw@h/d",
        "postgresql://u@h/d?sslmode=require&password=pw",
        "host=h user=u password=pw dbname=d",
    ):
        assert has_password(url)
        with pytest.raises(InvalidCatalogOp, match="CREATE SECRET"):
            apply_ops(CatalogState(), [_source(url, None)])
    assert not has_password("postgresql://u@h:5432/d?sslmode=require")


def test_resolving_puts_the_value_in_and_errors_take_it_out() -> None:
    c = PostgresSource("postgresql://u@h:5/d", "t", "p", "slot", "pw")
    r = resolve(c, {"pw": "a b@c/d'"})
    assert r.password_secret is None and r.url == "postgresql://u:a%20b%40c%2Fd%27@h:5/d"
    assert with_password("host=h user=u", "it's") == "host=h user=u password='it\\'s'"
    e = redact_error(TidegateError(f"could not connect to {r.url} with a b@c/d'"), "a b@c/d'")
    assert "a b" not in str(e) and "%40" not in str(e)
    assert redact_passwords("postgresql://u:x@h/d password='y z'") == (
        "postgresql://u:***@h/d password=***"
    )
