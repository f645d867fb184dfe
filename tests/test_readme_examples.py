"""The README's runtime examples run, under asyncio and trio, and check their own results.

A README example is a fenced ``python`` block preceded by an HTML comment
``<!-- example: NAME -->``. It defines ``main``: ``async def main()`` runs
under both anyio backends, a plain ``def main()`` runs once. Each run is a
fresh interpreter (as a user's script would be) in a fresh temporary working
directory (the examples use relative data directories), and must leave no
process behind.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(180)

README = Path(__file__).resolve().parents[1] / "README.md"
MARKED_BLOCK = re.compile(r"<!-- example: ([\w-]+) -->\n```python\n(.*?)^```", re.S | re.M)
EXPECTED = {"env-basic", "env-lifecycle", "env-replicas", "env-restart", "env-sync"}


def examples() -> dict[str, str]:
    """Every marked example of the README, by name."""
    found: dict[str, str] = {}
    for name, code in MARKED_BLOCK.findall(README.read_text()):
        if name in found:
            raise ValueError(f"README has two examples named {name!r}")
        found[name] = code
    return found


EXAMPLES = examples()


RUNNER = """
import inspect, runpy, sys
import anyio
main = runpy.run_path(sys.argv[1], run_name="readme_example")["main"]
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


def test_the_readme_has_its_examples_and_each_asserts_its_results() -> None:
    assert set(EXAMPLES) == EXPECTED
    for name, code in EXAMPLES.items():
        assert "assert " in code, f"example {name!r} checks nothing"
        assert 'if __name__ == "__main__":' in code, f"example {name!r} cannot run as a script"


def test_a_failing_example_fails_this_test(tmp_path: Path) -> None:
    """The harness reports an example's broken assertion (it does not swallow it)."""
    done = run_example("async def main():\n    assert 1 == 2, 'wrong'\n", "asyncio", tmp_path)
    assert done.returncode != 0 and "wrong" in done.stderr


RUNS = [
    pytest.param(name, backend, id=f"{name}-{backend}")
    for name in sorted(EXAMPLES)
    for backend in (("asyncio", "trio") if "async def main" in EXAMPLES[name] else ("sync",))
]


@pytest.mark.parametrize(("name", "backend"), RUNS)
def test_readme_example_runs(name: str, backend: str, tmp_path: Path) -> None:
    done = run_example(EXAMPLES[name], backend, tmp_path)
    assert done.returncode == 0, f"example {name!r} failed:\n{done.stderr[-4000:]}"
    assert not leftovers(tmp_path), f"example {name!r} left processes behind"
