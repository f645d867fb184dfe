"""The simulator's fast paths change nothing observable.

Event-driven publishing in the replica, dirty-flag stepping in the executor and
the hand-built trace lines are optimisations: a run with them must produce the
very trace (digest) of a run that publishes every export and steps every
dataflow each time, and a fast trace line must be the JSON encoder's line.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidegate.sim import RunOptions, run_simulation
from tidegate.sim.plot import summarise
from tidegate.sim.scenario import small
from tidegate.sim.trace import TraceEvent, _fast_line, canonical
from tidegate.spec.compute_replica import ComputeReplica
from tidegate.spec.executor.python import PythonExecutor


def _digest(seed: int) -> str:
    return run_simulation(RunOptions(seed=seed, scenario=small())).trace_digest


@pytest.mark.parametrize("seed", [1, 4])
def test_event_driven_publishing_and_stepping_equal_eager_ones(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = _digest(seed)
    publish, step = ComputeReplica._publish, PythonExecutor.step

    def eager_publish(self: Any) -> Any:
        self._all_dirty = True  # look at every export, as if everything had moved
        return publish(self)

    def eager_step(self: Any) -> Any:
        for df in self._dataflows.values():
            df.dirty = True
        return step(self)

    monkeypatch.setattr(ComputeReplica, "_publish", eager_publish)
    monkeypatch.setattr(PythonExecutor, "step", eager_step)
    assert _digest(seed) == fast


_names = st.text(min_size=1, max_size=6)
_values = st.one_of(st.text(max_size=12), st.integers(), st.booleans(), st.none(), st.floats())


@given(
    at=st.integers(0, 10**7),
    kind=st.text(max_size=8),
    fields=st.dictionaries(_names, _values, max_size=5),
)
def test_fast_trace_line_is_the_json_line_or_declines(
    at: int, kind: str, fields: dict[str, Any]
) -> None:
    fast = _fast_line(at, kind, dict(fields))
    plain = all(type(v) in (str, int) for v in fields.values()) and not {"t", "k"} & set(fields)
    if not plain:
        assert fast is None
        return
    assert fast == TraceEvent(at, kind, {k: canonical(v) for k, v in fields.items()}).line()


def test_plot_summary_reads_reports_and_peeks_from_trace_lines() -> None:
    lines = [
        '{"k":"resp","m":"Frontiers u5 w=[3] i=[2] o=[3]","r":"r1","e":1,"t":10}',
        '{"k":"resp","m":"SubscribeResponse u6 SubscribeBatch [0]..[4]","r":"r2","e":1,"t":11}',
        '{"id":"u5","k":"upper","t":12,"upper":"[3]"}',
        '{"id":"u5","k":"since","since":"[1]","t":13}',
        '{"id":"u5","k":"peek","t":20,"time":2,"uuid":"abc"}',
        '{"k":"peek_result","result":"PeekRows","t":25,"uuid":"abc"}',
        '{"id":"u5","k":"peek_refused","t":26,"time":0}',
    ]
    s = summarise(lines)
    assert s.series["u5"] == {
        "r1 write": [(10, 3)],
        "controller upper": [(12, 3)],
        "controller since": [(13, 1)],
    }
    assert s.series["u6"] == {"r2 write": [(11, 4)]}
    assert [(t, when, status) for t, when, status, _ in s.peeks["u5"]] == [
        (20, 2, "issued"),
        (25, 2, "answered"),
        (26, 0, "error"),
    ]
    assert s.replicas == {}
