"""``mypy --strict`` over every package, by its installed name (``make lint`` runs it).

mypy cannot follow the editable install's import hook to ``tidegate.spec``
and its siblings, so this lays the link tree of :mod:`linktree` first
(``build/tidegate-tree``), where ``[tool.mypy]`` in ``pyproject.toml`` looks
(``mypy_path``; ``packages = ["tidegate"]``, ``strict = true``), then runs mypy
and prints its report with the repository's own paths (``spec/ids.py``, not
``build/tidegate-tree/tidegate/spec/ids.py``).

    python tools/typecheck.py [MYPY ARGS...]     # extra arguments go to mypy

Exits with mypy's status.
"""

from __future__ import annotations

import re
import subprocess
import sys

from linktree import ROOT, SUBPACKAGES, lay


def repo_paths(text: str, tree_prefix: str) -> str:
    """``text`` with paths inside the link tree replaced by the files they link to."""
    sub = "|".join(SUBPACKAGES)
    text = re.sub(rf"{re.escape(tree_prefix)}tidegate/({sub})/", r"\1/", text)
    text = re.sub(rf"{re.escape(tree_prefix)}tidegate/({sub})\b", r"\1", text)
    return text.replace(f"{tree_prefix}tidegate/", "tidegate/")


def main(args: list[str]) -> int:
    tree = lay()
    done = subprocess.run(
        [sys.executable, "-m", "mypy", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    out, err = done.stdout, done.stderr
    for prefix in (f"{tree}/", f"{tree.relative_to(ROOT)}/"):
        out, err = repo_paths(out, prefix), repo_paths(err, prefix)
    sys.stdout.write(out)
    sys.stderr.write(err)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
