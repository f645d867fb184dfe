"""The lock files and ``pyproject.toml`` agree, and the virtualenv holds what the lock says.

``pyproject.toml`` keeps the compatible ranges; ``requirements/lock.txt`` (what ``make setup``
installs), ``requirements/bench.txt`` (with the ``bench`` extra) pick one version in them, with
hashes. ``make lock`` is the one way they change; these tests fail when someone edits one side
and not the other: a requirement the lock lacks or pins outside its range, a direct dependency
the lock keeps after it left ``pyproject.toml``, a pin without hashes, or a virtualenv that was
not installed from the lock.
"""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = canonicalize_name(PYPROJECT["project"]["name"])
LOCKS = {
    "requirements/lock.txt": ("dev", "docs"),
    "requirements/bench.txt": ("dev", "docs", "bench"),
}
"""Each lock file and the extras of the project it was compiled for (the Makefile's ``lock``)."""


@dataclass(frozen=True)
class Pin:
    name: NormalizedName
    version: Version
    marker: Marker | None
    hashes: int
    via: frozenset[str]

    def applies(self) -> bool:
        """Whether this pin is the one the running interpreter installs."""
        return self.marker is None or self.marker.evaluate()


_PIN = re.compile(
    r"^(?P<name>[A-Za-z0-9._-]+)==(?P<version>[^ ;\\]+)\s*(?:;\s*(?P<marker>[^\\]+?))?\s*\\?$"
)


def parse_lock(text: str) -> list[Pin]:
    """The pins of a uv/pip-tools lock file with hashes and ``# via`` annotations."""
    pins: list[Pin] = []
    current: dict[str, object] | None = None

    def close() -> None:
        if current is not None:
            pins.append(Pin(**current))  # type: ignore[arg-type]

    for line in text.splitlines():
        match = _PIN.match(line)
        if match:
            close()
            marker = match["marker"]
            current = {
                "name": canonicalize_name(match["name"]),
                "version": Version(match["version"]),
                "marker": Marker(marker) if marker else None,
                "hashes": 0,
                "via": frozenset(),
            }
        elif current is not None and line.strip().startswith("--hash="):
            current["hashes"] = int(current["hashes"]) + 1  # type: ignore[call-overload]
        elif current is not None and line.startswith("    # via"):
            rest = line.removeprefix("    # via").strip()
            if rest:
                current["via"] = frozenset({*current["via"], rest})  # type: ignore[misc]
        elif current is not None and line.startswith("    #   "):
            current["via"] = frozenset({*current["via"], line.removeprefix("    #   ").strip()})  # type: ignore[misc]
    close()
    return pins


def direct_requirements(extras: tuple[str, ...]) -> list[Requirement]:
    """The project's requirements with these extras, its own extras (``tidegate[...]``) expanded."""
    optional = PYPROJECT["project"]["optional-dependencies"]
    texts = list(PYPROJECT["project"]["dependencies"])
    out: list[Requirement] = []
    todo, seen = list(extras), set(extras)
    while True:
        for text in texts:
            req = Requirement(text)
            if canonicalize_name(req.name) != PROJECT:
                out.append(req)
            for extra in (
                sorted(req.extras - seen) if canonicalize_name(req.name) == PROJECT else ()
            ):
                seen.add(extra)
                todo.append(extra)
        if not todo:
            return out
        texts = list(optional[todo.pop()])


def _lock(path: str) -> list[Pin]:
    return parse_lock((ROOT / path).read_text())


@pytest.mark.parametrize("path", sorted(LOCKS))
def test_every_requirement_of_pyproject_is_locked_within_its_range(path: str) -> None:
    pins = _lock(path)
    by_name: dict[NormalizedName, list[Pin]] = {}
    for pin in pins:
        by_name.setdefault(pin.name, []).append(pin)
    problems = []
    for req in direct_requirements(LOCKS[path]):
        name = canonicalize_name(req.name)
        if name not in by_name:
            problems.append(f"{req} is not in {path}")
            continue
        for pin in by_name[name]:
            if not req.specifier.contains(pin.version, prereleases=True):
                problems.append(f"{path} pins {name}=={pin.version}, outside {req}")
    assert not problems, "run make lock:\n" + "\n".join(problems)


@pytest.mark.parametrize("path", sorted(LOCKS))
def test_the_lock_keeps_no_direct_dependency_pyproject_dropped(path: str) -> None:
    wanted = {canonicalize_name(r.name) for r in direct_requirements(LOCKS[path])}
    stale = sorted(
        {pin.name for pin in _lock(path) if "tidegate (pyproject.toml)" in pin.via} - wanted
    )
    assert not stale, (
        f"{path} still pins {stale} for pyproject.toml, which no longer asks: make lock"
    )


@pytest.mark.parametrize("path", [*sorted(LOCKS), "requirements/iceberg-reader.txt"])
def test_every_pin_has_its_hashes(path: str) -> None:
    pins = _lock(path)
    assert pins, f"{path} has no pins"
    assert [p.name for p in pins if p.hashes == 0] == []


def test_the_bench_lock_keeps_the_main_locks_pins() -> None:
    main = {(p.name, p.marker and str(p.marker)): p.version for p in _lock("requirements/lock.txt")}
    bench = {
        (p.name, p.marker and str(p.marker)): p.version for p in _lock("requirements/bench.txt")
    }
    moved = {k: (v, bench[k]) for k, v in main.items() if k in bench and bench[k] != v}
    assert not moved, f"bench.txt moved pins of lock.txt (make lock compiles it with -c): {moved}"


def test_the_virtualenv_holds_the_locked_versions() -> None:
    wrong = []
    for pin in _lock("requirements/lock.txt"):
        if not pin.applies():
            continue
        try:
            installed = Version(importlib.metadata.version(pin.name))
        except importlib.metadata.PackageNotFoundError:
            wrong.append(f"{pin.name} is not installed (locked {pin.version})")
            continue
        if installed != pin.version:
            wrong.append(f"{pin.name} {installed} is installed, the lock says {pin.version}")
    assert not wrong, "make setup installs from the lock:\n" + "\n".join(wrong)


def test_the_parser_reads_markers_hashes_and_annotations() -> None:
    text = (
        "numpy==2.4.6 ; python_full_version < '3.12' \\\n"
        "    --hash=sha256:aa \\\n"
        "    --hash=sha256:bb\n"
        "    # via\n"
        "    #   tidegate (pyproject.toml)\n"
        "    #   pandas\n"
        "six==1.16.0 \\\n"
        "    --hash=sha256:cc\n"
        "    # via python-dateutil\n"
    )
    numpy, six = parse_lock(text)
    assert (numpy.name, numpy.version, numpy.hashes) == ("numpy", Version("2.4.6"), 2)
    assert str(numpy.marker) == 'python_full_version < "3.12"'
    assert numpy.via == {"tidegate (pyproject.toml)", "pandas"}
    assert (six.name, six.hashes, six.via) == ("six", 1, {"python-dateutil"})
