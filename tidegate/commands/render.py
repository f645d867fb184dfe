"""Text output of the CLI through ``rich``: aligned tables, frontiers, durations and a progress bar.

Tables are laid out by ``rich`` (widths measured in terminal cells, so wide
characters align) and come back as plain text without colour or borders:
left-aligned columns two spaces apart, a rule of dashes under the header, no
trailing spaces. That is what a terminal shows and what a script reads, the
same in both. ``tidegate sql`` prints psql's aligned format
(:func:`psql_table`). The progress bar is ``rich.progress``: redrawn in place
on a terminal, printed once, as one plain line, when it finishes otherwise.
"""

from __future__ import annotations

import io
import re
import sys
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from rich import box
from rich.console import Console
from rich.table import Table

from .times import format_time

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

__all__ = [
    "ProgressBar",
    "describe_text",
    "format_bytes",
    "format_error",
    "format_frontier",
    "format_hydration",
    "format_lag",
    "format_policy",
    "format_seconds",
    "format_table",
    "psql_table",
    "replicas_table",
    "status_table",
]

DEFAULT_GRANULARITY_MS = 1000
"""A ``lag`` policy's default granularity (:data:`.ddl.DEFAULT_GRANULARITY_MS`; a test checks)."""

# Box rows: top, head, head rule, mid, row, foot rule, foot, bottom (left, line, divider, right).
_PLAIN = box.Box("    \n    \n -  \n    \n    \n    \n    \n    \n", ascii=True)
_PSQL = box.Box("    \n  | \n -+ \n  | \n  | \n    \n  | \n    \n", ascii=True)
_RULE_GAP = re.compile(r"-(?= )")


def _render(table: Table) -> list[str]:
    out = io.StringIO()
    console = Console(
        file=out,
        width=1_000_000,
        color_system=None,
        force_terminal=False,
        highlight=False,
        emoji=False,
        markup=False,
        legacy_windows=False,
    )
    console.print(table, crop=False)
    return [line.rstrip() for line in out.getvalue().splitlines()]


def _cell(v: Any) -> str:
    return "" if v is None else str(v)


def format_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """Left-aligned columns separated by two spaces, with a rule under the header."""
    table = Table(box=_PLAIN, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0))
    for h in headers:
        table.add_column(str(h), no_wrap=True)
    for r in rows:
        table.add_row(*(_cell(v) for v in r))
    lines = _render(table)
    if len(lines) > 1:  # rich's rule runs under each column's padding too: leave the gap
        lines[1] = _RULE_GAP.sub(" ", lines[1])
    return "\n".join(lines)


def psql_table(
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    types: Sequence[str] | None = None,
) -> str:
    """psql's aligned format: `` a | b``, a ``---+---`` rule, then the rows (NULL shown empty),
    each value as PostgreSQL's text output writes it (``types``: the columns' type names)."""
    table = Table(box=_PSQL, show_edge=False, pad_edge=True, padding=(0, 1))
    for c in columns:
        table.add_column(str(c), no_wrap=True)
    kinds = list(types or ())
    for r in rows:
        table.add_row(*(_psql_cell(v, kinds[k] if k < len(kinds) else "") for k, v in enumerate(r)))
    return "\n".join(_render(table))


def _psql_cell(v: Any, kind: str) -> str:
    """A value as psql shows it: ``t``/``f``, floats as ``float8out`` writes them, timestamps
    with a space and no trailing zeros in the fraction."""
    from tidegate.spec.plan.scalar_eval import float_text

    if v is None:
        return ""
    if v is True or v is False:
        return "t" if v else "f"
    if isinstance(v, float) or (kind == "double precision" and isinstance(v, int)):
        return float_text(float(v))
    if kind == "timestamp" and isinstance(v, str) and "T" in v:
        day, _, clock = v.partition("T")
        whole, dot, frac = clock.partition(".")
        frac = frac.rstrip("0")
        return f"{day} {whole}{dot if frac else ''}{frac}"
    return str(v)


def format_frontier(elements: Sequence[Any]) -> str:
    """``[]`` for the empty (closed) frontier, else each element and its ISO time:
    ``1764312000123 (2025-11-28T06:40:00.123Z)``."""
    if not elements:
        return "[]"
    return ", ".join(format_time(e) for e in elements)


def _elements(elements: Sequence[Any]) -> str:
    return "[" + ", ".join(str(e) for e in elements) + "]"


def format_lag(ms: int | None) -> str:
    if ms is None:
        return "closed"
    if ms < 1000:
        return f"{ms} ms"
    return f"{ms / 1000:.1f} s"


