"""No import cycles among tidegate's modules: a ratchet at zero, like ``tests/test_exports.py``.

The graph is read from the source with :mod:`ast`, not from a run, so that
every import counts wherever it is written: at module level, inside a function
(a deferred import), and under ``if TYPE_CHECKING:``. A cycle that only a
deferred import closes still means that neither module can be understood, or
moved, without the other; the usual way out is to move the name both sides
need into a module both can import, or to type one side against a ``Protocol``
of what it uses.

An edge goes from the importing module to the module it names: ``from a.b
import c`` is an edge to ``a.b.c`` if that is a module of ours, else to
``a.b``; ``import a.b`` is an edge to ``a.b``. That importing ``a.b`` first runs
``a/__init__.py`` is not counted (a package that re-exports its modules would
otherwise be in a cycle with each of them).
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

REPO = Path(__file__).resolve().parents[1]

FOLDERS = {
    "tidegate": "tidegate",
    "tidegate.spec": "spec",
    "tidegate.runtime": "runtime",
    "tidegate.replica": "replica",
    "tidegate.sim": "sim",
}
"""Each installed package and the repository folder it is built from (see ``setup.py``)."""


def modules(root: Path, folders: dict[str, str]) -> dict[str, tuple[Path, bool]]:
    """Every module under ``folders``: its dotted name -> (file, whether it is a package)."""
    found: dict[str, tuple[Path, bool]] = {}
    for package, folder in folders.items():
        for path in sorted((root / folder).rglob("*.py")):
            parts = list(path.relative_to(root / folder).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts = parts[:-1]
            found[".".join([package, *parts])] = (path, is_package)
    return found


def import_graph(found: dict[str, tuple[Path, bool]], root: Path) -> nx.DiGraph:
    """Module -> module it imports, each edge with the ``file:line`` (under ``root``) of its
    first import."""
    graph = nx.DiGraph()
    for name, (path, is_package) in found.items():
        graph.add_node(name)
        package = name if is_package else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    module = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    module = node.module or ""
                for alias in node.names:
                    sub = f"{module}.{alias.name}"
                    targets.append(sub if sub in found else module)
            for target in targets:
                while target and target not in found:  # a name inside one of our modules
                    target = target.rpartition(".")[0]
                if target and target != name and not graph.has_edge(name, target):
                    where = f"{path.relative_to(root)}:{node.lineno}"
                    graph.add_edge(name, target, where=where)
    return graph


def cycles(graph: nx.DiGraph) -> list[str]:
    """One description per group of modules that import each other: a cycle through them and
    where each of its imports is written."""
    out = []
    for group in sorted(sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1):
        loop = nx.find_cycle(graph.subgraph(group), source=group[0])
        steps = [f"{a} -> {b} ({graph.edges[a, b]['where']})" for a, b in loop]
        out.append(f"{len(group)} modules ({', '.join(group)}):\n    " + "\n    ".join(steps))
    return out


def test_no_module_of_tidegate_is_in_an_import_cycle() -> None:
    found = modules(REPO, FOLDERS)
    assert "tidegate.runtime.environment" in found and "tidegate.sim.world" in found
    graph = import_graph(found, REPO)
    assert graph.number_of_edges() > 1000  # the whole code base was read
    problems = cycles(graph)
    assert problems == [], "import cycles:\n" + "\n".join(problems)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        # a deferred import closes the cycle
        ("from . import b\n", "def f():\n    from .a import x\n"),
        # a type-only import closes it
        (
            "from .b import y\n",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import x\n",
        ),
        # an absolute import closes it
        ("import pkg.b\n", "from pkg.a import x\n"),
    ],
)
def test_a_cycle_is_found_however_it_is_written(tmp_path: Path, a: str, b: str) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "__init__.py").write_text("")
    (tmp_path / "src" / "a.py").write_text(a + "x = 1\n")
    (tmp_path / "src" / "b.py").write_text(b + "y = 2\n")
    (tmp_path / "src" / "c.py").write_text("from .a import x\nfrom . import b\n")
    found = modules(tmp_path, {"pkg": "src"})
    problems = cycles(import_graph(found, tmp_path))
    assert len(problems) == 1 and problems[0].startswith("2 modules (pkg.a, pkg.b):")
