"""Cloning states by pickling, with the model's pure closures passed by reference.

The executor keeps small closures (key extractors) that pickle cannot write; they hold no
state, so every copy of a state may share them, as ``copy.deepcopy`` shares functions. A
closure that does hold mutable state would make copies share it: :func:`dumps` refuses one.
"""

from __future__ import annotations

import io
import pickle
import types
from typing import Any

__all__ = ["dumps", "loads"]

_FUNCTIONS: dict[int, types.FunctionType] = {}
"""Closures met while pickling, by id (kept alive here, so their ids are never reused)."""

_MUTABLE = (list, dict, set, bytearray)


class _Pickler(pickle.Pickler):
    def persistent_id(self, obj: Any) -> int | None:
        if type(obj) is types.FunctionType and obj.__closure__ is not None:
            for cell in obj.__closure__:
                if isinstance(cell.cell_contents, _MUTABLE):
                    raise pickle.PicklingError(
                        f"closure {obj.__qualname__} holds mutable state: copies would share it"
                    )
            _FUNCTIONS.setdefault(id(obj), obj)
            return id(obj)
        return None


class _Unpickler(pickle.Unpickler):
    def persistent_load(self, pid: Any) -> Any:
        return _FUNCTIONS[pid]


def dumps(obj: Any) -> bytes:
    buf = io.BytesIO()
    _Pickler(buf, protocol=5).dump(obj)
    return buf.getvalue()


def loads(blob: bytes) -> Any:
    return _Unpickler(io.BytesIO(blob)).load()
