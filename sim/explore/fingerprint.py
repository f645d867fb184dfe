"""A canonical, deterministic fingerprint of a model state, optionally up to renaming replicas.

Two states with the same contents get the same fingerprint whatever the order in which
their dicts were filled or their sets happen to iterate: dicts and sets are written sorted,
objects as their class and their fields by name. Nothing depends on ``id()``, hash
randomisation or insertion order. Objects shared between parts of the state are written
once per reference (sharing is not part of the contents).

Symmetry: replicas are interchangeable, so a state and the same state with replicas ``r1``
and ``r2`` swapped behave alike. :func:`fingerprint` with ``symmetric`` names computes the
canonical text under every permutation of the names and keeps the least, so all the
members of an orbit get one fingerprint (the textbook orbit representative; cheap for the
two or three replicas explored).
"""

from __future__ import annotations

import enum
import hashlib
import itertools
import types
import uuid as _uuid
from collections.abc import Mapping, Sequence
from typing import Any

from tidegate.spec.frontier import Antichain
from tidegate.spec.ids import GlobalId

__all__ = ["canonical_text", "fingerprint"]

_ATOMS = (int, float, bool, type(None), bytes, complex)


IGNORED: dict[str, frozenset[str]] = {
    # Statistics and logs of what happened, which never decide what happens next.
    "ComputeReplica": frozenset({"_steps", "reused_dataflows", "built_dataflows", "_settled"}),
    "ReplicaDriver": frozenset({"responses", "reconciled", "write_log"}),
    # Hello nonces and the counter that draws them and the peek ids: opaque identifiers the
    # model only compares for equality, and the counter only ever draws fresh ones, so two
    # states that differ in them alone behave alike (up to renaming the ids).
    "Hello": frozenset({"nonce"}),
    "ProtocolLedger": frozenset({"nonce"}),
    "StartIteration": frozenset({"nonce"}),
    "Uuids": frozenset({"n"}),
}
"""Fields left out of the fingerprint, by class name: counters and logs (a settled replica
stepping again is the same state, though its step counter moved)."""


_SEQ, _MAP, _SET, _OBJ, _ATOM, _STR, _ENUM, _UUID, _FUNC, _TYPE = range(10)
_KINDS: dict[type, int] = {}
_SLOTS: dict[type, tuple[tuple[str, ...], bool, frozenset[str]]] = {}


def _kind(t: type) -> int:
    k = _KINDS.get(t)
    if k is None:
        if issubclass(t, str):
            k = _STR
        elif issubclass(t, enum.Enum):
            k = _ENUM
        elif issubclass(t, _ATOMS):
            k = _ATOM
        elif issubclass(t, _uuid.UUID):
            k = _UUID
        elif issubclass(t, type):
            k = _TYPE
        elif issubclass(t, Mapping):
            k = _MAP
        elif issubclass(t, set | frozenset):
            k = _SET
        elif issubclass(t, Sequence):
            k = _SEQ
        elif issubclass(t, types.FunctionType | types.BuiltinFunctionType | types.MethodType) or (
            callable(t) and not hasattr(t, "__dict__") and not hasattr(t, "__slots__")
        ):
            k = _FUNC
        else:
            k = _OBJ
        _KINDS[t] = k
    return k


def _layout(t: type) -> tuple[tuple[str, ...], bool, frozenset[str]]:
    """A class's slot names (sorted, less the ignored), whether its instances have a
    ``__dict__``, and its ignored fields."""
    got = _SLOTS.get(t)
    if got is None:
        slots: set[str] = set()
        for cls in t.__mro__:
            raw = cls.__dict__.get("__slots__", ())
            slots.update((raw,) if isinstance(raw, str) else raw)
        # A cached hash is derived from the fields (and may depend on the process's hash seed).
        ignored = IGNORED.get(t.__name__, frozenset()) | {"_hash", "__dict__", "__weakref__"}
        has_dict = any("__dict__" in c.__dict__ for c in t.__mro__)
        got = (tuple(sorted(slots - ignored)), has_dict, ignored)
        _SLOTS[t] = got
    return got


def _fields(obj: Any) -> list[tuple[str, Any]]:
    """An object's fields by name (its ``__dict__`` and every ``__slots__``), less the ignored."""
    slots, has_dict, ignored = _layout(type(obj))
    if not has_dict:
        return [(n, getattr(obj, n)) for n in slots if hasattr(obj, n)]
    out = {k: v for k, v in obj.__dict__.items() if k not in ignored}
    for n in slots:
        if n not in out and hasattr(obj, n):
            out[n] = getattr(obj, n)
    return sorted(out.items())


