"""The documentation is executable: its doctests run, and its links lead somewhere.

The documentation is README.md, ARCHITECTURE.md, tests/README.md and every
page under docs/ (``make docs`` builds the site from docs/, which includes the
other two). Each file's ``>>>`` examples run as one doctest (``ELLIPSIS`` and
``NORMALIZE_WHITESPACE``), in a namespace of its own. The marked runtime
examples (``<!-- example: NAME -->``) run in ``test_docs_examples.py``.
"""

from __future__ import annotations

import doctest
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def doc_files() -> list[Path]:
    """Every documentation file, README first."""
    top = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", ROOT / "tests" / "README.md"]
    return [*top, *sorted((ROOT / "docs").rglob("*.md"))]


def name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


DOCTESTED = [p for p in doc_files() if re.search(r"^\s*>>> ", p.read_text(), re.M)]
EXPECTED_DOCTESTS = {
    "README.md",
    "docs/spec.md",
    "docs/shard-store.md",
    "docs/simulator.md",
}
"""The files with doctests: a moved or deleted file cannot take its doctests away unnoticed."""


def test_the_doctests_are_where_they_are_expected() -> None:
    assert {name(p) for p in DOCTESTED} == EXPECTED_DOCTESTS


@pytest.mark.parametrize("path", DOCTESTED, ids=name)
def test_doctests(path: Path) -> None:
    result = doctest.testfile(
        str(path),
        module_relative=False,
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
    )
    assert result.attempted > 0
    assert result.failed == 0, f"{result.failed} doctest(s) of {name(path)} failed (see stdout)"


LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("path", doc_files(), ids=name)
def test_relative_links_lead_to_files(path: Path) -> None:
    """A link to another file of the repository names one that exists (``make docs`` checks anchors)."""
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        file = target.split("#", 1)[0]
        assert (path.parent / file).exists(), (
            f"{name(path)} links to {target}, which does not exist"
        )
