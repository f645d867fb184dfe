"""Text is a sequence of Unicode scalar values: the rule every string that enters tidegate obeys.

A Python ``str`` may hold code points that are not Unicode scalar values: the
UTF-16 surrogates U+D800..U+DFFF, alone or in pairs (JSON's ``"\\udc80"``
escape and ``surrogateescape``-decoded bytes make them). No UTF-8 encoder
accepts them, so such text could be stored nowhere and sent nowhere: the
protobuf encoder of the wire refuses it, as does PostgreSQL, which answers
SQLSTATE 22021 (``character_not_in_repertoire``) for bytes that are not valid
UTF-8. Every boundary where text enters (SQL text, names, row values and keys,
request bodies) refuses it with :class:`~tidegate.spec.errors.InvalidText`,
before anything changes, and :func:`find_invalid_text` lets a sender check a
whole value (a plan, a command) before handing it on.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from .errors import InvalidText

__all__ = ["check_text", "find_invalid_text", "is_scalar_text", "surrogate_at", "surrogate_text"]

_SURROGATE = re.compile("[\ud800-\udfff]")


def surrogate_at(text: str) -> int | None:
    """The 0-based index of the first surrogate code point in ``text``, else ``None``."""
    if text.isascii():  # O(1) in CPython: the string knows it is ASCII
        return None
    m = _SURROGATE.search(text)
    return None if m is None else m.start()


def is_scalar_text(text: str) -> bool:
    """Whether ``text`` is Unicode scalar values only (encodable as UTF-8)."""
    return text.isascii() or _SURROGATE.search(text) is None


def surrogate_text(text: str, at: int) -> str:
    """How ``text`` fails the rule: which code point, where."""
    return f"a lone surrogate U+{ord(text[at]):04X} at character {at + 1}"


def check_text(text: str, what: str) -> str:
    """``text`` itself if it is Unicode scalar values only, else [InvalidText] naming ``what``."""
    at = surrogate_at(text)
    if at is not None:
        raise InvalidText(f"{what} is not valid Unicode text: {surrogate_text(text, at)}")
    return text


def find_invalid_text(value: Any) -> str | None:
    """The first string inside ``value`` that is not Unicode scalar values, else ``None``.

    Looks through strings, tuples, lists, sets, mappings (keys and values) and
    dataclasses (every field), without recursion; a part shared by several
    parents (a plan reading one input twice) is looked at once. Everything
    else holds no text.
    """
    stack: list[Any] = [value]
    seen: set[int] = set()
    while stack:
        v = stack.pop()
        t = type(v)
        if t is str:
            if not is_scalar_text(v):
                return str(v)
            continue
        if t in (int, float, bool, bytes) or v is None:
            continue
        if id(v) in seen:
            continue
        seen.add(id(v))
        if isinstance(v, tuple | list | set | frozenset):
            stack.extend(v)
        elif isinstance(v, Mapping):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif dataclasses.is_dataclass(v) and not isinstance(v, type):
            stack.extend(getattr(v, f.name) for f in dataclasses.fields(v))
        elif isinstance(v, str) and not is_scalar_text(str(v)):  # a str subclass (an enum)
            return str(v)
    return None
