"""The checkers' own references: read-policy promises, replica progress off the network, and the
rule that no checker imports the product code it judges."""

from __future__ import annotations

import ast
import uuid
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

import tidegate.sim
from tidegate.sim.progress import ReplicaProgress, beyond
from tidegate.sim.promises import DEFAULT_LAG, Promises, lag_since
from tidegate.spec.frontier import Antichain
from tidegate.spec.frontier.read_policy import LagWriteFrontier
from tidegate.spec.ids import GlobalId
from tidegate.spec.protocol.commands import AllowCompaction, CreateDataflow, Hello
from tidegate.spec.protocol.responses import Frontiers
from tidegate.spec.protocol.types import DataflowDescription

# -- read-policy promises --------------------------------------------------------------------


def test_lag_since_is_materializes_lag_writes_by() -> None:
    """Examples worked by hand: ``upper - lag``, rounded down to ``min(lag, granularity)``."""
    assert lag_since(1234, (300, 1000)) == 900  # 934 rounded down to 300s
    assert lag_since(1234, (1000, 1000)) == 0
    assert lag_since(5234, (1000, 1000)) == 4000
    assert lag_since(1234, (200, 50)) == 1000  # 1034 rounded down to 50s
    assert lag_since(1234, (0, 1000)) == 1234  # lag 0: the upper itself
    assert lag_since(100, (300, 1000)) == 0  # never below 0


@given(st.integers(0, 10**9), st.integers(0, 10**6), st.integers(1, 10**6))
def test_lag_since_agrees_with_the_product_it_is_kept_apart_from(
    upper: int, lag: int, granularity: int
) -> None:
    """The checkers' formula and the spec's policy are written apart; they agree (a test may
    compare them, a check may not share them)."""
    want = LagWriteFrontier(lag, granularity).frontier(Antichain([upper])).elements[0]
    assert lag_since(upper, (lag, granularity)) == want


def _policy(
    n: int, target: str, lag: int, status: str, invoke: int, complete: int | None
) -> dict[str, Any]:
    ev: dict[str, Any] = {"op": "policy", "n": n, "target": target, "lag_ms": lag}
    ev.update(granularity_ms=1000, status=status, invoke=invoke)
    if complete is not None:
        ev["complete"] = complete
    return ev


def test_the_policy_in_force_is_the_last_acknowledged_or_one_that_may_have_applied_after() -> None:
    p = Promises()
    assert p.in_force("u1") == {DEFAULT_LAG}  # nothing set: the documented default
    first = _policy(1, "u1", 300, "ok", 1, 2)
    p.invoked(first)
    assert p.in_force("u1") == {(300, 1000)}
    p.invoked(_policy(2, "u1", 0, "fail", 3, 4))  # refused: nothing happened
    assert p.in_force("u1") == {(300, 1000)}
    p.invoked(_policy(3, "u1", 600, "info", 5, 6))  # the controller died: maybe
    assert p.in_force("u1") == {(300, 1000), (600, 1000)}
    p.invoked(_policy(4, "u1", 100, "ok", 7, 8))  # acknowledged after the doubt was settled
    assert p.in_force("u1") == {(100, 1000)}
    p.invoked(_policy(5, "u1", 50, "pending", 9, None))
    assert p.in_force("u1") == {(100, 1000), (50, 1000)}
    # How far a since must be (the least) and may be (the greatest policy it ever had).
    assert p.least("u1", 5000) == lag_since(5000, (100, 1000))
    assert p.most("u1", 5000) == 5000 - 50
    assert (0, 1000) not in p.ever("u1")  # the refused one never applied


def test_an_acknowledged_policy_overlapping_another_leaves_both_possible() -> None:
    p = Promises()
    p.invoked(_policy(1, "u2", 300, "ok", 1, 10))  # invoked first, answered last
    p.invoked(_policy(2, "u2", 500, "ok", 2, 5))
    assert p.in_force("u2") == {(300, 1000), (500, 1000)}


# -- replica progress ------------------------------------------------------------------------

X = GlobalId.user(7)


def _create(as_of: int | None) -> CreateDataflow:
    df = DataflowDescription("x", as_of=None if as_of is None else Antichain([as_of]))
    return CreateDataflow(df)


def test_hydrated_means_an_output_frontier_beyond_the_as_of_on_this_connection(
    monkeypatch: Any,
) -> None:
    monkeypatch.setattr(DataflowDescription, "export_ids", property(lambda self: (X,)))
    p = ReplicaProgress()
    p.observe("cmd", "r1", Hello(uuid.UUID(int=1)))
    assert not p.hydrated("r1", X)  # never told to build it
    p.observe("cmd", "r1", _create(10))
    p.observe("resp", "r1", Frontiers(X, write=Antichain([10]), output=Antichain([10])))
    assert not p.hydrated("r1", X)  # at its as_of: not beyond it
    p.observe("resp", "r1", Frontiers(X, output=Antichain([11])))
    assert p.hydrated("r1", X) and p.write("r1", X) == 10
    p.observe("cmd", "r1", Hello(uuid.UUID(int=2)))  # a new connection starts over
    assert not p.hydrated("r1", X)
    p.observe("cmd", "r1", _create(20))
    p.observe("resp", "r1", Frontiers(X, output=Antichain()))  # complete: beyond everything
    assert p.hydrated("r1", X) and not p.hydrated("r2", X)


def test_a_collection_compacted_to_the_empty_frontier_has_nothing_left_to_hydrate() -> None:
    p = ReplicaProgress()
    p.observe("cmd", "r1", Hello(uuid.UUID(int=1)))
    p.observe("cmd", "r1", AllowCompaction(X, Antichain()))
    p.observe("cmd", "r1", Hello(uuid.UUID(int=2)))  # not sent again: it is done
    assert p.hydrated("r1", X) and p.write("r1", X) is None


def test_beyond_orders_frontiers_with_the_empty_one_last() -> None:
    assert beyond(5, 4) and not beyond(4, 4) and beyond(None, 4)
    assert not beyond(None, None) and not beyond(4, None)


# -- no checker imports what it judges --------------------------------------------------------

JUDGED = {
    "tidegate.spec.frontier.read_policy": "read policies (sinces are judged by sim/promises.py)",
    "tidegate.runtime.catalog": "the catalog's decoding (policies are the clients' own)",
    "tidegate.runtime.hydration": "the product's hydration report (judged off the network)",
}
CHECKERS = (
    "checkers.py",
    "history.py",
    "promises.py",
    "progress.py",
    "quiescence.py",
    "copy_to.py",
)


def test_the_checkers_import_none_of_the_code_they_judge() -> None:
    root = Path(tidegate.sim.__file__).parent
    for name in CHECKERS:
        tree = ast.parse((root / name).read_text())
        imported = {
            node.module or ""
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.level == 0
        } | {a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
        for module in imported:
            for judged, why in JUDGED.items():
                assert not module.startswith(judged), f"sim/{name} imports {module}: {why}"
