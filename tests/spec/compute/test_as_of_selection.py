"""As-of selection at bootstrap: the scenarios of reference/compute.md section 10."""

from __future__ import annotations

import pytest

from tidegate.spec.compute import select_as_ofs
from tidegate.spec.frontier import Antichain
from tidegate.spec.frontier.read_policy import LagWriteFrontier
from tidegate.spec.ids import GlobalId
from tidegate.spec.testing.controller import index_dataflow, mv_dataflow, subscribe_dataflow

A = Antichain
S, T = GlobalId.user(1), GlobalId.user(2)
IX, J, MV = GlobalId.user(10), GlobalId.user(11), GlobalId.user(20)


def sel(dataflows, storage, policies=None, now=100, read_only=False):
    return select_as_ofs(dataflows, storage, policies or {}, now, read_only)


def test_index_warmup_picks_input_upper_minus_one() -> None:
    r = sel([index_dataflow(IX, sources=[S], as_of=None, name="i")], {S: (A([5]), A([10]))})
    assert r.as_ofs == {"i": A([9])}
    assert r.dataflows[0].as_of == A([9])
    assert r.storage_holds == {S: A([5])}
    assert r.failures == ()


def test_index_read_policy_and_current_time() -> None:
    r = sel(
        [index_dataflow(IX, sources=[S], as_of=None, name="i")],
        {S: (A([0]), A([50]))},
        {IX: LagWriteFrontier(20, 1)},
        now=40,
    )
    assert r.as_ofs["i"] == A([30])  # policy(50) = 30, below warmup 49 and now 40
    r = sel([index_dataflow(IX, sources=[S], as_of=None, name="i")], {S: (A([0]), A([50]))}, now=40)
    assert r.as_ofs["i"] == A([40])  # current time
    r = sel(
        [index_dataflow(IX, as_of=None, name="const")], {}, {IX: LagWriteFrontier(5, 1)}, now=40
    )
    assert r.as_ofs["const"] == A([35])  # no storage inputs: the policy applies to the current time


def test_materialized_view_continues_at_its_write_frontier() -> None:
    df = mv_dataflow(MV, sources=[S], as_of=None, name="mv")
    r = sel([df], {S: (A([0]), A([20])), MV: (A([2]), A([8]))})
    assert r.as_ofs["mv"] == A([7])
    # An empty output (write <= read) starts at its read frontier.
    r = sel([df], {S: (A([0]), A([20])), MV: (A([4]), A([4]))})
    assert r.as_ofs["mv"] == A([4])


def test_sealed_output_is_pruned() -> None:
    r = sel(
        [mv_dataflow(MV, sources=[S], as_of=None, name="mv")],
        {S: (A([0]), A([20])), MV: (A([3]), A())},
    )
    assert r.as_ofs["mv"] == A()


def test_a_dataflow_whose_inputs_are_all_complete_starts_now() -> None:
    """Nothing bounds it from above: it starts at the current time, or at its inputs' since if
    later, never at the empty frontier (which computes nothing: a query over a complete
    materialized view failed with ``EmptyAsOfForSubscribe``)."""
    sub = GlobalId.transient(1)
    r = sel(
        [subscribe_dataflow(sub, sources=[MV], as_of=None, name="s")], {MV: (A([8]), A())}, now=40
    )
    assert r.as_ofs["s"] == A([40])
    r = sel(
        [subscribe_dataflow(sub, sources=[MV], as_of=None, name="s")], {MV: (A([50]), A())}, now=40
    )
    assert r.as_ofs["s"] == A([50])
    # No inputs at all (``SELECT 1``), as a subscribe or as a new materialized view.
    assert sel([subscribe_dataflow(sub, as_of=None, name="c")], {}, now=40).as_ofs["c"] == A([40])
    new_mv = mv_dataflow(MV, as_of=None, name="k")
    assert sel([new_mv], {}, now=40).as_ofs["k"] == A([40])
    # A sealed output is still pruned: it need never run again.
    assert sel([new_mv], {MV: (A([3]), A())}, now=40).as_ofs["k"] == A()


def test_read_only_prunes_dropped_inputs_and_dependents() -> None:
    dfs = [
        index_dataflow(IX, sources=[S], as_of=None, name="i"),
        index_dataflow(J, indexes=[IX], as_of=None, name="j"),
        index_dataflow(GlobalId.user(12), sources=[T], as_of=None, name="k"),
    ]
    storage = {S: (A(), A([10])), T: (A([1]), A([10]))}
    r = sel(dfs, storage, read_only=True)
    assert r.as_ofs == {"i": A(), "j": A(), "k": A([9])}
    # Outside read-only mode nothing is pruned for that reason.
    assert sel(dfs, storage).as_ofs["k"] == A([9])


def test_upper_bounds_flow_upstream() -> None:
    dfs = [
        index_dataflow(IX, sources=[S], as_of=None, name="i"),
        mv_dataflow(MV, indexes=[IX], as_of=None, name="mv"),
    ]
    r = sel(dfs, {S: (A([0]), A([10])), MV: (A([0]), A([5]))})
    assert r.as_ofs == {"i": A([4]), "mv": A([4])}


def test_lower_bounds_flow_downstream_and_hard_failure_seals() -> None:
    dfs = [
        index_dataflow(IX, sources=[S], as_of=None, name="i"),
        mv_dataflow(MV, indexes=[IX], as_of=None, name="mv"),
    ]
    r = sel(dfs, {S: (A([6]), A([10])), MV: (A([0]), A([4]))})
    assert r.as_ofs["mv"] == A([6])  # cannot go below its input's since
    assert ("hard", "mv", "write frontier of output u20: upper Antichain([3]) failed") in r.failures


def test_soft_failure_is_reported_not_raised() -> None:
    r = sel([index_dataflow(IX, sources=[S], as_of=None, name="i")], {S: (A([8]), A([8]))})
    assert r.as_ofs["i"] == A([8])
    assert [f[0] for f in r.failures] == ["soft"]


def test_existing_as_of_is_kept_and_dataflows_without_exports_get_empty() -> None:
    from tidegate.spec.protocol.types import DataflowDescription

    r = sel(
        [index_dataflow(IX, sources=[S], as_of=3, name="i"), DataflowDescription("none")],
        {S: (A([0]), A([10]))},
    )
    assert r.as_ofs == {"i": A([3]), "none": A()}


def test_duplicate_names_rejected() -> None:
    with pytest.raises(ValueError):
        sel([index_dataflow(IX, name="x"), index_dataflow(J, name="x")], {})
