"""The import package ``tidegate`` as a folder tree, for tools that search folders.

``setup.py`` installs the repository's folders ``spec/``, ``sim/``,
``runtime/`` and ``replica/`` as ``tidegate.spec``, ``tidegate.sim``,
``tidegate.runtime`` and ``tidegate.replica``. The editable install finds them
through an import hook, which Python follows but static tools do not: mypy
and griffe (which mkdocstrings uses) look for ``tidegate/spec/`` in a folder
and find none. This module lays the package out as it is installed::

    build/tidegate-tree/tidegate/
        __init__.py  __main__.py  cli.py  dsl.py  py.typed  commands  -> ../../../tidegate/...
        spec  sim  runtime  replica                                  -> ../../../spec, ...

Every entry is a symbolic link, so edits show at once; the tree is laid anew
on every use, so an entry added to ``tidegate/`` shows too. ``build/`` is
ignored by git and removed by ``make clean``.

* ``python tools/linktree.py`` lays the tree and prints its root;
* ``tools/typecheck.py`` (``make lint``) lays it before running mypy;
* as an MkDocs hook (``hooks: [tools/linktree.py]`` in ``mkdocs.yml``) it lays
  it before the site is built, for mkdocstrings (``paths:`` in ``mkdocs.yml``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TREE = ROOT / "build" / "tidegate-tree"
SUBPACKAGES = ("spec", "sim", "runtime", "replica")
"""Folders at the repository root that install as ``tidegate.<name>`` (see ``setup.py``)."""


def lay(root: Path = ROOT, tree: Path = TREE) -> Path:
    """Lay ``tree/tidegate`` (see the module docstring) and return ``tree``."""
    package = tree / "tidegate"
    if package.is_symlink() or package.is_file():
        package.unlink()
    elif package.exists():
        shutil.rmtree(package)
    package.mkdir(parents=True)
    entries = [
        root / "tidegate" / name
        for name in sorted(os.listdir(root / "tidegate"))
        if name != "__pycache__"
    ]
    entries += [root / name for name in SUBPACKAGES]
    for target in entries:
        (package / target.name).symlink_to(os.path.relpath(target, package))
    return tree


def on_pre_build(config: Any, **_: Any) -> None:
    """MkDocs hook: lay the tree before mkdocstrings reads the sources."""
    lay()


if __name__ == "__main__":
    print(lay().relative_to(ROOT))
