"""``tidegate sim plot``: the picture of a run, through matplotlib (PNG, SVG) and plotly (HTML).

The failing run is a short scenario with the mutant ``subscribe_loses_retractions``, which
stops at its violation; the pictures of it must mark the violated property at the time it
broke, with its statement. The laws of lanes, names, order and fault spans are checked on
summaries built by hand.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sim_quick import MUTANT, QUICK

from tidegate.sim.faults import Fault, FaultKind, FaultPlan
from tidegate.sim.plot import (
    CONTROLLER_ROW,
    PlotError,
    TraceSummary,
    lanes,
    matplotlib_figure,
    natural_key,
    plot_file,
    plotly_figure,
    replica_rows,
    summarise,
    write,
)
from tidegate.sim.replay import save_result
from tidegate.sim.run import RunOptions, RunResult, run_simulation

TIDEGATE = [sys.executable, "-m", "tidegate"]


@pytest.fixture(scope="module")
def failing(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunResult, Path]:
    """A run of ``QUICK`` that the mutant breaks, and its saved trace file."""
    for seed in range(1, 41):  # about one in five subscribes while the clients retract rows
        options = RunOptions(seed, QUICK, mutant=MUTANT, keep_trace=True)
        result = run_simulation(options)
        if not result.ok:
            path = tmp_path_factory.mktemp("plot") / "run.json"
            save_result(result, path, options)
            return result, path
    raise AssertionError(f"no seed in 1..40 of {QUICK.name} fails with {MUTANT}")


def _summary(result: RunResult) -> TraceSummary:
    s = summarise(
        result.trace_lines or [], result.plan.to_json(), "failing", result.history.to_json()
    )
    s.end_ms = result.stats.virtual_ms
    return s


def _texts(fig: Any) -> list[str]:
    """Every text of a matplotlib figure: the figure's own and each axes'."""
    out = [t.get_text() for t in fig.texts]
    for ax in fig.axes:
        out += [t.get_text() for t in ax.texts]
        out += [label.get_text() for label in ax.get_yticklabels()]
    return out


# -- the violation ------------------------------------------------------------------------------


def test_a_failing_runs_pictures_mark_the_violation_with_its_statement(
    failing: tuple[RunResult, Path],
) -> None:
    result, _ = failing
    v = result.violation
    assert v is not None
    s = _summary(result)
    assert s.violation == (v.at_ms, v.property) and s.statement == v.message

    fig = matplotlib_figure(s)
    texts = _texts(fig)
    statement = next(t for t in fig.texts if t.get_gid() == "violation-statement").get_text()
    assert f"violated: {v.property} at {v.at_ms} ms" in statement
    assert v.message[:60] in statement.replace("\n", " ")
    assert v.property in texts  # the mark's label, above the top panel
    # A red line at the time it broke, across every panel.
    marks = [line for ax in fig.axes for line in ax.lines if line.get_gid() == "violation"]
    assert len(marks) == len(fig.axes) > 1
    xdata: list[Any] = [list(line.get_xdata()) for line in marks]  # type: ignore[arg-type]
    assert all(xs == [v.at_ms, v.at_ms] for xs in xdata)

    html = plotly_figure(s)
    shapes = [sh for sh in html.layout.shapes if sh.name == "violation"]
    assert len(shapes) == 1 and shapes[0].x0 == shapes[0].x1 == v.at_ms  # in ms: a short run
    assert shapes[0].yref == "paper" and (shapes[0].y0, shapes[0].y1) == (0, 1)
    notes = [a for a in html.layout.annotations if a.name == "violation"]
    assert len(notes) == 1 and v.property in notes[0].text and notes[0].hovertext == v.message
    assert v.message[:60] in html.layout.title.text


def test_the_lane_of_the_object_the_statement_names_is_marked(
    failing: tuple[RunResult, Path],
) -> None:
    result, _ = failing
    s = _summary(result)
    words = set(re.findall(r"\w+", s.statement))
    named = [lane for lane in lanes(s) if lane.name in words]
    assert named, s.statement
    fig = matplotlib_figure(s)
    red = [t.get_text() for ax in fig.axes for t in ax.texts if t.get_color() == "#d62728"]
    assert named[0].name in red


def test_a_passing_summary_has_no_violation_mark() -> None:
    s = summarise(['{"id":"u1","k":"upper","t":10,"upper":"[5]"}'], title="ok")
    fig = matplotlib_figure(s)
    assert not [line for ax in fig.axes for line in ax.lines if line.get_gid() == "violation"]
    assert not [sh for sh in plotly_figure(s).layout.shapes if sh.name == "violation"]


# -- lanes ------------------------------------------------------------------------------------


def test_natural_order_puts_r2_before_r10() -> None:
    names = ["r10", "r2", "r1", "r2x1", "u12", "u3"]
    assert sorted(names, key=natural_key) == ["r1", "r2", "r2x1", "r10", "u3", "u12"]


HISTORY = {
    "events": [
        {"op": "table", "id": "u1", "name": "orders", "at_ms": 1},
        {"op": "install", "id": "u10", "name": "big", "kind": "index", "at_ms": 2},
        {"op": "install", "id": "u2", "name": "a_mv", "kind": "materialized_view", "at_ms": 2},
        {"op": "install", "id": "u11", "name": "big", "kind": "index", "at_ms": 50},
        {"op": "subscribe", "n": 7, "id": "t1", "target": "feed", "invoke_ms": 3},
        {"op": "batch", "sub": 7, "lower": [0], "upper": [4], "updates": [], "at_ms": 9},
        {
            "op": "peek",
            "n": 8,
            "target": "u10",
            "name": "big",
            "at": None,
            "status": "ok",
            "invoke_ms": 20,
            "complete_ms": 24,
        },
    ]
}
LINES = [
    '{"id":"u1","k":"upper","t":10,"upper":"[5]"}',
    '{"id":"u10","k":"upper","t":12,"upper":"[6]"}',
    '{"id":"u11","k":"upper","t":60,"upper":"[50]"}',
    '{"id":"u2","k":"since","t":12,"since":"[1]"}',
    '{"k":"resp","m":"Frontiers u10 w=[3] i=[2] o=[3]","r":"r10","t":14}',
    '{"k":"replica_start","replica":"r10","incarnation":1,"t":0}',
    '{"k":"replica_start","replica":"r2","incarnation":1,"t":0}',
    '{"k":"controller_down","generation":1,"why":"killed","t":30}',
    '{"id":"u10","k":"mv_write_lost","replica":"r2","t":31}',
    '{"id":"s2","k":"upper","t":40,"upper":"[30]"}',
]


def test_lanes_are_named_by_the_objects_names_grouped_and_in_natural_order() -> None:
    s = summarise(LINES, None, "t", HISTORY)
    got = [(lane.name, lane.kind, lane.ids) for lane in lanes(s)]
    assert got == [
        ("orders", "table", ("u1",)),
        ("big", "index", ("u10", "u11")),  # dropped and created again: one lane
        ("a_mv", "materialized_view", ("u2",)),
        ("feed", "subscribe", ("t1",)),
        ("s2", "system_collection", ("s2",)),  # a managed collection the runtime made
    ]
    assert replica_rows(s) == ["r2", "r10", CONTROLLER_ROW]
    assert [e[1] for e in s.controller] == ["controller_down"]
    assert s.replicas["r2"] == [(0, "replica_start", LINES[6])]  # routine traffic left out
    assert s.batches["t1"] == [(9, 4, 0, None)]
    [peek] = s.peeks["u10"]
    assert (peek.issued_ms, peek.done_ms, peek.read_at, peek.status) == (20, 24, None, "answered")
    texts = _texts(matplotlib_figure(s))
    for name in ("orders", "big", "a_mv", "feed", "r2", "r10", CONTROLLER_ROW):
        assert name in texts
    assert "u10" not in texts  # an id is only a detail under the name
    notes = " ".join(a.text for a in plotly_figure(s).layout.annotations)
    assert "<b>big</b>" in notes and "<b>feed</b>" in notes


def test_faults_are_spans_from_start_to_end_labelled_by_kind() -> None:
    plan = FaultPlan(
        (
            Fault(5, FaultKind.CUT_CONNECTION, "r2", 20),
            Fault(8, FaultKind.CRASH_CONTROLLER_IN, "cas", 10),
            Fault(9, FaultKind.CONSENSUS_FAILURES, "", 30),
        )
    ).to_json()
    s = summarise(LINES, plan, "t", HISTORY)
    assert s.faults == [
        ("r2", 5, 25, "cut_connection"),
        ("", 8, 18, "crash_controller_in cas"),
        ("", 9, 39, "consensus_failures"),
    ]
    fig = matplotlib_figure(s)
    top = fig.axes[0]
    spans = [c for c in top.collections if c.get_gid() == "fault"]
    extents = sorted(
        (round(p.get_extents().x0), round(p.get_extents().x1)) for c in spans for p in c.get_paths()
    )
    assert extents == [(5, 25), (8, 18), (9, 39)]  # in data coordinates: virtual ms
    labels = [t.get_text().strip() for t in top.texts]
    assert labels == ["cut_connection", "crash_controller_in cas", "consensus_failures"]
    # The two controller faults overlap: their labels are on different levels of the row.
    (_, y1), (_, y2) = top.texts[1].get_position(), top.texts[2].get_position()
    assert y1 != y2
    html = plotly_figure(s)
    filled = [t for t in html.data if t.fill == "toself"]
    assert sorted(t.text for t in filled) == [
        "consensus_failures 9..39 ms",
        "crash_controller_in cas 8..18 ms",
        "cut_connection r2 5..25 ms",
    ]


# -- files ------------------------------------------------------------------------------------


def test_the_pictures_are_written_in_the_format_their_suffix_names(
    failing: tuple[RunResult, Path], tmp_path: Path
) -> None:
    result, trace = failing
    v = result.violation
    assert v is not None
    png, svg, html = plot_file(trace, [tmp_path / "a.png", tmp_path / "a.svg", tmp_path / "a.html"])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 30_000
    page = svg.read_text()
    assert page.lstrip().startswith("<?xml") and "<svg" in page and len(page) > 50_000
    assert v.property in page  # matplotlib writes text as text
    doc = html.read_text()
    assert doc.startswith("<html>") or doc.lstrip().lower().startswith(("<!doctype", "<html"))
    assert "Plotly.newPlot" in doc and v.property in doc and f"mutant {MUTANT}" in doc
    assert '<script src="http' not in doc  # standalone: plotly.js is inlined
    # The default: PNG and HTML beside the trace.
    assert plot_file(trace) == [trace.with_suffix(".png"), trace.with_suffix(".html")]


def test_an_unknown_format_is_a_typed_error() -> None:
    with pytest.raises(PlotError, match=r"unknown picture format '\.gif'"):
        write(TraceSummary(), "x.gif")


@pytest.mark.processes
def test_plot_command_in_a_real_process(failing: tuple[RunResult, Path], tmp_path: Path) -> None:
    _, trace = failing
    out = tmp_path / "picture.svg"
    done = subprocess.run(
        [*TIDEGATE, "sim", "plot", str(trace), "-o", str(out), "-o", str(tmp_path / "p.html")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"wrote {out} and {tmp_path / 'p.html'}\n"
    assert "<svg" in out.read_text() and (tmp_path / "p.html").stat().st_size > 100_000
    bad = subprocess.run(
        [*TIDEGATE, "sim", "plot", str(trace), "-o", str(tmp_path / "p.gif")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr == (
        f"tidegate sim: {tmp_path / 'p.gif'}: unknown picture format '.gif' "
        "(known: .png, .svg, .pdf, .html)\n"
    )
    missing = subprocess.run(
        [*TIDEGATE, "sim", "plot", str(tmp_path / "nope.json")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert json.loads(trace.read_text())["mutant"] == MUTANT


def test_a_subscription_a_violation_names_by_its_client_number_is_in_the_picture() -> None:
    """A statement that names a client's subscription (``subscribe 7``) finds it in the
    picture: the subscribe lane says which client subscriptions it shows, and is outlined."""
    violation = '{"k":"violation","t":45,"property":"subscribe_gap_free","message":"subscribe 7 emitted after it ended"}'
    s = summarise([*LINES, violation], None, "t", HISTORY)
    [feed] = [lane for lane in lanes(s) if lane.name == "feed"]
    assert feed.clients == ("subscribe 7",) and feed.label == "subscribe t1 (client subscribe 7)"
    fig = matplotlib_figure(s)
    assert "subscribe t1 (client subscribe 7)" in _texts(fig)
    red = [t.get_text() for ax in fig.axes for t in ax.texts if t.get_color() == "#d62728"]
    assert "feed" in red and "orders" not in red


def test_a_violation_names_the_objects_of_the_client_operations_it_names() -> None:
    """``subscribe 7`` becomes ``subscribe 7 (feed, t1)``, ``append 9`` names its tables as
    the plot does; a reference that already says what it is about is left alone."""
    from tidegate.sim.history import ClientHistory
    from tidegate.sim.run import named_in

    history = ClientHistory()
    history.events.extend(
        [
            {"op": "table", "id": "u1", "name": "orders"},
            {"op": "subscribe", "n": 7, "id": "t1", "target": "feed"},
            {"op": "append", "n": 9, "batches": [["u1", [[["a", 1], 1]]]]},
        ]
    )
    assert named_in("subscribe 7 emitted after it ended", history) == (
        "subscribe 7 (feed, t1) emitted after it ended"
    )
    assert named_in("append 9 was acknowledged", history) == "append 9 (orders) was acknowledged"
    assert named_in("subscribe 7 (feed) at upper 3", history) == "subscribe 7 (feed) at upper 3"
    assert named_in("subscribe 70 is unknown", history) == "subscribe 70 is unknown"
