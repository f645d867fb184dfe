"""Secrets in SQL: ``CREATE SECRET``, ``ALTER SECRET``, ``DROP SECRET``, ``SHOW SECRETS``.

Parsed by :mod:`tidegate.spec.sql.secrets` and run here on an environment's
``create_secret``, ``alter_secret`` and ``drop`` (kept apart from
:mod:`tidegate.runtime.sql`, which hands these statements over). A secret's
value never leaves this path: the definition recorded for ``SHOW CREATE`` is
the statement with its value starred out, and so is the text of any error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from tidegate.spec.errors import SqlError, UndefinedObject, WrongObjectType
from tidegate.spec.ids import GlobalId
from tidegate.spec.sql.secrets import (
    AlterSecretStmt,
    CreateSecretStmt,
    DropSecretStmt,
    ShowSecretsStmt,
    redacted,
)

from .catalog import CatalogState
from .errors import DuplicateCatalogName, HasDependents, UnknownCatalogObject

__all__ = ["SecretAnswer", "SecretsEnvironment", "run_secret_statement"]

SecretStatement = CreateSecretStmt | AlterSecretStmt | DropSecretStmt | ShowSecretsStmt


class SecretsEnvironment(Protocol):
    """What the secret statements run on (the environment's methods)."""

    @property
    def state(self) -> CatalogState: ...

    async def create_secret(
        self, name: str, value: str, *, definition: str | None = None
    ) -> GlobalId: ...

    async def alter_secret(self, name: str, value: str) -> None: ...

    async def drop(
        self,
        ref: GlobalId | str,
        *,
        cascade: bool = False,
        dropped: dict[GlobalId, Any] | None = None,
    ) -> list[GlobalId]: ...


@dataclass(frozen=True)
class SecretAnswer:
    """What a secret statement answers (:mod:`tidegate.runtime.sql` makes it a ``SqlResult``):
    a command status, the names ``SHOW SECRETS`` lists, a notice."""

    status: str
    names: list[str] | None = None
    notice: str | None = field(default=None)


def _named(state: CatalogState, name: str) -> str | None:
    """What else than a secret is called ``name`` (its kind), if anything."""
    if state.view(name) is not None:
        return "view"
    if state.sink(name) is not None:
        return "sink"
    try:
        state.by_name(name)
    except UnknownCatalogObject:
        return None
    return "collection"


async def run_secret_statement(env: SecretsEnvironment, stmt: SecretStatement) -> SecretAnswer:
    """Run one secret statement; what it answers."""
    state = env.state
    if isinstance(stmt, ShowSecretsStmt):
        return SecretAnswer("SHOW", sorted(s.name for s in state.secrets))
    if isinstance(stmt, CreateSecretStmt):
        if state.secret(stmt.name) is not None and stmt.if_not_exists:
            return SecretAnswer(
                "CREATE SECRET", notice=f'secret "{stmt.name}" already exists, skipping'
            )
        try:
            await env.create_secret(stmt.name, stmt.value, definition=redacted(stmt.sql).strip())
        except DuplicateCatalogName as e:
            raise SqlError(f'{e.kind} "{stmt.name}" already exists') from None
        return SecretAnswer("CREATE SECRET")
    if state.secret(stmt.name) is None:
        if stmt.if_exists:
            return SecretAnswer(
                "ALTER SECRET" if isinstance(stmt, AlterSecretStmt) else "DROP SECRET",
                notice=f'secret "{stmt.name}" does not exist, skipping',
            )
        other = _named(state, stmt.name)
        if other is not None:
            raise WrongObjectType(f'"{stmt.name}" is a {other}, not a secret')
        raise UndefinedObject(f'secret "{stmt.name}" does not exist')
    if isinstance(stmt, AlterSecretStmt):
        await env.alter_secret(stmt.name, stmt.value)
        return SecretAnswer("ALTER SECRET")
    try:
        await env.drop(stmt.name, cascade=stmt.cascade)
    except HasDependents as e:
        names = ", ".join(
            (state.sink(d) or state.get(d)).name for d in e.dependents if isinstance(d, GlobalId)
        )
        raise SqlError(
            f'cannot drop secret "{stmt.name}" because other objects depend on it: {names}',
            hint="Use DROP ... CASCADE to drop the dependent objects too.",
        ) from None
    return SecretAnswer("DROP SECRET")
