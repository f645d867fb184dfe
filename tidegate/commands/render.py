"""Plain-text output of the CLI: aligned tables, frontiers, durations and a progress bar."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

from .ddl import DEFAULT_GRANULARITY_MS

__all__ = [
    "ProgressBar",
    "format_frontier",
    "format_lag",
    "format_policy",
    "format_table",
    "status_table",
]


def format_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """Left-aligned columns separated by two spaces, with a rule under the header."""
    cells = [[str(h) for h in headers]] + [["" if v is None else str(v) for v in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


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
    """A one-line progress bar, redrawn in place on a terminal and printed at the end otherwise."""

    def __init__(self, total: int, label: str = "", width: int = 30, out: TextIO | None = None):
        self.total = max(1, total)
        self.label = label
        self.width = width
        self.out = out or sys.stdout
        self.done = 0
        self.tty = self.out.isatty()

    def line(self, note: str = "") -> str:
        filled = self.width * self.done // self.total
        bar = "#" * filled + "." * (self.width - filled)
        pct = 100 * self.done // self.total
        return f"{self.label} [{bar}] {self.done}/{self.total} {pct:3d}% {note}".rstrip()

    def advance(self, n: int = 1, note: str = "") -> None:
        self.done = min(self.total, self.done + n)
        if self.tty:
            self.out.write("\r" + self.line(note) + "\x1b[K")
            self.out.flush()

    def finish(self, note: str = "") -> None:
        if self.tty:
            self.out.write("\r" + self.line(note) + "\x1b[K\n")
        else:
            self.out.write(self.line(note) + "\n")
        self.out.flush()