def canonical_text(obj: Any, rename: Mapping[str, str] | None = None) -> str:
    """``obj`` as text that depends only on its contents (strings renamed by ``rename``).

    Nothing changes during one call, so each object's text is computed once per call and
    reused wherever the object is shared.
    """
    names = rename or {}
    stack: set[int] = set()
    memo: dict[int, str] = {}

    def walk(o: Any) -> str:
        t = type(o)
        if t is int or t is bool or o is None:
            return repr(o)
        if t is str:
            return repr(names.get(o, o))
        if t is GlobalId:
            return f"{o.namespace}{o.value}"
        k = _kind(t)
        if k == _STR:
            return repr(names.get(o, o))
        if k == _ATOM:
            return repr(o)
        if k == _ENUM:
            return f"{t.__name__}.{o.name}"
        if k == _UUID:
            return f"U{o.int}"
        if k == _FUNC:
            return f"<{getattr(o, '__qualname__', t.__name__)}>"
        if k == _TYPE:
            return f"<class {o.__qualname__}>"
        key = id(o)
        got = memo.get(key)
        if got is not None:
            return got
        if key in stack:  # a cycle: the path to it is already written
            return "<cycle>"
        stack.add(key)
        try:
            if t is Antichain:
                text = "A[" + ",".join([walk(v) for v in o.elements]) + "]"
            elif k == _SEQ:
                text = "[" + ",".join([walk(v) for v in o]) + "]"
            elif k == _MAP:
                text = "{" + ",".join(sorted([walk(a) + ":" + walk(b) for a, b in o.items()])) + "}"
            elif k == _SET:
                text = "#{" + ",".join(sorted([walk(v) for v in o])) + "}"
            else:
                inner = ",".join([f"{n}={walk(v)}" for n, v in _fields(o)])
                text = f"{t.__qualname__}({inner})"
        finally:
            stack.discard(key)
        memo[key] = text
        return text

    return walk(obj)


def fingerprint(obj: Any, symmetric: Sequence[str] = ()) -> bytes:
    """A 16-byte digest of ``obj``'s contents, the least over renamings of ``symmetric`` names."""
    names = list(symmetric)
    best: str | None = None
    perms = itertools.permutations(names) if len(names) > 1 else [tuple(names)]
    for perm in perms:
        rename = dict(zip(names, perm, strict=True))
        text = canonical_text(obj, rename if len(names) > 1 else None)
        if best is None or text < best:
            best = text
    assert best is not None
    return hashlib.blake2b(best.encode(), digest_size=16).digest()


class Fingerprinter:
    """:func:`fingerprint` of a state with per-replica parts, caching each part's digest.

    A transition usually changes one replica or none, so the others' digests are reused:
    each part is looked up by its pickle (equal pickles are equal contents, hence equal
    canonical text), which is several times cheaper to make than the canonical text.
    """

    def __init__(self, symmetric: Sequence[str], dumps: Any, capacity: int = 50_000) -> None:
        self.names = list(symmetric)
        self.perms = [
            dict(zip(self.names, p, strict=True)) for p in itertools.permutations(self.names)
        ]
        if len(self.perms) <= 1:
            self.perms = [{}]
        self._dumps = dumps
        self._cache: dict[tuple[bytes, int], bytes] = {}
        self._capacity = capacity
        self.hits = 0
        self.misses = 0

    def _part(self, blob: bytes, obj: Any, i: int) -> bytes:
        key = (blob, i)
        got = self._cache.get(key)
        if got is not None:
            self.hits += 1
            return got
        self.misses += 1
        if len(self._cache) >= self._capacity:
            self._cache.clear()
        text = canonical_text(obj, self.perms[i])
        digest = hashlib.blake2b(text.encode(), digest_size=16).digest()
        if any(repr(n) in text for n in self.names):
            self._cache[key] = digest
        else:  # it names no replica: every renaming leaves it as it is
            for j in range(len(self.perms)):
                self._cache[(blob, j)] = digest
        return digest

    def __call__(self, rest: Any, parts: Mapping[str, Any], shared: Any = None) -> bytes:
        """The digest of ``rest``, ``shared`` and ``parts`` (keyed by replica name), least over
        renamings. ``shared`` (which may name replicas) is cached by its pickle like a part.

        Only the renamings that order the parts by their own digests are tried (a canonical
        labelling): two states that differ by a renaming order their parts alike, so they
        try corresponding renamings; parts with equal digests leave every order among them.
        """
        blobs = {name: self._dumps(part) for name, part in parts.items()}
        shared_blob = self._dumps(shared) if shared is not None else b""
        own = {name: self._part(blobs[name], part, 0) for name, part in parts.items()}
        best: str | None = None
        for i, rename in enumerate(self.perms):
            # A renaming qualifies if it gives the lower names to the lower digests.
            if rename and any(
                own[a] > own[b] and rename[a] < rename[b] for a in self.names for b in self.names
            ):
                continue
            entries = sorted(
                repr(rename.get(name, name)) + ":" + self._part(blobs[name], part, i).hex()
                for name, part in parts.items()
            )
            text = canonical_text(rest, rename) + "|" + ",".join(entries)
            if shared is not None:
                text += "|" + self._part(shared_blob, shared, i).hex()
            if best is None or text < best:
                best = text
        assert best is not None
        return hashlib.blake2b(best.encode(), digest_size=16).digest()
