"""Identifiers shared by every layer: collection ids, instance and replica ids."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from .errors import InvalidId

__all__ = ["GlobalId", "InstanceId", "ReplicaId"]

Namespace: TypeAlias = Literal["s", "u", "t"]
_NAMESPACE_RANK = {"s": 0, "u": 1, "t": 2}
_NAMESPACES: dict[str, Namespace] = {"s": "s", "u": "u", "t": "t"}
_PATTERN = re.compile(r"^([sut])([0-9]+)$")

InstanceId: TypeAlias = str
"""A compute (or storage) instance, i.e. a cluster: a user-chosen name."""

ReplicaId: TypeAlias = str
"""One replica of an instance: a user-chosen name, unique within the instance."""


@dataclass(frozen=True, slots=True, eq=False)
class GlobalId:
    """A collection's identity, as Materialize writes it: ``s1`` (system), ``u7`` (user), ``t3`` (transient).

    Ids order by namespace (system < user < transient), then by number, which is
    the order Materialize's command history sorts by. Ids are hashed and
    compared on hot paths, so the sort key and hash are computed once.
    """

    namespace: Namespace
    value: int
    sort_key: tuple[int, int] = field(init=False, repr=False)
    """``(namespace rank, value)``: the total order of ids, as a plain tuple."""
    _hash: int = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.namespace not in _NAMESPACE_RANK:
            raise InvalidId(f"unknown GlobalId namespace {self.namespace!r}")
        if isinstance(self.value, bool) or not isinstance(self.value, int) or self.value < 0:
            raise InvalidId(f"GlobalId value must be a non-negative int, got {self.value!r}")
        key = (_NAMESPACE_RANK[self.namespace], self.value)
        object.__setattr__(self, "sort_key", key)
        object.__setattr__(self, "_hash", hash(key))

    @classmethod
    def parse(cls, text: str) -> GlobalId:
        """Parse ``"u7"``-style text; raises :class:`InvalidId` otherwise."""
        match = _PATTERN.match(text) if isinstance(text, str) else None
        if match is None:
            raise InvalidId(f"not a GlobalId: {text!r} (expected e.g. 'u7', 's1', 't3')")
        return cls(_NAMESPACES[match.group(1)], int(match.group(2)))

    @classmethod
    def user(cls, value: int) -> GlobalId:
        return cls("u", value)

    @classmethod
    def system(cls, value: int) -> GlobalId:
        return cls("s", value)

    @classmethod
    def transient(cls, value: int) -> GlobalId:
        return cls("t", value)

    @property
    def is_transient(self) -> bool:
        return self.namespace == "t"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is GlobalId:
            return self.sort_key == other.sort_key
        return NotImplemented

    def __hash__(self) -> int:
        return self._hash

    def __lt__(self, other: GlobalId) -> bool:
        return self.sort_key < other.sort_key

    def __le__(self, other: GlobalId) -> bool:
        return self.sort_key <= other.sort_key

    def __gt__(self, other: GlobalId) -> bool:
        return self.sort_key > other.sort_key

    def __ge__(self, other: GlobalId) -> bool:
        return self.sort_key >= other.sort_key

    def __str__(self) -> str:
        return f"{self.namespace}{self.value}"

    def __repr__(self) -> str:
        return f"GlobalId.parse({str(self)!r})"
