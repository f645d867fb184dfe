"""The documentation's runtime examples run, under asyncio and trio, and check their own results.

An example is a fenced ``python`` block, in README.md, ARCHITECTURE.md,
tests/README.md or any page under docs/, preceded by an HTML comment
``<!-- example: NAME -->``; names are unique across all files. It defines
``main``: ``async def main()`` runs under both anyio backends, a plain
``def main()`` runs once. Each run is a fresh interpreter (as a user's script
would be) in a fresh temporary working directory (the examples use relative
data directories), and must leave no process behind.

Every other ``python`` block is a doctest (``test_docs.py`` runs it) or is
marked ``<!-- not-run: REASON -->``, so no code block silently goes untested.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parents[1]
MARKED_BLOCK = re.compile(r"<!-- example: ([\w-]+) -->\n```python\n(.*?)^```", re.S | re.M)
PYTHON_BLOCK = re.compile(
    r"(?:<!-- (example|not-run): [^\n]*-->\n)?```python\n(.*?)^```", re.S | re.M
)
EXPECTED = {
    "quickstart",
    "env-basic",
    "env-copy-to",
    "env-frames",
    "env-lifecycle",
    "env-replicas",
    "env-restart",
    "env-sources",
    "env-sync",
    "env-upgrade",
    "metrics-scrape",
    "plan-json",
    "readme-sql",
    "sql-basic",
    "sql-sources",
}
"""Every example, by name: a moved or deleted example cannot vanish unnoticed."""


def doc_files() -> list[Path]:
    """Every documentation file, README first (the same list as ``test_docs.py``)."""
    top = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", ROOT / "tests" / "README.md"]
    return [*top, *sorted((ROOT / "docs").rglob("*.md"))]


def examples() -> dict[str, tuple[str, str]]:
    """Every marked example of the documentation, by name: (file, code)."""
    found: dict[str, tuple[str, str]] = {}
    for path in doc_files():
        where = path.relative_to(ROOT).as_posix()
        for name, code in MARKED_BLOCK.findall(path.read_text()):
            if name in found:
                raise ValueError(f"two examples named {name!r}: in {found[name][0]} and {where}")
            found[name] = (where, code)
    return found


EXAMPLES = examples()


RUNNER = """
import inspect, runpy, sys
import anyio
main = runpy.run_path(sys.argv[1], run_name="docs_example")["main"]
if sys.argv[2] == "sync":
    assert not inspect.iscoroutinefunction(main), "a sync example defines a plain main()"
    main()
else:
    assert inspect.iscoroutinefunction(main), "an async example defines async def main()"
    anyio.run(main, backend=sys.argv[2])
"""


def run_example(code: str, backend: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``code``'s ``main`` in a fresh interpreter in ``cwd``, as a user's script would run."""
    script = cwd / "example.py"
    script.write_text(code)
    return subprocess.run(
        [sys.executable, "-c", RUNNER, str(script), backend],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=170,
    )


def leftovers(marker: Path) -> list[int]:
    """Live processes whose command line mentions ``marker`` (Linux; empty elsewhere)."""
    if not sys.platform.startswith("linux"):
        return []
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if str(marker) in cmdline and state != "Z":
            found.append(int(entry))
    return found


def test_the_docs_have_their_examples_and_each_asserts_its_results() -> None:
    assert set(EXAMPLES) == EXPECTED
    for name, (where, code) in EXAMPLES.items():
        assert "assert " in code, f"example {name!r} ({where}) checks nothing"
        assert 'if __name__ == "__main__":' in code, (
            f"example {name!r} ({where}) cannot run as a script"
        )


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_python_block_runs_or_says_why_not(path: Path) -> None:
    """A ``python`` block is a doctest, a marked example, or marked ``not-run`` with a reason."""
    for marker, code in PYTHON_BLOCK.findall(path.read_text()):
        if marker or code.lstrip().startswith(">>>"):
            continue
        first = code.strip().splitlines()[0] if code.strip() else ""
        raise AssertionError(
            f"{path.relative_to(ROOT)}: a python block ({first!r}) is neither a doctest nor "
            "marked <!-- example: NAME --> or <!-- not-run: REASON -->"
        )


@pytest.mark.processes
def test_a_failing_example_fails_this_test(tmp_path: Path) -> None:
    """The harness reports an example's broken assertion (it does not swallow it)."""
    done = run_example("async def main():\n    assert 1 == 2, 'wrong'\n", "asyncio", tmp_path)
    assert done.returncode != 0 and "wrong" in done.stderr


RUNS = [
    pytest.param(name, backend, id=f"{name}-{backend}")
    for name in sorted(EXAMPLES)
    for backend in (("asyncio", "trio") if "async def main" in EXAMPLES[name][1] else ("sync",))
]


@pytest.mark.processes
@pytest.mark.parametrize(("name", "backend"), RUNS)
def test_docs_example_runs(name: str, backend: str, tmp_path: Path) -> None:
    where, code = EXAMPLES[name]
    done = run_example(code, backend, tmp_path)
    assert done.returncode == 0, f"example {name!r} ({where}) failed:\n{done.stderr[-4000:]}"
    assert not leftovers(tmp_path), f"example {name!r} ({where}) left processes behind"
