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

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

__all__ = [
    "ProgressBar",
    "format_frontier",
    "format_lag",
    "format_policy",
    "format_table",
    "psql_table",
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


def psql_table(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """psql's aligned format: `` a | b``, a ``---+---`` rule, then the rows (NULL shown empty)."""
    table = Table(box=_PSQL, show_edge=False, pad_edge=True, padding=(0, 1))
    for c in columns:
        table.add_column(str(c), no_wrap=True)
    for r in rows:
        table.add_row(
            *("" if v is None else "t" if v is True else "f" if v is False else str(v) for v in r)
        )
    return "\n".join(_render(table))


def format_frontier(elements: Sequence[Any]) -> str:
    """``[]`` for the empty (closed) frontier, else the elements."""
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
        return f"valid-from {format_frontier(policy.get('frontier', []))}"
    if kind == "none":
        return f"hold {format_frontier(policy.get('since', []))}"
    if kind == "multiple":
        parts = [format_policy(p) for p in policy.get("policies", [])]
        return " + ".join(parts) or "-"
    return str(kind)


def status_table(status: dict[str, Any]) -> str:
    """The ``tidegate status`` text: collections (since, upper, lag, read policy), then replicas.

    A last line gives the metrics address when the controller serves metrics.
    """
    out = [
        format_table(
            ["NAME", "ID", "KIND", "SINCE", "UPPER", "LAG", "READ POLICY"],
            [
                [
                    c["name"],
                    c["id"],
                    c["kind"],
                    format_frontier(c["since"]),
                    format_frontier(c["upper"]),
                    format_lag(c["lag_ms"]),
                    format_policy(c.get("read_policy")),
                ]
                for c in status["collections"]
            ],
        )
    ]
    replicas = status.get("replicas", [])
    if replicas:
        keys = list(dict.fromkeys(k for r in replicas for k in r))
        out.append("")
        out.append(
            format_table([k.upper() for k in keys], [[r.get(k) for k in keys] for r in replicas])
        )
    metrics = status.get("metrics")
    if metrics:
        out.append("")
        out.append(f"metrics: http://{metrics}/metrics")
    return "\n".join(out)


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
