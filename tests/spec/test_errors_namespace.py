"""`tidegate.spec.errors` re-exports every area's errors flat, so names must be unique."""

from __future__ import annotations

import importlib
import pkgutil
from collections import Counter

import tidegate.spec.errors as errors
from tidegate.spec.errors import TidegateError


def _area_modules() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(errors.__path__))


def test_no_error_name_is_defined_in_two_areas() -> None:
    names = Counter(
        name
        for area in _area_modules()
        for name in importlib.import_module(f"{errors.__name__}.{area}").__all__
    )
    assert [n for n, count in names.items() if count > 1] == []


def test_every_area_is_re_exported_and_every_exception_is_a_tidegate_error() -> None:
    for area in _area_modules():
        module = importlib.import_module(f"{errors.__name__}.{area}")
        for name in module.__all__:
            value = getattr(module, name)
            assert getattr(errors, name) is value, f"{area}.{name} is shadowed"
            if isinstance(value, type) and issubclass(value, BaseException):
                assert issubclass(value, TidegateError), name
