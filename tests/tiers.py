"""Test tiers by marker, enforced: a test that starts Spark, PostgreSQL or any other process says so.

``make test-fast`` runs ``-m "not spark and not processes and not postgres and not slow and
not soak"``, so the fast tier is exactly the tests that start nothing. The markers are
declared by hand (usually a module's ``pytestmark``) and this plugin keeps them honest: a
Python audit hook sees every process the test process starts (``subprocess.Popen``, which
asyncio, anyio and trio use too, ``os.fork``, ``os.posix_spawn``, ``os.system``) and
attributes it to the test running at that moment, setup and teardown included. A test that
started one of a kind its markers do not name fails at teardown, saying which marker to add
and what it started:

- ``spark``: a JVM through ``spark-submit`` or ``spark-class`` (a SparkSession, a standalone
  master or worker), or the ``spark``/``standalone_cluster`` fixtures;
- ``postgres``: ``initdb``, ``pg_ctl`` or ``postgres``, or the ``postgres_url`` fixture;
- ``processes``: any other process (replica and controller processes, the CLI in a
  subprocess, moto's S3 server through ``s3_endpoint``, ``fork`` for a worker pool).

A module- or session-scoped fixture starts its process once, during the setup of the first
test that asks for it. So the plugin remembers which fixture was being set up when a process
started, and every later test that uses that fixture needs the marker too; the fixtures above
count from the start (a Spark JVM may already be running when ``spark`` is first set up).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

__all__ = ["FIXTURE_TIERS", "TIERS", "classify"]

TIERS = ("spark", "processes", "postgres")
"""The markers of tests that start something; ``slow`` and ``soak`` are about time, not this."""

FIXTURE_TIERS = {
    "spark": "spark",
    "standalone_cluster": "spark",
    "postgres_url": "postgres",
    "s3_endpoint": "processes",
}
"""Fixtures that start (or share) a process of a tier, so every test that uses one has its marker."""

_SPARK = ("spark-submit", "spark-class")
_POSTGRES = ("initdb", "pg_ctl", "postgres", "pg_ctlcluster")
_PROBES = ("fc-list", "ldconfig", "uname")
"""Short-lived commands libraries run to look at the machine (matplotlib's font list, ctypes'
library search): whichever test happens to come first would be blamed, so they count for none."""


def classify(command: Sequence[str] | str | bytes | None) -> str | None:
    """The tier a started command belongs to (``spark``, ``postgres``, ``processes``), or
    ``None`` for a library's probe of the machine."""
    if isinstance(command, bytes | str):
        words = os.fsdecode(command).split()
    else:
        words = [os.fsdecode(w) for w in command or ()]
    names = [os.path.basename(w) for w in words]
    if any(n.endswith(s) for n in names for s in _SPARK):
        return "spark"
    if any(n in _POSTGRES for n in names):
        return "postgres"
    if names and names[0] in _PROBES:
        return None
    return "processes"


@dataclass
class _Seen:
    """What the test running now has started (tier -> the first command of that tier), and
    the fixture being set up, if any."""

    nodeid: str = ""
    started: dict[str, str] = field(default_factory=dict)
    fixture: object = None


_seen = _Seen()
_fixture_tiers: dict[object, dict[str, str]] = {}
"""Fixture definitions that started a process while being set up: tier -> what they started."""


def _note(tier: str | None, what: str) -> None:
    if tier is None or not _seen.nodeid:
        return
    _seen.started.setdefault(tier, what)
    if _seen.fixture is not None:
        _fixture_tiers.setdefault(_seen.fixture, {}).setdefault(tier, what)


def _audit(event: str, args: tuple[Any, ...]) -> None:
    # Called for every audited event in the process: the first test is a cheap string compare.
    if event == "subprocess.Popen":
        executable, argv = args[0], args[1]
        command = argv if argv is not None else executable
        _note(classify(command), _describe(command))
    elif event in ("os.posix_spawn", "os.spawn", "os.exec"):
        _note(classify(args[1] if len(args) > 1 else args[0]), _describe(args[0]))
    elif event == "os.system":
        _note(classify(args[0]), _describe(args[0]))
    elif event == "os.fork":
        _note("processes", "os.fork()")


def _describe(command: Any) -> str:
    if isinstance(command, bytes | str):
        text = os.fsdecode(command)
    else:
        text = " ".join(os.fsdecode(w) for w in command or ())
    return text if len(text) <= 160 else text[:157] + "..."


sys.addaudithook(_audit)


def _missing(item: pytest.Item, started: dict[str, str]) -> dict[str, str]:
    needed = dict(started)
    info = getattr(item, "_fixtureinfo", None)
    definitions = info.name2fixturedefs if info is not None else {}
    for name in getattr(item, "fixturenames", ()):
        tier = FIXTURE_TIERS.get(name)
        if tier is not None:
            needed.setdefault(tier, f"the {name!r} fixture")
        for definition in definitions.get(name, ()):
            for learned, what in _fixture_tiers.get(definition, {}).items():
                needed.setdefault(learned, f"{what} (through the {name!r} fixture)")
    return {tier: what for tier, what in needed.items() if item.get_closest_marker(tier) is None}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, None, None]:
    _seen.nodeid, _seen.started = item.nodeid, {}
    try:
        yield
    finally:
        _seen.nodeid, _seen.started = "", {}


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef: object, request: object) -> Generator[None, None, None]:
    outer, _seen.fixture = _seen.fixture, fixturedef
    try:
        yield
    finally:
        _seen.fixture = outer


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, None, None]:
    outcome = yield
    if call.when != "teardown":
        return
    missing = _missing(item, _seen.started)
    if not missing:
        return
    report = outcome.get_result()
    lines = [f"{item.nodeid} is missing its tier marker(s):"]
    lines += [f"  @pytest.mark.{tier}: it started {what}" for tier, what in sorted(missing.items())]
    lines.append("Mark the test (or the module: pytestmark); tests/README.md lists the tiers.")
    report.outcome = "failed"
    report.longrepr = "\n".join(lines)