def format_policy(policy: dict[str, Any] | None) -> str:
    """A read policy's JSON (:func:`.ddl.policy_to_json`) in a few characters; ``-`` for none set.

    ``lag 1000ms`` (with ``/500ms`` when its granularity is not the default),
    ``valid-from 42``, ``step-back``, ``hold [5]`` (kind ``none``: the since is
    held where it was), and ``a + b`` for several policies at once.
    """
    if policy is None:
        return "-"
    kind = policy.get("kind")
    if kind == "lag":
        text = f"lag {policy.get('ms')}ms"
        granularity = policy.get("granularity_ms", DEFAULT_GRANULARITY_MS)
        return text if granularity == DEFAULT_GRANULARITY_MS else f"{text}/{granularity}ms"
    if kind == "valid-from":
        if "time" in policy:
            return f"valid-from {policy['time']}"
        return f"valid-from {_elements(policy.get('frontier', []))}"
    if kind == "none":
        return f"hold {_elements(policy.get('since', []))}"
    if kind == "multiple":
        parts = [format_policy(p) for p in policy.get("policies", [])]
        return " + ".join(parts) or "-"
    return str(kind)


def format_bytes(n: int | None) -> str:
    """``4.0 GiB``, ``512 MiB``, ``1000 B``; ``-`` for none."""
    if n is None:
        return "-"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            value = n / size
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n} B"


def format_seconds(s: float) -> str:
    """A duration: ``0.42 s``, ``12.3 s``, ``4 min 5 s``, ``2 h 3 min``."""
    if s < 10:
        return f"{s:.2f} s"
    if s < 60:
        return f"{s:.1f} s"
    if s < 3600:
        return f"{int(s // 60)} min {int(s % 60)} s"
    return f"{int(s // 3600)} h {int(s % 3600 // 60)} min"


def format_hydration(entries: Sequence[dict[str, Any]], kind: str = "") -> str:
    """Per replica: ``r1 0.42 s`` once hydrated (how long it took), ``r1 hydrating`` before;
    ``-`` for a table (always readable) or a collection no replica was sent."""
    if kind == "table" or not entries:
        return "-"
    parts = []
    for h in entries:
        if h.get("hydrated") and h.get("seconds") is not None:
            parts.append(f"{h['replica']} {format_seconds(float(h['seconds']))}")
        elif h.get("hydrated"):
            parts.append(f"{h['replica']} hydrated")
        else:
            parts.append(f"{h['replica']} hydrating")
    return ", ".join(parts)


def _controller_line(status: dict[str, Any]) -> str | None:
    c = status.get("controller")
    if not c:
        return None
    state = c.get("state", status.get("state", "running"))
    started = c.get("started_ms")
    now = status.get("now_ms")
    since = ""
    if isinstance(started, int) and isinstance(now, int):
        since = (
            f", started {format_time(started)}, {format_seconds(max(0, now - started) / 1000)} ago"
        )
    line = f"controller: {state} (pid {c.get('pid')}{since})"
    if state == "starting":
        line += "; collections are listed once the replicas have started"
    return line


def status_table(status: dict[str, Any]) -> str:
    """The ``tidegate status`` text: the controller's state, collections (since, upper, lag, read
    policy, hydration per replica), replicas (status, epoch, address, process, memory limit,
    objects hydrated, last error), the errors collections answered, the metrics addresses
    (the controller's, then each replica's that serves them) and the replicas' Spark UIs."""
    out = []
    head = _controller_line(status)
    if head is not None:
        out.append(head)
    if status.get("state") == "starting":
        replicas = status.get("replicas", [])
        out += ["", replicas_table(replicas) if replicas else "replicas: none started yet"]
        out += _metrics_lines(status)
        return "\n".join(out)
    if head is not None:
        out.append("")
    out.append(
        format_table(
            ["NAME", "ID", "KIND", "SINCE", "UPPER", "LAG", "READ POLICY", "HYDRATION"],
            [
                [
                    c["name"],
                    c["id"],
                    c["kind"],
                    format_frontier(c["since"]),
                    format_frontier(c["upper"]),
                    format_lag(c["lag_ms"]),
                    _policy_cell(c),
                    format_hydration(c.get("hydration", []), c["kind"]),
                ]
                for c in status["collections"]
            ],
        )
    )
    storage = [*status.get("sources", []), *status.get("sinks", [])]
    if storage:
        out.append("")
        out.append(storage_table(storage))
    replicas = status.get("replicas", [])
    if replicas:
        out.append("")
        out.append(replicas_table(replicas))
    errors = [c for c in status["collections"] if c.get("error")]
    if errors:
        out.append("")
        out.append("errors (the last error each collection answered):")
        out += [f"  {c['name']} ({c['id']}): {format_error(c['error'])}" for c in errors]
    out += _metrics_lines(status)
    return "\n".join(out)


