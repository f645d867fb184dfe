"""The README's runtime examples run, under asyncio and trio, and check their own results.

A README example is a fenced ``python`` block preceded by an HTML comment
``<!-- example: NAME -->``. It defines ``main``: ``async def main()`` runs
under both anyio backends, a plain ``def main()`` runs once. Each run happens
in a fresh temporary working directory (the examples use relative data
directories) and must leave no child process behind.
"""

from __future__ import annotations

import inspect
import linecache
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
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


def load_main(name: str) -> Callable[[], Any]:
    """Execute example ``name`` as a module (not as ``__main__``) and return its ``main``."""
    namespace: dict[str, Any] = {"__name__": f"readme_example_{name.replace('-', '_')}"}
    code, filename = EXAMPLES[name], f"<README.md example {name}>"
    linecache.cache[filename] = (len(code), None, code.splitlines(keepends=True), filename)
    exec(compile(code, filename, "exec"), namespace)
    main = namespace.get("main")
    if not callable(main):
        raise AssertionError(f"example {name!r} defines no main()")
    return main  # type: ignore[no-any-return]


def children() -> set[int]:
    """Live (not zombie) child processes of this process, on Linux; empty elsewhere."""
    if not sys.platform.startswith("linux"):
        return set()
    me, found = os.getpid(), set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == me and fields[0] != "Z":
            found.add(int(entry))
    return found


def test_the_readme_has_its_examples_and_each_asserts_its_results() -> None:
    assert set(EXAMPLES) == EXPECTED
    for name, code in EXAMPLES.items():
        assert "assert " in code, f"example {name!r} checks nothing"
        assert 'if __name__ == "__main__":' in code, f"example {name!r} cannot run as a script"


def test_a_failing_example_fails_this_test() -> None:
    """The harness reports an example's broken assertion (it does not swallow it)."""
    code = "async def main():\n    assert 1 == 2, 'wrong'\n"
    namespace: dict[str, Any] = {"__name__": "broken"}
    exec(code, namespace)
    with pytest.raises(AssertionError, match="wrong"):
        anyio.run(namespace["main"], backend="asyncio")


RUNS = [
    pytest.param(name, backend, id=f"{name}-{backend}")
    for name in sorted(EXAMPLES)
    for backend in (("asyncio", "trio") if "async def main" in EXAMPLES[name] else ("sync",))
]


@pytest.mark.parametrize(("name", "backend"), RUNS)
def test_readme_example_runs(
    name: str, backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    before = children()
    main = load_main(name)
    if backend == "sync":
        assert not inspect.iscoroutinefunction(main)
        main()
    else:
        assert inspect.iscoroutinefunction(main)
        anyio.run(main, backend=backend)
    assert children() <= before, f"example {name!r} left child processes behind"
