"""``tidegate sim plot``: a picture of a run -- PNG or SVG through matplotlib, interactive HTML through plotly.

The picture has one time axis (virtual time), shared by every panel:

* the top panel has a row per replica (natural order: ``r2`` before ``r10``) and one for
  the controller and storage: the fault plan's faults as spans from start to end,
  labelled by kind, and the lifecycle events (starts, crashes, connections, reconciliations,
  controller restarts) as marks;
* then one lane per object, named by its name (tables, then indexes, materialized views and
  subscribes, each in natural order; a dataflow dropped and created again stays in its lane):
  how far each frontier is behind virtual time -- the controller's upper and since, each
  replica's reported write frontier -- as step lines, the clients' peeks as segments from
  issue to answer at the lag of the time they read (a fresh read at 0), coloured by outcome,
  and the subscribe batches the clients received as marks at their upper's lag;
* a violated property is a red line across every panel at the time it broke, with the
  property and its one-line statement above the panels (and the lane of an object the
  statement names is marked).

Everything comes from the run's trace lines (uppers, sinces, replica reports, lifecycle
events), its fault plan and its client history (names, peeks, subscribe batches);
:func:`plot_file` re-runs a saved trace to get every line back. matplotlib draws with its
Agg backend: no display is needed.
"""

from __future__ import annotations

import itertools
import json
import re
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from plotly.graph_objects import Figure as PlotlyFigure

__all__ = [
    "FORMATS",
    "Lane",
    "PeekMark",
    "PlotError",
    "TraceSummary",
    "lanes",
    "matplotlib_figure",
    "natural_key",
    "plot_file",
    "plot_paths",
    "plotly_figure",
    "summarise",
    "write",
]

FORMATS = (".png", ".svg", ".pdf", ".html")
"""The output suffixes :func:`write` knows: PNG, SVG and PDF through matplotlib, HTML through plotly."""

_OTHER_PICTURES = (".gif", ".jpg", ".jpeg", ".webp", ".bmp", ".tif", ".tiff", ".eps", ".ps", ".htm")
"""Suffixes that name a picture format :func:`write` does not draw (refused, not a prefix)."""


class PlotError(ValueError):
    """A picture that cannot be drawn (an unknown output suffix, the plot extra missing)."""


# -- what a trace says ---------------------------------------------------------------------

_FRONTIER_FIELDS = ("upper", "write", "write_frontier", "frontier", "since")
_INT = re.compile(r"-?\d+")
_CLOSED = -1
"""Series value for the empty frontier ``[]`` (the collection is complete or dropped)."""


def _frontier(value: Any) -> int | None:
    """An int frontier's single element, ``_CLOSED`` for ``[]``, ``None`` if not a frontier."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, list):
        ints = [v for v in value if isinstance(v, int) and not isinstance(v, bool)]
        if not value:
            return _CLOSED
        return min(ints) if ints else None
    if isinstance(value, str) and "[" in value:
        inner = value[value.rindex("[") : value.rindex("]") + 1] if "]" in value else ""
        ints = [int(x) for x in _INT.findall(inner)]
        if inner == "[]":
            return _CLOSED
        return min(ints) if ints else None
    return None


@dataclass(frozen=True)
class PeekMark:
    """A client's peek: issued and answered (``None``: never) in virtual ms, the time it
    read (``None``: a fresh read), its outcome and a description for hovering."""

    issued_ms: int
    done_ms: int | None
    read_at: int | None
    status: str
    text: str


PEEK_STATUSES = ("answered", "refused as expected", "error", "canceled", "unknown", "issued")


@dataclass
class TraceSummary:
    """The parts of a run the picture shows (all times in virtual ms), by collection id."""

    title: str = ""
    end_ms: int = 0
    replicas: dict[str, list[tuple[int, str, str]]] = field(default_factory=dict)
    """Lifecycle events per replica: ``(time, kind, trace line)``."""
    controller: list[tuple[int, str, str]] = field(default_factory=list)
    """The controller's lifecycle events (starts, deaths, crash points)."""
    faults: list[tuple[str, int, int, str]] = field(default_factory=list)
    """``(target, start, end, kind)``."""
    series: dict[str, dict[str, list[tuple[int, int]]]] = field(default_factory=dict)
    """Per collection, ``"<who> <field>"`` (``controller upper``, ``r1 write``) to its
    ``(time, frontier)`` points."""
    peeks: dict[str, list[PeekMark]] = field(default_factory=dict)
    batches: dict[str, list[tuple[int, int, int, str | None]]] = field(default_factory=dict)
    """Subscribe batches the clients received: ``(time, upper, updates, error)``."""
    names: dict[str, str] = field(default_factory=dict)
    """Collection id to the object's name."""
    kinds: dict[str, str] = field(default_factory=dict)
    """Collection id to ``table``, ``index``, ``materialized_view`` or ``subscribe``."""
    clients: dict[str, list[str]] = field(default_factory=dict)
    """Collection id to the client operations that made it, as violations name them
    (``subscribe 99``): a subscribe's collection is the client's subscription."""
    violation: tuple[int, str] | None = None
    """When and which property broke."""
    statement: str = ""
    """The broken property's one-line statement."""


