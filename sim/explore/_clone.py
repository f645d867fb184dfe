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


def _shared(key: int) -> types.FunctionType:
    return _FUNCTIONS[key]


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj: Any) -> Any:
        if type(obj) is types.FunctionType and obj.__closure__ is not None:
            for cell in obj.__closure__:
                if isinstance(cell.cell_contents, _MUTABLE):
                    raise pickle.PicklingError(
                        f"closure {obj.__qualname__} holds mutable state: copies would share it"
                    )
            _FUNCTIONS.setdefault(id(obj), obj)
            return _shared, (id(obj),)
        return NotImplemented


def dumps(obj: Any) -> bytes:
    buf = io.BytesIO()
    _Pickler(buf, protocol=5).dump(obj)
    return buf.getvalue()


def loads(blob: bytes) -> Any:
    return pickle.loads(blob)
