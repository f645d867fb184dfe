"""The trace of a run: every observable event, in a canonical text form, and its hash.

Two runs with the same seed and scenario must produce byte-identical traces;
the hash is what the determinism test compares across processes.
"""

from __future__ import annotations

import hashlib
import json
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Any

__all__ = ["Trace", "TraceEvent", "canonical", "summarize"]


def canonical(value: Any) -> Any:
    """A JSON-ready, deterministic rendering of ``value`` (dataclasses and frontiers by repr)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, list | tuple):
        return [canonical(v) for v in value]
    if isinstance(value, dict):
        return {str(k): canonical(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, set | frozenset):
        return sorted(repr(v) for v in value)
    return repr(value)


@dataclass(frozen=True, slots=True)
class TraceEvent:
    at_ms: int
    kind: str
    fields: dict[str, Any]

    def line(self) -> str:
        return json.dumps(
            {"t": self.at_ms, "k": self.kind, **self.fields}, sort_keys=True, separators=(",", ":")
        )


_quote = json.encoder.encode_basestring_ascii  # what json.dumps uses for strings (ensure_ascii)


_LAYOUT: dict[tuple[str, ...], tuple[tuple[str, ...], str] | None] = {}
"""Field names -> (every key of the line in sorted order, the line's ``%s`` template); ``None`` if unusable."""


def _layout(names: tuple[str, ...]) -> tuple[tuple[str, ...], str] | None:
    if "t" in names or "k" in names:
        return None
    order = tuple(sorted(("k", "t", *names)))
    return order, "{" + ",".join(_quote(k).replace("%", "%%") + ":%s" for k in order) + "}"


def _fast_line(at_ms: int, kind: str, fields: dict[str, Any]) -> str | None:
    """:meth:`TraceEvent.line`'s exact text when every field is a plain ``str`` or ``int``; else ``None``.

    Most events (commands, responses) are of this shape; building their line
    from a per-shape template skips ``canonical`` and the generic JSON encoder.
    """
    names = tuple(fields)
    try:
        layout = _LAYOUT[names]
    except KeyError:
        layout = _LAYOUT[names] = _layout(names)
    if layout is None:
        return None
    order, template = layout
    values = {**fields, "k": kind, "t": at_ms}
    parts = []
    for name in order:
        v = values[name]
        tv = type(v)
        if tv is str:
            parts.append(_quote(v))
        elif tv is int:
            parts.append(int.__repr__(v))
        else:
            return None
    return template % tuple(parts)


class Trace:
    """An append-only event log; keeps every line's hash and the last ``tail`` events for reports."""

    def __init__(self, tail: int = 200, keep_all: bool = False) -> None:
        self._hash = hashlib.sha256()
        self._unhashed: list[str] = []
        """Lines not hashed yet: hashed a few hundred at a time (the same digest)."""
        self._tail: deque[str] = deque(maxlen=tail)
        self._all: list[str] | None = [] if keep_all else None
        self.count = 0

    def record(self, at_ms: int, kind: str, **fields: Any) -> None:
        self.record_fields(at_ms, kind, fields)

    def record_fields(self, at_ms: int, kind: str, fields: dict[str, Any]) -> None:
        """:meth:`record` with the fields as a dict (the caller gives it up)."""
        line = _fast_line(at_ms, kind, fields)
        if line is None:
            line = TraceEvent(at_ms, kind, {k: canonical(v) for k, v in fields.items()}).line()
        self._add(line)

    def record_message(self, at_ms: int, kind: str, replica: str, text: str) -> None:
        """``record(at_ms, kind, r=replica, m=text)``, for the commonest events (every command
        and response): the same line, from a fixed layout."""
        self._add(f'{{"k":{_quote(kind)},"m":{_quote(text)},"r":{_quote(replica)},"t":{at_ms}}}')

    def _add(self, line: str) -> None:
        unhashed = self._unhashed
        unhashed.append(line)
        if len(unhashed) >= 512:
            self._flush()
        self._tail.append(line)
        if self._all is not None:
            self._all.append(line)
        self.count += 1

    def _flush(self) -> None:
        if self._unhashed:
            self._unhashed.append("")
            self._hash.update("\n".join(self._unhashed).encode())
            self._unhashed = []

    def digest(self) -> str:
        self._flush()
        return self._hash.hexdigest()

    def tail(self) -> list[str]:
        return list(self._tail)

    def lines(self) -> Iterator[str]:
        if self._all is None:
            raise ValueError("this trace was recorded without keep_all=True")
        return iter(self._all)


def summarize(message: Any) -> str:
    """A short, deterministic rendering of a protocol command or response for the trace."""
    name = type(message).__name__
    parts = [name]
    for attr in ("id", "uuid"):
        v = getattr(message, attr, None)
        if v is not None:
            parts.append(str(v))
    if name == "Frontiers":
        for attr in ("write", "input", "output"):
            v = getattr(message, attr)
            if v is not None:
                parts.append(f"{attr[0]}={list(v.elements)}")
    elif name == "CreateDataflow":
        parts.append(",".join(str(e) for e in message.dataflow.export_ids))
        parts.append(f"as_of={list(message.dataflow.as_of.elements)}")
    elif name == "AllowCompaction":
        parts.append(str(list(message.frontier.elements)))
    elif name == "Peek":
        parts.append(f"{message.peek.uuid} {message.peek.id}@{message.peek.timestamp}")
    elif name in ("PeekResponse", "SubscribeResponse", "CopyToResponse"):
        inner = message.result
        parts.append(type(inner).__name__)
        if hasattr(inner, "lower"):
            parts.append(f"{list(inner.lower.elements)}..{list(inner.upper.elements)}")
    return " ".join(parts)