_RESULT_STATUS = {"PeekRows": "answered", "PeekError": "error", "PeekCanceled": "canceled"}
_REPORT = re.compile(r"^(Frontiers|SubscribeResponse) (\S+) ")
_WRITE = re.compile(r"\bw=(\[[^\]]*\])")
_BATCH_UPPER = re.compile(r"\.\.(\[[^\]]*\])")
_LIFECYCLE = re.compile(r"start|crash|halt|status|reconcil|replace|add_replica|rehydrat")


def _replica_report(s: TraceSummary, t: int, ev: dict[str, Any]) -> None:
    """A replica's write frontier from a ``resp`` line (``Frontiers u1 w=[3]`` or a subscribe batch's upper)."""
    m = _REPORT.match(str(ev.get("m", "")))
    if m is None:
        return
    found = (_WRITE if m.group(1) == "Frontiers" else _BATCH_UPPER).search(str(ev["m"]))
    value = None if found is None else _frontier(found.group(1))
    if value is not None:
        key = f"{ev.get('r')} write"
        s.series.setdefault(m.group(2), {}).setdefault(key, []).append((t, value))


def _history_peek(ev: Mapping[str, Any]) -> PeekMark:
    status = str(ev.get("status"))
    error = str(ev.get("error") or "")
    if status == "ok":
        outcome = "answered"
    elif status == "fail" and error.startswith("cancelled"):
        outcome = "canceled"
    elif status == "fail" and ev.get("expect") == "refusal":
        outcome = "refused as expected"
    elif status == "fail":
        outcome = "error"
    elif status == "info":
        outcome = "unknown"
    else:
        outcome = "issued"
    at = ev.get("at")
    read = "fresh" if at is None else f"at {at}"
    text = f"peek {ev.get('n')} of {ev.get('name')} ({read}): {outcome}"
    if error:
        text += f": {error[:120]}"
    done = ev.get("complete_ms")
    return PeekMark(
        int(ev.get("invoke_ms", 0)),
        None if done is None else int(done),
        None if at is None else int(at),
        outcome,
        text,
    )


def _read_history(s: TraceSummary, history: Mapping[str, Any]) -> None:
    subs: dict[int, str] = {}
    for ev in history.get("events", []):
        op = ev.get("op")
        if op == "table":
            s.names[str(ev["id"])] = str(ev.get("name", ev["id"]))
            s.kinds[str(ev["id"])] = "table"
        elif op == "install" or (op == "create" and ev.get("id") is not None):
            s.names[str(ev["id"])] = str(ev["name"])
            s.kinds[str(ev["id"])] = str(ev.get("kind", "index"))
        elif op == "subscribe" and ev.get("id") is not None:
            subs[int(ev["n"])] = str(ev["id"])
            s.names.setdefault(str(ev["id"]), str(ev["target"]))
            s.kinds[str(ev["id"])] = "subscribe"
            s.clients.setdefault(str(ev["id"]), []).append(f"subscribe {ev['n']}")
        elif op == "peek":
            s.peeks.setdefault(str(ev["target"]), []).append(_history_peek(ev))
            s.names.setdefault(str(ev["target"]), str(ev.get("name", ev["target"])))
        elif op == "batch" and int(ev.get("sub", -1)) in subs:
            upper = _frontier(list(ev.get("upper", [])))
            error = ev.get("error")
            s.batches.setdefault(subs[int(ev["sub"])], []).append(
                (
                    int(ev["at_ms"]),
                    _CLOSED if upper is None else upper,
                    len(ev.get("updates", ())),
                    None if error is None else str(error),
                )
            )
        t = ev.get("complete_ms", ev.get("at_ms", ev.get("invoke_ms")))
        if isinstance(t, int):
            s.end_ms = max(s.end_ms, t)


