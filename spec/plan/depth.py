"""How deeply a plan may nest: refused past a documented limit, before anything recurses into it.

The typechecker, the reference evaluator, the executors' compilers and the
JSON and wire codecs walk plans recursively, like most compilers. A plan of a
thousand nested nodes would run them out of Python's recursion limit with an
untyped ``RecursionError``; :func:`check_nesting` walks it iteratively first
and raises :class:`~tidegate.spec.errors.PlanTooDeep` instead.

Depth counts every level of the object tree: a plan node, a tuple or list
of its children, a scalar expression, a dict of the JSON form. A chain of
``Filter``\\s costs one level per node; ``MAX_NESTING`` allows plans far deeper
than any view a person writes (Materialize's own recursion guard is in the
same range), and every walker in tidegate handles it.

>>> from tidegate.spec.plan import Schema
>>> from tidegate.spec.plan.relation import Filter, Get
>>> from tidegate.spec.ids import GlobalId
>>> plan = Get(GlobalId.user(1), Schema.of(("x", "int64")))
>>> for _ in range(MAX_NESTING):
...     plan = Filter(plan, ())
>>> check_nesting(plan)
Traceback (most recent call last):
...
tidegate.spec.errors.plan.PlanTooDeep: plan nests deeper than 256 levels
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from ..errors import PlanTooDeep

__all__ = ["MAX_NESTING", "check_nesting"]

MAX_NESTING = 256
"""The deepest a plan, a scalar expression or their JSON form may nest."""


def check_nesting(root: object, what: str = "plan") -> None:
    """Raise :class:`PlanTooDeep` if ``root`` nests deeper than :data:`MAX_NESTING`.

    ``root`` is a plan or scalar expression (dataclasses), or their JSON form
    (dicts and lists). Iterative, so it is safe on any input.
    """
    stack: list[tuple[object, int]] = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Iterable[object] = node.values()
        elif isinstance(node, list | tuple):
            children = node
        elif dataclasses.is_dataclass(node) and not isinstance(node, type):
            children = [getattr(node, f.name) for f in dataclasses.fields(node)]
        else:
            continue
        if depth > MAX_NESTING:
            raise PlanTooDeep(f"{what} nests deeper than {MAX_NESTING} levels")
        for child in children:
            if isinstance(child, dict | list | tuple) or (
                dataclasses.is_dataclass(child) and not isinstance(child, type)
            ):
                stack.append((child, depth + 1))