def _metrics_lines(status: dict[str, Any]) -> list[str]:
    """Where metrics are served: the controller's line, then one per replica that serves them,
    then each replica's Spark UI (nothing at all if there is none of these)."""
    lines = []
    if status.get("metrics"):
        lines.append(f"metrics: http://{status['metrics']}/metrics")
    for r in status.get("replicas", []):
        if r.get("metrics"):
            lines.append(f"metrics of replica {r['name']}: http://{r['metrics']}/metrics")
    for r in status.get("replicas", []):
        if r.get("spark_ui"):
            lines.append(f"Spark UI of replica {r['name']}: {r['spark_ui']}")
    return ["", *lines] if lines else []


def format_statistics(stats: dict[str, Any] | None, kind: str) -> str:
    """The counters that matter most, in a cell: what came in and what was committed."""
    if not stats:
        return "-"
    if kind == "source":
        parts = [f"{stats.get('updates_committed', 0)} committed"]
        if stats.get("offset_committed") is not None:
            parts.append(f"offset {stats['offset_committed']}")
            known = stats.get("offset_known")
            if known is not None and known > stats["offset_committed"]:
                parts.append(f"lag {known - stats['offset_committed']}")
        return ", ".join(parts)
    return (
        f"{stats.get('updates_committed', 0)} committed, "
        f"{format_bytes(stats.get('bytes_committed'))}"
    )


def storage_table(rows: Sequence[dict[str, Any]]) -> str:
    """Sources and sinks: name, kind, type, status, what a sink reads, upper, lag, statistics,
    error (``tidegate status``)."""

    def status_cell(r: dict[str, Any]) -> str:
        return str(r.get("status") or "unknown")

    def error_cell(r: dict[str, Any]) -> str:
        if not r.get("error"):
            return "-"
        hint = f" (hint: {r['hint']})" if r.get("hint") else ""
        return f"{r['error']}{hint}"

    return format_table(
        [
            "SOURCE/SINK",
            "ID",
            "KIND",
            "TYPE",
            "STATUS",
            "READS",
            "UPPER",
            "LAG",
            "STATISTICS",
            "ERROR",
        ],
        [
            [
                r["name"],
                r["id"],
                r["kind"],
                r["type"],
                status_cell(r),
                (r.get("reads") or {}).get("name", "-"),
                format_frontier(r["upper"]),
                format_lag(r.get("lag_ms")),
                format_statistics(r.get("statistics"), r["kind"]),
                error_cell(r),
            ]
            for r in rows
        ],
    )


def _policy_cell(c: dict[str, Any]) -> str:
    """The read policy set, else the one in effect marked ``(default)``, else ``-``."""
    if c.get("read_policy") is None and c.get("read_policy_effective") is not None:
        return f"{format_policy(c['read_policy_effective'])} (default)"
    return format_policy(c.get("read_policy"))


def format_error(e: dict[str, Any]) -> str:
    """A collection's last error (:func:`.overview.error_json`) in a line."""
    how = "a peek answered it" if e.get("source") == "peek" else str(e.get("source"))
    if e.get("at") is not None:
        how += f" at {format_time(e['at'])}"
    seen = f"; seen {e['seen_iso']}" if e.get("seen_iso") else ""
    return f"{e.get('message')} [{how}{seen}]"


def _runs(r: dict[str, Any]) -> str:
    if not r.get("managed"):
        return "unmanaged"
    if r.get("executor") == "spark":
        return f"spark {r.get('spark_master')}"
    return str(r.get("executor") or "-")


def replicas_table(replicas: Sequence[dict[str, Any]], *, detail: bool = False) -> str:
    """Replicas: name, status, epoch, address, process (pid, restarts), memory limit, objects
    hydrated, last error (``tidegate status``); with ``detail`` (``tidegate replica list``)
    also what runs it (``spark local[1]``, ``python``, ``unmanaged``) and where it serves
    metrics."""

    def dash(v: Any) -> Any:
        return "-" if v is None or v == "" else v

    def hydrated(r: dict[str, Any]) -> str:
        if r.get("objects") is None:
            return "-"
        return f"{r.get('objects_hydrated')}/{r.get('objects')}"

    headers = ["NAME", "STATUS", "CLUSTER", "SIZE", "EPOCH", "ADDRESS", "PID", "RESTARTS"]
    headers += ["MEMORY LIMIT"]
    headers += ["HYDRATED", *(["RUNS", "METRICS"] if detail else []), "LAST ERROR"]
    rows = [
        [
            r["name"],
            r.get("status"),
            dash(r.get("cluster")),
            dash(r.get("size")),
            dash(r.get("epoch")),
            dash(r.get("address")),
            dash(r.get("pid")),
            dash(r.get("restarts")),
            format_bytes(r.get("memory_limit")),
            hydrated(r),
            *([_runs(r), dash(r.get("metrics"))] if detail else []),
            dash(r.get("last_error")),
        ]
        for r in replicas
    ]
    return format_table(headers, rows)