def summarise(
    lines: Iterable[str],
    plan: Mapping[str, Any] | None = None,
    title: str = "",
    history: Mapping[str, Any] | None = None,
) -> TraceSummary:
    """Read trace lines (JSON objects with ``t`` and ``k``), a fault plan and a client
    history (their JSON forms) into a summary.

    With a history, the peeks are the history's (every client peek, fresh ones too) and
    collections are named; without one, the trace's peeks at explicit times are used."""
    s = TraceSummary(title=title)
    if history is not None:
        _read_history(s, history)
    issued: dict[str, tuple[str, int, int]] = {}  # peek uuid -> (collection, issued, read time)
    for raw in lines:
        try:
            ev = json.loads(raw)
        except json.JSONDecodeError:
            continue
        if not isinstance(ev, dict):
            continue
        t = int(ev.get("t", 0))
        kind = str(ev.get("k", ""))
        s.end_ms = max(s.end_ms, t)
        replica = ev.get("replica")
        cid = ev.get("id")
        if kind == "violation":
            if s.violation is None:
                s.violation = (t, str(ev.get("property", kind)))
                s.statement = str(ev.get("message", ""))
            continue
        if kind == "resp":
            _replica_report(s, t, ev)
            continue
        if kind.startswith(("controller_", "crash_point")):
            s.controller.append((t, kind, raw))
            continue
        if kind == "peek" and isinstance(ev.get("uuid"), str) and isinstance(ev.get("time"), int):
            issued[ev["uuid"]] = (str(cid), t, ev["time"])
            if history is None:
                s.peeks.setdefault(str(cid), [])
            continue
        if kind == "peek_result":
            found = issued.pop(str(ev.get("uuid")), None)
            if found is not None and history is None:
                pid, at, read_at = found
                status = _RESULT_STATUS.get(str(ev.get("result")), "canceled")
                text = f"peek {ev.get('uuid')} of {pid} at {read_at}: {status}"
                s.peeks[pid].append(PeekMark(at, t, read_at, status, text))
            continue
        if isinstance(cid, str) and replica is None:
            for name in _FRONTIER_FIELDS:
                value = _frontier(ev.get(name)) if name in ev else None
                if value is not None:
                    key = f"controller {name}"
                    s.series.setdefault(cid, {}).setdefault(key, []).append((t, value))
            continue
        if isinstance(replica, str) and _LIFECYCLE.search(kind):
            s.replicas.setdefault(replica, []).append((t, kind, raw))
    if history is None:
        for pid, (cid, at, read_at) in issued.items():
            s.peeks[cid].append(PeekMark(at, None, read_at, "issued", f"peek {pid} of {cid}"))
    if plan:
        from .faults import REPLICA_KINDS

        for f in plan.get("faults", []):
            start = int(f.get("at_ms", 0))
            end = start + int(f.get("duration_ms", 0))
            kind = str(f.get("kind", "fault"))
            target = str(f.get("target", ""))
            if kind not in REPLICA_KINDS:
                target = ""
                if f.get("target"):
                    kind = f"{kind} {f['target']}"
            s.faults.append((target, start, end, kind))
            s.end_ms = max(s.end_ms, end)
            if target:
                s.replicas.setdefault(target, [])
    return s


# -- lanes ---------------------------------------------------------------------------------

_GROUPS = (
    "table",
    "source",
    "index",
    "materialized_view",
    "subscribe",
    "sink",
    "collection",
    "system_collection",
)


