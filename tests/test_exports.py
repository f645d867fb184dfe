"""The public surface, checked the way trio's ``test_exports`` checks trio's.

A module is *public* when no part of its dotted name starts with ``_``; its
``__all__`` is its public surface. For every public module of ``tidegate``:

* ``__all__`` exists, has no duplicates, and every name in it exists
  (``from module import *`` works, lazy re-exports included);
* a public object defined in a private module is exported on purpose: the
  nearest public package above that module lists it in ``__all__``;
* within ``tidegate.spec`` one public name means one object (a reader who
  meets ``CollectionKind`` must not have to ask which one), and the other
  layers do not reuse a name of the spec for something else.

Known clashes are listed with the rename that will remove them;
the clash tests fail when a new clash appears *and* when a listed one is gone,
so the lists only shrink.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections import defaultdict

import pytest

ROOTS = ("tidegate", "tidegate.spec", "tidegate.runtime", "tidegate.replica", "tidegate.sim")
"""The installed packages (``tidegate``'s folder holds only the umbrella, so each is walked)."""

GENERATED = frozenset(
    {
        "tidegate.runtime.wire.gen.tidegate_compute_pb2",
        "tidegate.runtime.wire.gen.tidegate_storage_pb2",
    }
)
"""Generated Protobuf code: it has no ``__all__`` and is not ours to shape."""

SPEC_CLASHES_PENDING: dict[str, str] = {}
"""Names two spec objects share today, and how each clash will be removed."""

LAYER_PARALLELS = frozenset(
    {
        "ConstantNode",
        "DistinctNode",
        "FilterClassesNode",
        "FilterNode",
        "JoinNode",
        "MapNode",
        "NegateNode",
        "Node",
        "ProjectNode",
        "ReduceNode",
        "SourceNode",
        "TemporalFilterNode",
        "TopKNode",
        "WindowNode",
        "UnionNode",
    }
)
"""Deliberate: the Spark executor's operators mirror the reference executor's, node for node."""

LAYER_CLASHES_PENDING: dict[str, str] = {}
"""Names runtime, replica or sim use for something else than the spec does, to be renamed."""


def _is_private(name: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in name.split("."))


def _walk(name: str, found: set[str]) -> None:
    found.add(name)
    module = importlib.import_module(name)
    for info in pkgutil.iter_modules(getattr(module, "__path__", [])):
        if info.name == "__main__":
            continue
        child = f"{name}.{info.name}"
        if info.ispkg:
            _walk(child, found)
        else:
            found.add(child)


def _all_modules() -> list[str]:
    found: set[str] = set()
    for root in ROOTS:
        _walk(root, found)
    return sorted(found)


ALL_MODULES = _all_modules()
PUBLIC_MODULES = [m for m in ALL_MODULES if not _is_private(m) and m not in GENERATED]


def _exports(name: str) -> list[str]:
    names: list[str] = list(getattr(importlib.import_module(name), "__all__", []))
    return names


def _owner(module: str) -> str:
    """The nearest public package above private module ``module``."""
    parts = module.split(".")
    first = next(i for i, p in enumerate(parts) if p.startswith("_") and not p.startswith("__"))
    return ".".join(parts[:first])


def _clashes(modules: list[str]) -> dict[str, dict[int, list[str]]]:
    """Public names of ``modules`` bound to more than one object: name -> id -> modules."""
    by_name: dict[str, dict[int, list[str]]] = defaultdict(dict)
    for name in modules:
        module = importlib.import_module(name)
        for export in _exports(name):
            by_name[export].setdefault(id(getattr(module, export)), []).append(name)
    return {n: objs for n, objs in by_name.items() if len(objs) > 1}


def test_every_root_and_its_subpackages_were_found() -> None:
    for expected in (
        "tidegate.cli",
        "tidegate.spec.controller",
        "tidegate.runtime.catalog",
        "tidegate.runtime.catalog._store",
        "tidegate.replica.spark.operators",
        "tidegate.sim.run",
    ):
        assert expected in ALL_MODULES


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_all_exists_is_unique_and_every_name_is_importable(name: str) -> None:
    module = importlib.import_module(name)
    assert hasattr(module, "__all__"), f"{name} declares no __all__"
    exports = module.__all__
    assert isinstance(exports, list | tuple)
    duplicates = sorted({n for n in exports if list(exports).count(n) > 1})
    assert duplicates == [], f"{name}.__all__ lists {duplicates} twice"
    missing = [n for n in exports if not hasattr(module, n)]
    assert missing == [], f"{name}.__all__ names {missing}, which do not exist"
    namespace: dict[str, object] = {}
    exec(f"from {name} import *", namespace)
    assert set(namespace) - {"__builtins__"} == set(exports)


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_objects_of_private_modules_are_exported_on_purpose(name: str) -> None:
    module = importlib.import_module(name)
    stray = []
    for export in _exports(name):
        obj = getattr(module, export)
        home = getattr(obj, "__module__", None)
        if not isinstance(home, str) or not home.startswith("tidegate.") or not _is_private(home):
            continue
        owner = importlib.import_module(_owner(home))
        if export not in _exports(owner.__name__) or getattr(owner, export) is not obj:
            stray.append(f"{export} (defined in {home}, not exported by {owner.__name__})")
    assert stray == [], f"{name} exports private objects: {stray}"


def test_one_public_name_is_one_object_across_the_spec() -> None:
    spec = [m for m in PUBLIC_MODULES if m == "tidegate.spec" or m.startswith("tidegate.spec.")]
    clashes = _clashes(spec)
    described = {n: sorted(sorted(ms) for ms in objs.values()) for n, objs in clashes.items()}
    new = {n: described[n] for n in clashes if n not in SPEC_CLASHES_PENDING}
    assert new == {}, f"names bound to different objects in tidegate.spec: {new}"
    gone = sorted(set(SPEC_CLASHES_PENDING) - set(clashes))
    assert gone == [], f"renamed at last: remove {gone} from SPEC_CLASHES_PENDING"


def test_the_other_layers_do_not_reuse_spec_names() -> None:
    spec_objects: dict[str, set[int]] = defaultdict(set)
    for name in PUBLIC_MODULES:
        if name == "tidegate.spec" or name.startswith("tidegate.spec."):
            module = importlib.import_module(name)
            for export in _exports(name):
                spec_objects[export].add(id(getattr(module, export)))
    reused: dict[str, list[str]] = defaultdict(list)
    for name in PUBLIC_MODULES:
        if name.startswith(("tidegate.runtime", "tidegate.replica", "tidegate.sim")):
            module = importlib.import_module(name)
            for export in _exports(name):
                ids = spec_objects.get(export)
                if ids and id(getattr(module, export)) not in ids:
                    reused[export].append(name)
    allowed = LAYER_PARALLELS | set(LAYER_CLASHES_PENDING)
    new = {n: ms for n, ms in reused.items() if n not in allowed}
    assert new == {}, f"names that mean something else than in tidegate.spec: {new}"
    gone = sorted(set(LAYER_CLASHES_PENDING) - set(reused))
    assert gone == [], f"renamed at last: remove {gone} from LAYER_CLASHES_PENDING"