def describe_text(d: dict[str, Any]) -> str:
    """``tidegate describe``: an object's columns, keys, plan, dependencies, read policy, frontiers,
    hydration and last error, as labelled lines."""
    lines = [f"{d['kind']} {d['name']} ({d['id']})"]
    cols = format_table(
        ["COLUMN", "TYPE", "NULLABLE"],
        [[c["name"], c["type"], "yes" if c.get("nullable", True) else "no"] for c in d["columns"]],
    )
    lines += ["", *cols.splitlines()]
    if d.get("keys") is not None:
        on = d.get("on")
        of = f" of {on['name']} ({on['id']})" if on else ""
        lines += ["", f"keys: {', '.join(d['keys'])}{of}"]

    def names(items: Sequence[dict[str, Any]]) -> str:
        return ", ".join(f"{x['name']} ({x['id']}, {x['kind']})" for x in items) or "-"

    lines += ["", f"reads: {names(d.get('dependencies', []))}"]
    lines.append(f"read by: {names(d.get('dependents', []))}")
    if "read_policy_effective" in d:
        policy = format_policy(d["read_policy_effective"])
        lines.append(f"read policy: {policy}{' (default)' if d.get('read_policy_default') else ''}")
    if "since" in d:
        lines.append(f"since: {format_frontier(d['since'])}")
        lines.append(f"upper: {format_frontier(d['upper'])}")
        lines.append(f"lag: {format_lag(d.get('lag_ms'))}")
        lines.append(f"hydration: {format_hydration(d.get('hydration', []), d['kind'])}")
    if d.get("error"):
        lines.append(f"error: {format_error(d['error'])}")
    storage = d.get("storage")
    if storage:
        lines += ["", f"connection: {storage['connection']}"]
        lines.append(f"status: {storage.get('status') or 'unknown'}")
        if storage.get("error"):
            lines.append(f"error: {storage['error']}")
        if storage.get("hint"):
            lines.append(f"hint: {storage['hint']}")
        if storage.get("progress"):
            lines.append(f"progress: {storage['progress']['name']} ({storage['progress']['id']})")
        stats = storage.get("statistics") or {}
        if stats:
            lines.append(
                "statistics: " + ", ".join(f"{k} {v}" for k, v in stats.items() if v is not None)
            )
    if d.get("definition"):
        lines += ["", "definition:", *("  " + x for x in d["definition"].splitlines())]
    if d.get("plan"):
        lines += ["", "plan:", *("  " + x for x in d["plan"].splitlines())]
    return "\n".join(lines)


class ProgressBar:
    """A progress bar (``rich.progress``): redrawn in place on a terminal; one line at the end otherwise.

    Not on a terminal, nothing is written until :meth:`finish`, which writes
    ``LABEL [#####.....] DONE/TOTAL PCT% NOTE`` once.
    """

    def __init__(self, total: int, label: str = "", width: int = 30, out: TextIO | None = None):
        self.total = max(1, total)
        self.label = label
        self.width = width
        self.out = out or sys.stdout
        self.done = 0
        self.tty = self.out.isatty()
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        if self.tty:
            self._start()

    def _start(self) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TaskProgressColumn,
            TextColumn,
            TimeElapsedColumn,
        )

        console = Console(file=self.out, highlight=False, markup=False, emoji=False)
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(bar_width=self.width),
            MofNCompleteColumn(),
            TaskProgressColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[note]}"),
            console=console,
        )
        self._task = self._progress.add_task(self.label, total=self.total, note="")
        self._progress.start()

    def line(self, note: str = "") -> str:
        """The plain line: ``LABEL [#####.....] DONE/TOTAL PCT% NOTE``."""
        filled = self.width * self.done // self.total
        bar = "#" * filled + "." * (self.width - filled)
        pct = 100 * self.done // self.total
        return f"{self.label} [{bar}] {self.done}/{self.total} {pct:3d}% {note}".rstrip()

    def advance(self, n: int = 1, note: str = "") -> None:
        self.done = min(self.total, self.done + n)
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, completed=self.done, note=note)

    def finish(self, note: str = "") -> None:
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, completed=self.done, note=note)
            self._progress.stop()
            self._progress = None
            return
        self.out.write(self.line(note) + "\n")
        self.out.flush()