def natural_key(text: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key that orders the numbers inside names by value: ``r2`` before ``r10``."""
    return tuple(
        (0, int(part)) if part.isdigit() else (1, part.lower())
        for part in re.split(r"(\d+)", text)
        if part
    )


@dataclass(frozen=True)
class Lane:
    """One object's lane: its name, kind, every collection id it had, and the client
    operations that made them (``subscribe 99``: how violations name a subscription)."""

    name: str
    kind: str
    ids: tuple[str, ...]
    clients: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        kind = self.kind.replace("_", " ")
        ids = ", ".join(self.ids[:3]) + (", ..." if len(self.ids) > 3 else "")
        if not self.clients:
            return f"{kind} {ids}"
        numbers = [c.rsplit(" ", 1)[-1] for c in self.clients]
        shown = ", ".join(numbers[:4]) + (", ..." if len(numbers) > 4 else "")
        return f"{kind} {ids} (client {self.clients[0].split(' ')[0]} {shown})"


def lanes(s: TraceSummary) -> list[Lane]:
    """The object lanes, grouped by kind (tables first) and in natural order within a group."""
    ids = set(s.series) | {c for c, p in s.peeks.items() if p} | set(s.batches)
    by_name: dict[tuple[str, str], list[str]] = {}
    for cid in ids:
        name = s.names.get(cid, cid)
        # The history names what the scenario made; the rest is the runtime's own (``s`` ids:
        # the managed status and statistics collections) or an object it never named.
        kind = s.kinds.get(cid) or ("system_collection" if cid.startswith("s") else "collection")
        by_name.setdefault((name, kind), []).append(cid)
    out = [
        Lane(
            name,
            kind,
            tuple(sorted(c, key=natural_key)),
            tuple(
                sorted((client for cid in c for client in s.clients.get(cid, ())), key=natural_key)
            ),
        )
        for (name, kind), c in by_name.items()
    ]
    order = {kind: i for i, kind in enumerate(_GROUPS)}
    return sorted(out, key=lambda lane: (order.get(lane.kind, len(order)), natural_key(lane.name)))


def replica_rows(s: TraceSummary) -> list[str]:
    """The top panel's rows, top to bottom: replicas in natural order, then the controller."""
    return [*sorted(s.replicas, key=natural_key), CONTROLLER_ROW]


CONTROLLER_ROW = "controller / storage"


def _lag_points(points: Sequence[tuple[int, int]], end_ms: int) -> tuple[list[int], list[int]]:
    """A frontier's ``(time, value)`` points as a step line of ``time - value`` (how far the
    frontier is behind virtual time), up to the next point; a closed frontier ends the line."""
    xs: list[int] = []
    ys: list[int] = []
    for (t0, v0), (t1, _v1) in itertools.pairwise([*points, (end_ms, 0)]):
        if v0 == _CLOSED:
            break
        xs += [t0, t1]
        ys += [t0 - v0, t1 - v0]
    return xs, ys


def _fault_spans(
    s: TraceSummary, rows: Sequence[str], end_ms: int, width_px: float
) -> list[tuple[int, int, int, str, int]]:
    """The faults that started in the run as ``(row, start, stop, kind, label level)``: at
    least a few pixels wide, cut at the end, and each label on the first of three levels of
    its row where it does not run into the label before it."""
    px_per_ms = width_px / end_ms
    label_end: dict[tuple[int, int], float] = {}
    out = []
    for target, start, stop, kind in sorted(s.faults, key=lambda f: f[1]):
        if start > end_ms:
            continue
        row = rows.index(target) if target in rows else len(rows) - 1
        stop = min(max(stop, start + int(4 / px_per_ms) + 1), end_ms)
        level = next(lv for lv in range(3) if label_end.get((row, lv), -1.0) < start or lv == 2)
        label_end[(row, level)] = start + (len(kind) + 2) * 5.5 / px_per_ms
        out.append((row, start, stop, kind, level))
    return out


def _last_reports(s: TraceSummary, end_ms: int) -> dict[str, int]:
    """How far each reporter's lines run: a replica's to its last report (a replica that is
    gone reports no more), the controller's to the end of the run."""
    last: dict[str, int] = {}
    for series in s.series.values():
        for key, points in series.items():
            who = key.split(" ", 1)[0]
            if points:
                last[who] = max(last.get(who, 0), points[-1][0])
    last["controller"] = end_ms
    return last


def _lane_violated(s: TraceSummary, lane: Lane) -> bool:
    if s.violation is None:
        return False
    words = set(re.findall(r"[\w]+", s.statement))
    named = set(re.findall(r"\b(?:subscribe|peek|append) \d+\b", s.statement))
    return (
        lane.name in words or any(c in words for c in lane.ids) or bool(named & set(lane.clients))
    )


def _wrap(text: str, width: int = 150) -> str:
    return "\n".join(textwrap.wrap(text, width)[:3])


# -- colours ---------------------------------------------------------------------------------

_PALETTE = ["#1f77b4", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#3d5a80", "#6a3d9a", "#b15928"]
"""Replica colours: none is a peek outcome's (green, orange, red) or the batches' (cyan)."""
_FAULT_COLORS = {
    "crash_replica": "#d62728",
    "crash_replica_rehydrating": "#d62728",
    "cut_connection": "#ff9896",
    "ghost_connection": "#f7b6d2",
    "slow_replica": "#ffbb78",
    "replace_replica": "#c51b8a",
    "restart_controller": "#7f7f7f",
    "crash_controller_in": "#636363",
    "torn_blob_write": "#8c564b",
    "delay_storage_write": "#bcbd22",
    "consensus_failures": "#9edae5",
    "blob_failures": "#c5b0d5",
}
_PEEK_COLORS = {
    "answered": "#2ca02c",
    "refused as expected": "#ff7f0e",
    "error": "#d62728",
    "canceled": "#999999",
    "unknown": "#9467bd",
    "issued": "#1f77b4",
}
_VIOLATION = "#d62728"
_SINCE = "#9a9a9a"
_BATCH = "#17becf"


def _fault_color(kind: str) -> str:
    return _FAULT_COLORS.get(kind.split(" ", 1)[0], "#7f7f7f")


def _who_colors(s: TraceSummary) -> dict[str, str]:
    colors = {"controller": "#000000"}
    for i, name in enumerate(sorted(s.replicas, key=natural_key)):
        colors[name] = _PALETTE[i % len(_PALETTE)]
    return colors


def _lifecycle_style(kind: str, raw: str) -> tuple[str, str, str]:
    """Marker, colour and legend label of a lifecycle event."""
    k = kind.lower() + " " + raw.lower()
    if "crash" in k or "halt" in k or "controller_down" in k or "failed" in k:
        return "x", "#d62728", "crash / down"
    if "dropped" in k or "disconnect" in k:
        return "v", "#c51b8a", "dropped"
    if "reconcil" in k or "rehydrat" in k:
        return "D", "#1f77b4", "reconciled"
    if "start" in k:
        return "^", "#2ca02c", "start"
    return "o", "#2ca02c", "connected / up"


def _time_unit(end_ms: int) -> tuple[float, str]:
    return (1000.0, "s") if end_ms >= 5_000 else (1.0, "ms")


# -- matplotlib ----------------------------------------------------------------------------


def matplotlib_figure(s: TraceSummary) -> Figure:
    """The picture as a matplotlib :class:`~matplotlib.figure.Figure` (Agg, no display)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    objects = lanes(s)
    rows = replica_rows(s)
    end = max(1, s.end_ms)
    scale, unit = _time_unit(end)
    width_in, left_in, right_in = 15.0, 2.2, 0.9
    head_in = 1.15 + (0.55 if s.violation is not None else 0.0)
    top_h = 0.45 * len(rows) + 0.3
    lane_h = 0.95
    foot_in = 1.3
    height_in = head_in + top_h + lane_h * len(objects) + 0.12 * len(objects) + foot_in
    fig = Figure(figsize=(width_in, height_in), dpi=100, layout=None)
    grid = fig.add_gridspec(
        1 + len(objects),
        1,
        height_ratios=[top_h] + [lane_h] * len(objects),
        left=left_in / width_in,
        right=1 - right_in / width_in,
        top=1 - head_in / height_in,
        bottom=foot_in / height_in,
        hspace=0.12 * (1 + len(objects)) / max(1.0, top_h + lane_h * len(objects)),
    )
    top = fig.add_subplot(grid[0])
    axes = [top] + [fig.add_subplot(grid[i + 1], sharex=top) for i in range(len(objects))]
    fig.text(
        left_in / width_in,
        1 - 0.25 / height_in,
        s.title or "simulation run",
        fontsize=14,
        fontweight="bold",
        va="top",
    )
    fig.text(
        left_in / width_in,
        1 - 0.62 / height_in,
        "lanes: how far each frontier is behind virtual time; peeks from issue to answer "
        "at the lag of the time they read (a fresh read at 0); subscribe batches at their upper",
        fontsize=9,
        color="#444444",
        va="top",
    )
    if s.violation is not None:
        at, prop = s.violation
        fig.text(
            left_in / width_in,
            1 - 0.95 / height_in,
            f"violated: {prop} at {at} ms\n{_wrap(s.statement)}",
            fontsize=10,
            color=_VIOLATION,
            va="top",
            gid="violation-statement",
        )

    # the top panel: replicas and the controller
    top.set_ylim(len(rows) - 0.5, -0.5)
    top.set_yticks(range(len(rows)), rows, fontsize=9)
    top.set_facecolor("#fafafa")
    top.set_title("replicas, controller and faults", fontsize=9, loc="left", color="#444444")
    fault_kinds: dict[str, str] = {}
    for row, start, stop, kind, level in _fault_spans(s, rows, end, (width_in - 3.1) * 100):
        color = _fault_color(kind)
        fault_kinds[kind.split(" ", 1)[0]] = color
        top.broken_barh(
            [(start, stop - start)], (row - 0.4, 0.8), facecolors=color, alpha=0.45, gid="fault"
        )
        for ax in axes[1:]:
            ax.axvspan(start, stop, color=color, alpha=0.07, lw=0)
        top.text(
            start,
            row - 0.38 + 0.27 * level,
            f" {kind}",
            fontsize=7.5,
            va="top",
            ha="left",
            color="#222222",
            clip_on=True,
        )
    styles: dict[str, tuple[str, str]] = {}
    for name, events in [*s.replicas.items(), (CONTROLLER_ROW, s.controller)]:
        row = rows.index(name)
        for t, kind, raw in events:
            marker, color, label = _lifecycle_style(kind, raw)
            styles[label] = (marker, color)
            top.plot([t], [row], marker=marker, color=color, ms=6, mew=1.5, ls="none")

    # the object lanes
    colors = _who_colors(s)
    until = _last_reports(s, end)
    for ax, lane in zip(axes[1:], objects, strict=True):
        violated = _lane_violated(s, lane)
        ax.text(
            -0.008,
            0.62,
            lane.name,
            transform=ax.transAxes,
            ha="right",
            va="center",
            fontsize=10,
            fontweight="bold",
            color=_VIOLATION if violated else "#111111",
        )
        ax.text(
            -0.008,
            0.3,
            lane.label,
            transform=ax.transAxes,
            ha="right",
            va="center",
            fontsize=7.5,
            color="#666666",
        )
        if violated:
            for spine in ax.spines.values():
                spine.set_color(_VIOLATION)
                spine.set_linewidth(1.6)
        lags: list[int] = []
        peeks = [p for cid in lane.ids for p in s.peeks.get(cid, [])]
        for cid in lane.ids:
            for key, points in sorted(s.series.get(cid, {}).items()):
                who, what = key.split(" ", 1)
                xs, ys = _lag_points(points, until[who])
                lags += ys
                if what == "since":
                    ax.plot(xs, ys, color=_SINCE, lw=1.0, ls="--")
                else:
                    width = 1.6 if who == "controller" else 0.9
                    ax.plot(xs, ys, color=colors.get(who, "#7f7f7f"), lw=width, alpha=0.9)
            for t, upper, _n, error in s.batches.get(cid, []):
                y = 0 if upper == _CLOSED else t - upper
                lags.append(y)
                ax.plot(
                    [t], [y], marker="d", ms=4, ls="none", color=_VIOLATION if error else _BATCH
                )
        low, high = _lag_limits(lags, [_peek_lag(p) for p in peeks])
        ax.set_ylim(low, high)
        for p in peeks:
            y = _peek_lag(p)
            clipped = min(max(y, low), high)
            color = _PEEK_COLORS.get(p.status, "#333333")
            done = end if p.done_ms is None else p.done_ms
            ax.plot([p.issued_ms, done], [clipped, clipped], color=color, lw=1.2, alpha=0.8)
            marker = "o" if clipped == y else ("^" if y > high else "v")
            ax.plot([done], [clipped], marker=marker, ms=3.5, color=color, ls="none")
        ax.yaxis.tick_right()
        ax.yaxis.set_major_locator(MaxNLocator(3, integer=True))
        ax.tick_params(axis="y", labelsize=7, colors="#666666")
        ax.grid(axis="x", color="#e4e4e4", lw=0.8)
        ax.axhline(0, color="#cccccc", lw=0.6)
    for ax in axes:
        ax.set_xlim(-0.005 * end, 1.02 * end)
        ax.tick_params(axis="x", labelbottom=ax is axes[-1], labelsize=8)
        ax.grid(axis="x", color="#e4e4e4", lw=0.8)
    axes[-1].xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v / scale:g}"))
    axes[-1].set_xlabel(f"virtual time ({unit})", fontsize=10)
    if len(axes) > 1:
        fig.text(
            1 - (right_in - 0.55) / width_in,
            (foot_in + (height_in - head_in - top_h - foot_in) / 2) / height_in,
            "behind virtual time (ms)",
            rotation=90,
            va="center",
            fontsize=9,
            color="#666666",
        )
    if s.violation is not None:
        for ax in axes:
            ax.axvline(s.violation[0], color=_VIOLATION, lw=2, gid="violation")
        near_end = s.violation[0] > 0.75 * end
        top.annotate(
            f"{s.violation[1]}",
            xy=(s.violation[0], -0.5),
            xytext=(-4 if near_end else 0, 4),
            textcoords="offset points",
            ha="right" if near_end else "center",
            va="bottom",
            fontsize=9,
            color=_VIOLATION,
            fontweight="bold",
            annotation_clip=False,
        )

    handles: list[Any] = [
        Line2D(
            [],
            [],
            color=c,
            lw=1.6 if w == "controller" else 0.9,
            label="controller upper" if w == "controller" else f"{w} write frontier",
        )
        for w, c in colors.items()
    ]
    handles.append(Line2D([], [], color=_SINCE, ls="--", label="controller since"))
    statuses = {p.status for ps in s.peeks.values() for p in ps}
    handles += [
        Line2D([], [], color=c, marker="o", ms=4, lw=1.2, label=f"peek {k}")
        for k, c in _PEEK_COLORS.items()
        if k in statuses
    ]
    handles.append(Line2D([], [], color=_BATCH, marker="d", ls="none", label="subscribe batch"))
    handles += [
        Line2D([], [], color=c, marker=m, ls="none", mew=1.5, label=label)
        for label, (m, c) in styles.items()
    ]
    handles += [Patch(color=c, alpha=0.45, label=k) for k, c in fault_kinds.items()]
    if s.violation is not None:
        handles.append(Line2D([], [], color=_VIOLATION, lw=2, label="violation"))
    fig.legend(
        handles=handles,
        loc="lower left",
        bbox_to_anchor=(left_in / width_in, 0.05 / height_in),
        ncol=6,
        fontsize=8,
        frameon=False,
    )
    return fig


def _peek_lag(p: PeekMark) -> int:
    """How far before its issue a peek read (a fresh read: 0; a future time: negative)."""
    return 0 if p.read_at is None else p.issued_ms - p.read_at


def _lag_limits(lags: Sequence[int], peeks: Sequence[int]) -> tuple[float, float]:
    """A lane's lag axis: where the frontiers are (their top 2% cut, so a stalled frontier
    does not squash the rest), widened for the peeks within 4 times that; farther peeks are
    drawn at the edge."""
    if not lags and not peeks:
        return -1.0, 1.0
    ordered = sorted(lags) or [0]
    low = min(0, ordered[0])
    high = max(ordered[min(len(ordered) - 1, int(len(ordered) * 0.98))], low + 10)
    reach = 4 * (high - low)
    near = [y for y in peeks if low - reach <= y <= high + reach]
    low, high = min([low, *near]), max([high, *near])
    pad = (high - low) * 0.12
    return low - pad, high + pad


# -- plotly --------------------------------------------------------------------------------


def plotly_figure(s: TraceSummary) -> PlotlyFigure:
    """The picture as an interactive plotly figure: hover any mark for its details."""
    import importlib

    # plotly has no type information: its modules are Any here.
    go: Any = importlib.import_module("plotly.graph_objects")
    make_subplots: Any = importlib.import_module("plotly.subplots").make_subplots

    objects = lanes(s)
    rows = replica_rows(s)
    end = max(1, s.end_ms)
    scale, unit = _time_unit(end)
    top_px, lane_px = 34 * len(rows) + 30, 110
    fig = make_subplots(
        rows=1 + len(objects),
        cols=1,
        shared_xaxes=True,
        vertical_spacing=min(0.02, 12 / (top_px + lane_px * len(objects))),
        row_heights=[top_px] + [lane_px] * len(objects),
    )

    def x(t: float) -> float:
        return t / scale

    legend_seen: set[str] = set()

    def legend(name: str) -> dict[str, Any]:
        first = name not in legend_seen
        legend_seen.add(name)
        return {"name": name, "legendgroup": name, "showlegend": first}

    for row, start, stop, kind, level in _fault_spans(s, rows, end, 1200):
        target = rows[row] if row < len(rows) - 1 else ""
        fig.add_trace(
            go.Scatter(
                x=[x(start), x(stop), x(stop), x(start), x(start)],
                y=[row - 0.4, row - 0.4, row + 0.4, row + 0.4, row - 0.4],
                fill="toself",
                mode="lines",
                line={"width": 0},
                fillcolor=_fault_color(kind),
                opacity=0.5,
                hoveron="fills",
                text=f"{kind} {target} {start}..{stop} ms".replace("  ", " "),
                hoverinfo="text",
                **legend(kind.split(" ", 1)[0]),
            ),
            row=1,
            col=1,
        )
        fig.add_annotation(
            x=x(start),
            y=row - 0.3 + 0.27 * level,
            text=kind,
            showarrow=False,
            xanchor="left",
            font={"size": 10},
            row=1,
            col=1,
        )
    for name, events in [*s.replicas.items(), (CONTROLLER_ROW, s.controller)]:
        row = rows.index(name)
        by_style: dict[tuple[str, str, str], list[tuple[int, str]]] = {}
        for t, kind, raw in events:
            by_style.setdefault(_lifecycle_style(kind, raw), []).append((t, raw))
        for (marker, color, label), pts in by_style.items():
            fig.add_trace(
                go.Scatter(
                    x=[x(t) for t, _ in pts],
                    y=[row] * len(pts),
                    mode="markers",
                    marker={"color": color, "size": 9, "symbol": _SYMBOLS[marker]},
                    text=[raw for _, raw in pts],
                    hoverinfo="text",
                    **legend(label),
                ),
                row=1,
                col=1,
            )
    fig.update_yaxes(
        tickvals=list(range(len(rows))),
        ticktext=rows,
        range=[len(rows) - 0.5, -0.5],
        row=1,
        col=1,
    )

    colors = _who_colors(s)
    until = _last_reports(s, end)
    for i, lane in enumerate(objects, start=2):
        for cid in lane.ids:
            for key, points in sorted(s.series.get(cid, {}).items()):
                who, what = key.split(" ", 1)
                xs, ys = _lag_points(points, until[who])
                since = what == "since"
                fig.add_trace(
                    go.Scatter(
                        x=[x(t) for t in xs],
                        y=ys,
                        mode="lines",
                        line={
                            "color": _SINCE if since else colors.get(who, "#7f7f7f"),
                            "width": 1.6 if who == "controller" else 1,
                            "dash": "dash" if since else "solid",
                        },
                        hovertemplate=f"{lane.name} ({cid}) {key}: %{{y}} ms behind<extra></extra>",
                        **legend(
                            "controller since"
                            if since
                            else "controller upper"
                            if who == "controller"
                            else f"{who} write frontier"
                        ),
                    ),
                    row=i,
                    col=1,
                )
            batches = s.batches.get(cid, [])
            if batches:
                fig.add_trace(
                    go.Scatter(
                        x=[x(t) for t, *_ in batches],
                        y=[0 if u == _CLOSED else t - u for t, u, *_ in batches],
                        mode="markers",
                        marker={
                            "symbol": "diamond",
                            "size": 6,
                            "color": [_VIOLATION if e else _BATCH for *_, e in batches],
                        },
                        text=[
                            f"{lane.name} ({cid}) batch at {t} ms: upper {u}, {n} updates"
                            + (f", error {e}" if e else "")
                            for t, u, n, e in batches
                        ],
                        hoverinfo="text",
                        **legend("subscribe batch"),
                    ),
                    row=i,
                    col=1,
                )
            peeks = s.peeks.get(cid, [])
            for status in PEEK_STATUSES:
                mine = [p for p in peeks if p.status == status]
                if not mine:
                    continue
                xs2: list[float | None] = []
                ys2: list[int | None] = []
                texts: list[str] = []
                for p in mine:
                    y = _peek_lag(p)
                    done = end if p.done_ms is None else p.done_ms
                    xs2 += [x(p.issued_ms), x(done), None]
                    ys2 += [y, y, None]
                    texts += [p.text, p.text, ""]
                fig.add_trace(
                    go.Scatter(
                        x=xs2,
                        y=ys2,
                        mode="lines+markers",
                        line={"color": _PEEK_COLORS[status], "width": 1.5},
                        marker={"size": 5},
                        text=texts,
                        hoverinfo="text",
                        **legend(f"peek {status}"),
                    ),
                    row=i,
                    col=1,
                )
        lags = [
            y
            for cid in lane.ids
            for key, points in s.series.get(cid, {}).items()
            for y in _lag_points(points, until[key.split(" ", 1)[0]])[1]
        ]
        lags += [
            0 if u == _CLOSED else t - u for cid in lane.ids for t, u, *_ in s.batches.get(cid, [])
        ]
        low, high = _lag_limits(lags, [_peek_lag(p) for c in lane.ids for p in s.peeks.get(c, [])])
        fig.update_yaxes(range=[low, high], side="right", nticks=4, row=i, col=1)
        violated = _lane_violated(s, lane)
        fig.add_annotation(
            xref="paper",
            yref=f"y{i} domain",
            x=-0.01,
            y=0.5,
            xanchor="right",
            showarrow=False,
            align="right",
            text=f"<b>{lane.name}</b><br><span style='font-size:10px'>{lane.label}</span>",
            font={"color": _VIOLATION if violated else "#111111"},
        )
    fig.update_xaxes(range=[x(-0.005 * end), x(1.02 * end)], showgrid=True)
    fig.update_xaxes(title={"text": f"virtual time ({unit})"}, row=1 + len(objects), col=1)
    title = s.title or "simulation run"
    if s.violation is not None:
        at, prop = s.violation
        fig.add_shape(
            type="line",
            xref="x",
            yref="paper",
            x0=x(at),
            x1=x(at),
            y0=0,
            y1=1,
            line={"color": _VIOLATION, "width": 2},
            name="violation",
        )
        fig.add_annotation(
            xref="x",
            yref="paper",
            x=x(at),
            y=1,
            yanchor="bottom",
            xanchor="right" if at > 0.75 * end else "center",
            showarrow=False,
            text=f"<b>{prop}</b> at {at} ms",
            font={"color": _VIOLATION},
            name="violation",
            hovertext=s.statement,
        )
        statement = "<br>".join(textwrap.wrap(s.statement, 140)[:3])
        title += f"<br><span style='color:{_VIOLATION};font-size:13px'>violated: {prop} at {at} ms: {statement}</span>"
    title += (
        "<br><span style='font-size:12px;color:#444'>lanes: how far each frontier is behind "
        "virtual time (ms, right axis); peeks from issue to answer at the lag of the time they "
        "read; subscribe batches at their upper. Hover a mark for its details.</span>"
    )
    top_margin = 135 if s.violation else 105
    plots_px = top_px + lane_px * len(objects)
    fig.update_layout(
        title={"text": title, "x": 0.01, "y": 1 - 12 / (plots_px + top_margin + 200)},
        height=plots_px + top_margin + 200,
        margin={"l": 190, "r": 60, "t": top_margin, "b": 200},
        hovermode="closest",
        plot_bgcolor="#fafafa",
        legend={"orientation": "h", "y": -70 / plots_px, "yanchor": "top"},
    )
    return fig


_SYMBOLS = {"x": "x", "v": "triangle-down", "D": "diamond", "^": "triangle-up", "o": "circle"}


# -- files ---------------------------------------------------------------------------------


def _unknown(path: Path) -> str:
    return f"{path}: unknown picture format {path.suffix!r} (known: {', '.join(FORMATS)})"


def write(s: TraceSummary, path: str | Path) -> Path:
    """Draw ``s`` to ``path``, in the format its suffix names (:data:`FORMATS`)."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in FORMATS:
        raise PlotError(_unknown(p))
    try:
        if suffix == ".html":
            plotly_figure(s).write_html(p, include_plotlyjs=True, full_html=True)
        else:
            matplotlib_figure(s).savefig(p, format=suffix[1:])
    except ImportError as e:
        raise PlotError(
            f"drawing needs matplotlib and plotly: pip install 'tidegate[plot]' ({e})"
        ) from None
    return p


def plot_paths(path: str | Path, out: str | Path | None = None) -> tuple[Path, ...]:
    """Where :func:`plot_file` draws ``path``.

    ``out`` with a picture's suffix (:data:`FORMATS`) is that one file; otherwise it is a path
    prefix (default: the input path without its ``.json``) and the files are
    ``<prefix>.png`` and ``<prefix>.html``, whatever dots the prefix has (``run.shrunk.json``
    draws to ``run.shrunk.png``, never onto ``run.png``)."""
    if out is not None and Path(out).suffix.lower() in (*FORMATS, *_OTHER_PICTURES):
        return (Path(out),)
    p = Path(path)
    prefix = Path(out) if out is not None else p.with_name(p.name.removesuffix(".json"))
    return prefix.with_name(prefix.name + ".png"), prefix.with_name(prefix.name + ".html")


def plot_file(path: str | Path, out: str | Path | Sequence[str | Path] | None = None) -> list[Path]:
    """Re-run a saved trace or plan file (keeping every trace line) and draw it; returns the
    files written (see :func:`plot_paths` for ``out``; a list draws to each).

    The re-run must reproduce the saved digest; a mismatch is noted in the title."""
    from .campaign import verdict
    from .replay import load_replayable
    from .run import run_simulation

    outs: list[str | Path | None] = (
        [out] if out is None or isinstance(out, str | Path) else list(out)
    )
    targets = [t for o in outs for t in plot_paths(path, o)]
    for t in targets:
        if t.suffix.lower() not in FORMATS:
            raise PlotError(_unknown(t))
    rep = load_replayable(Path(path))
    result = run_simulation(rep.options(keep_trace=True))
    title = f"seed {result.seed} ({result.scenario_name})"
    if result.mutant:
        title += f" mutant {result.mutant}"
    v = verdict(result, rep.scenario)
    title += ": " + ("ok" if v is None else f"FAIL {v.property}")
    if rep.expected_digest is not None and rep.expected_digest != result.trace_digest:
        title += " [digest differs from the saved trace]"
    summary = summarise(
        result.trace_lines or [], result.plan.to_json(), title, result.history.to_json()
    )
    if v is not None:
        summary.violation = (int(v.at_ms), str(v.property))
        summary.statement = str(v.message)
    summary.end_ms = max(1, result.stats.virtual_ms, 0 if v is None else int(v.at_ms))
    return [write(summary, t) for t in targets]
