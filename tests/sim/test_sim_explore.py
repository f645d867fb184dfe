"""The exhaustive explorer (``tidegate sim explore``): complete, deterministic, reduced, and
able to find planted bugs along short paths; silent on the correct model."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tidegate.sim.cli import main
from tidegate.sim.explore import Bounds, explore, replay
from tidegate.sim.explore.fingerprint import Fingerprinter, canonical_text, fingerprint
from tidegate.sim.explore.model import describe
from tidegate.sim.mutants import EXPLORER_MUTANTS, MUTANTS, mutant_names

# Two replicas, one table with its index, one client command and nothing else: small
# enough to explore to the end in about a second.
TINY = Bounds(replicas=2, collections=1, commands=1, faults=0, ticks=0)
# A fault and nothing else.
FAULT = Bounds(replicas=2, collections=1, commands=0, faults=1, ticks=0)
# A peek while the table advances (too big to finish quickly: the mutants are found early).
PEEK = Bounds(replicas=2, collections=1, commands=1, faults=0, ticks=1)
# The table advances once.
TICK = Bounds(replicas=2, collections=1, commands=0, faults=0, ticks=1)


def test_a_tiny_configuration_is_explored_to_the_end_the_same_way_twice() -> None:
    first = explore(TINY)
    second = explore(TINY)
    assert first.ok, first.summary()
    assert first.complete and first.cut_by is None
    assert first.states == first.distinct > 10
    assert first.quiescent >= 1  # some paths come to rest, and were judged there
    assert (first.distinct, first.transitions, first.complete_depth) == (
        second.distinct,
        second.transitions,
        second.complete_depth,
    )


def test_symmetry_merges_states_that_differ_only_by_replica_names() -> None:
    with_symmetry = explore(TINY)
    without = explore(TINY, symmetry=False)
    assert without.ok and without.complete
    assert with_symmetry.distinct < without.distinct
    # Same depth: the reduction merges mirror images, it cuts no path short.
    assert with_symmetry.complete_depth == without.complete_depth


def test_partial_order_reduction_keeps_the_verdict_and_the_depth() -> None:
    reduced = explore(TICK)
    full = explore(TICK, reduce=False)
    assert reduced.ok and full.ok
    assert reduced.complete and full.complete
    assert reduced.reduced > 0 and full.reduced == 0
    assert reduced.distinct <= full.distinct
    assert reduced.quiescent >= 1 and full.quiescent >= 1


@pytest.mark.parametrize(
    ("mutant", "bounds", "longest"),
    [
        ("peek_without_hold", PEEK, 6),
        ("release_hold_before_cancel", PEEK, 7),
        ("regressing_frontier", PEEK, 4),
        ("history_drops_live_peek", Bounds(replicas=2, collections=1, commands=1, ticks=0), 5),
        # The campaign cannot see these two: its driver never lets a replaced connection's
        # message (or a second failure report) reach the controller.
        ("rehydrates_from_reported_epoch", FAULT, 9),
    ],
)
def test_a_planted_bug_is_found_along_a_short_path_that_replays(
    mutant: str, bounds: Bounds, longest: int
) -> None:
    result = explore(bounds, mutant=mutant)
    assert not result.ok, f"{mutant} survived: {result.summary()}"
    finding = result.findings[0]
    assert 1 <= len(finding.path) <= longest, finding.trace()
    assert "path:" in finding.trace() and describe(finding.path[-1]) in finding.trace()
    # The path alone reproduces it (with the bug on), and the correct model passes it.
    with EXPLORER_MUTANTS.get(mutant, MUTANTS.get(mutant)).patch():  # type: ignore[union-attr]
        again = replay(bounds, finding.path)
    assert finding.violation in again
    try:
        assert finding.violation not in replay(bounds, finding.path)
    except ValueError as e:  # the correct model does not even take that path
        assert "is not enabled" in str(e)


def test_the_explorer_mutants_are_apart_from_the_campaigns() -> None:
    """The campaign's mutant tests enumerate ``mutant_names()``; the explorer's own are not
    among them (a random campaign is not expected to find them)."""
    assert set(EXPLORER_MUTANTS).isdisjoint(mutant_names())
    for m in EXPLORER_MUTANTS.values():
        assert m.undetectable and "explorer" in m.undetectable


def test_a_stale_epoch_response_reaches_the_controller_only_when_allowed() -> None:
    """By default a replaced connection's responses still in flight reach the controller
    (which must ignore them): ``accepts_stale_epoch`` is found that way. With late
    deliveries off they are dropped on arrival, as the production driver drops them, and
    the same path shows nothing."""
    bounds = Bounds(replicas=2, collections=1, commands=0, faults=1, ticks=1)
    found = explore(bounds, mutant="accepts_stale_epoch")
    assert not found.ok
    path = found.findings[0].path
    assert ("disconnect", "r1") in path or ("crash", "r1") in path
    strict = Bounds(replicas=2, collections=1, commands=0, faults=1, ticks=1, stale_responses=False)
    with MUTANTS["accepts_stale_epoch"].patch():
        assert replay(strict, path) == []


class _Box:
    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


def test_fingerprints_ignore_insertion_order_and_rename_symmetric_names() -> None:
    a = _Box(m={"r1": 1, "r2": 2}, s={3, 1, 2}, peer="r1")
    b = _Box(s={1, 2, 3}, m={"r2": 2, "r1": 1}, peer="r1")
    assert canonical_text(a) == canonical_text(b)
    assert fingerprint(a) == fingerprint(b)
    mirror = _Box(m={"r2": 1, "r1": 2}, s={1, 2, 3}, peer="r2")
    assert fingerprint(a) != fingerprint(mirror)
    assert fingerprint(a, ("r1", "r2")) == fingerprint(mirror, ("r1", "r2"))
    different = _Box(m={"r1": 1, "r2": 1}, s={1, 2, 3}, peer="r1")
    assert fingerprint(a, ("r1", "r2")) != fingerprint(different, ("r1", "r2"))


def test_the_per_replica_fingerprint_agrees_with_its_cache() -> None:
    import pickle

    fp = Fingerprinter(("r1", "r2"), pickle.dumps)
    parts = {"r1": _Box(x=1), "r2": _Box(x=2)}
    mirror = {"r1": _Box(x=2), "r2": _Box(x=1)}
    assert fp(_Box(who="r1"), parts) == fp(_Box(who="r2"), mirror)
    assert fp(_Box(who="r1"), parts) != fp(_Box(who="r2"), parts)
    assert fp(_Box(who="r1"), parts) == fp(_Box(who="r1"), parts)
    assert fp.hits > 0


def test_the_cli_reports_and_exits_by_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["explore", "--replicas", "2", "--collections", "1", "--commands", "0"]
    assert main([*args, "--faults", "1", "--ticks", "0"]) == 0
    out = capsys.readouterr().out
    assert "complete: every interleaving within the bounds" in out and "no violation" in out
    code = main(
        [
            *args,
            "--faults",
            "1",
            "--ticks",
            "0",
            "--json",
            "--mutant",
            "rehydrates_from_reported_epoch",
        ]
    )
    assert code == 1
    report = json.loads(capsys.readouterr().out)
    assert report["violations"] and report["violations"][0]["path"]
    assert report["states"] >= 1 and report["bounds"]["faults"] == 1


def test_a_time_budget_cuts_the_search_and_says_how_far_it_got() -> None:
    result = explore(PEEK, time_budget=0.5)
    assert result.ok
    assert not result.complete and result.cut_by == "time budget"
    assert result.complete_depth <= result.max_depth
    assert "cut by time budget" in result.summary()


def test_a_depth_bound_cuts_paths_longer_than_it() -> None:
    result = explore(TINY, depth=3)
    assert not result.complete and result.cut_by == "depth"
    assert result.max_depth <= 3


def test_a_bug_that_breaks_the_first_handshakes_is_reported_not_raised(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The start is the settled system; a bug may already fail while settling."""
    from tidegate.spec.compute_replica import ComputeReplica

    def step(self: ComputeReplica) -> None:
        raise RuntimeError("planted: the replica cannot step")

    monkeypatch.setattr(ComputeReplica, "step", step)
    result = explore(TINY)
    assert not result.ok and result.states == 0
    (finding,) = result.findings
    assert finding.path == () and finding.violation.property == "no_crash"
    assert "while settling the initial state" in finding.trace()
    assert replay(TINY, ()) == [finding.violation]
