"""``tidegate sim plot``: a picture of a run, as a PNG and as a standalone HTML file.

One lane per replica (its lifecycle -- starts, crashes, connections made and
lost -- as ticks, the fault plan's faults as bars) and one lane per collection (frontiers over
virtual time as step lines -- the controller's and each replica's -- with
peeks as marks at their read time). The picture is drawn once on a small
vector :class:`Canvas` that renders both to SVG (inlined in the HTML, with
hover titles) and to PNG bytes through a built-in rasteriser (``zlib`` only,
no plotting dependency).

Everything drawn comes from the run's trace lines: the controller's uppers
and sinces (``upper``, ``storage_upper``, ``since`` events), each replica's
reported write frontiers (its ``resp`` lines), and peeks (``peek``,
``peek_refused``, ``peek_result``); :func:`plot_file` re-runs a saved trace
only to get every line back, without instrumenting the run.
"""

from __future__ import annotations

import itertools
import json
import re
import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

__all__ = ["Canvas", "TraceSummary", "plot_file", "plot_paths", "render", "summarise"]

Color = tuple[int, int, int]

_FONT_ROWS = {
    "0": "01110 10001 10011 10101 11001 10001 01110",
    "1": "00100 01100 00100 00100 00100 00100 01110",
    "2": "01110 10001 00001 00010 00100 01000 11111",
    "3": "11111 00010 00100 00010 00001 10001 01110",
    "4": "00010 00110 01010 10010 11111 00010 00010",
    "5": "11111 10000 11110 00001 00001 10001 01110",
    "6": "00110 01000 10000 11110 10001 10001 01110",
    "7": "11111 00001 00010 00100 01000 01000 01000",
    "8": "01110 10001 10001 01110 10001 10001 01110",
    "9": "01110 10001 10001 01111 00001 00010 01100",
    "a": "00000 00000 01110 00001 01111 10001 01111",
    "b": "10000 10000 10110 11001 10001 10001 11110",
    "c": "00000 00000 01110 10000 10000 10001 01110",
    "d": "00001 00001 01101 10011 10001 10001 01111",
    "e": "00000 00000 01110 10001 11111 10000 01110",
    "f": "00110 01001 01000 11100 01000 01000 01000",
    "g": "00000 01111 10001 10001 01111 00001 01110",
    "h": "10000 10000 10110 11001 10001 10001 10001",
    "i": "00100 00000 01100 00100 00100 00100 01110",
    "j": "00010 00000 00110 00010 00010 10010 01100",
    "k": "10000 10000 10010 10100 11000 10100 10010",
    "l": "01100 00100 00100 00100 00100 00100 01110",
    "m": "00000 00000 11010 10101 10101 10001 10001",
    "n": "00000 00000 10110 11001 10001 10001 10001",
    "o": "00000 00000 01110 10001 10001 10001 01110",
    "p": "00000 00000 11110 10001 11110 10000 10000",
    "q": "00000 00000 01101 10011 01111 00001 00001",
    "r": "00000 00000 10110 11001 10000 10000 10000",
    "s": "00000 00000 01110 10000 01110 00001 11110",
    "t": "01000 01000 11100 01000 01000 01001 00110",
    "u": "00000 00000 10001 10001 10001 10011 01101",
    "v": "00000 00000 10001 10001 10001 01010 00100",
    "w": "00000 00000 10001 10001 10101 10101 01010",
    "x": "00000 00000 10001 01010 00100 01010 10001",
    "y": "00000 00000 10001 10001 01111 00001 01110",
    "z": "00000 00000 11111 00010 00100 01000 11111",
    "-": "00000 00000 00000 11111 00000 00000 00000",
    "_": "00000 00000 00000 00000 00000 00000 11111",
    ".": "00000 00000 00000 00000 00000 01100 01100",
    ",": "00000 00000 00000 00000 01100 00100 01000",
    ":": "00000 01100 01100 00000 01100 01100 00000",
    "/": "00000 00001 00010 00100 01000 10000 00000",
    "(": "00010 00100 01000 01000 01000 00100 00010",
    ")": "01000 00100 00010 00010 00010 00100 01000",
    "[": "01110 01000 01000 01000 01000 01000 01110",
    "]": "01110 00010 00010 00010 00010 00010 01110",
    "=": "00000 00000 11111 00000 11111 00000 00000",
    "+": "00000 00100 00100 11111 00100 00100 00000",
    "#": "01010 01010 11111 01010 11111 01010 01010",
    "%": "11000 11001 00010 00100 01000 10011 00011",
    ">": "01000 00100 00010 00001 00010 00100 01000",
    "<": "00010 00100 01000 10000 01000 00100 00010",
    "*": "00000 00100 10101 01110 10101 00100 00000",
    "'": "01100 00100 01000 00000 00000 00000 00000",
    "?": "01110 10001 00001 00010 00100 00000 00100",
    "!": "00100 00100 00100 00100 00100 00000 00100",
    " ": "00000 00000 00000 00000 00000 00000 00000",
}
_FONT = {ch: [row for row in rows.split()] for ch, rows in _FONT_ROWS.items()}
GLYPH_W, GLYPH_H = 6, 8
"""Advance and line height of the font at scale 1 (5x7 glyphs plus spacing)."""


@dataclass
class _Line:
    x1: float
    y1: float
    x2: float
    y2: float
    color: Color
    width: int


@dataclass
class _Rect:
    x: float
    y: float
    w: float
    h: float
    color: Color
    title: str


@dataclass
class _Circle:
    x: float
    y: float
    r: float
    color: Color
    title: str


@dataclass
class _Text:
    x: float
    y: float
    text: str
    color: Color
    scale: int


@dataclass
class Canvas:
    """Shapes in pixel coordinates (origin top left), drawn in the order they were added."""

    width: int
    height: int
    background: Color = (255, 255, 255)
    shapes: list[_Line | _Rect | _Circle | _Text] = field(default_factory=list)

    def line(
        self, x1: float, y1: float, x2: float, y2: float, color: Color, width: int = 1
    ) -> None:
        self.shapes.append(_Line(x1, y1, x2, y2, color, width))

    def rect(self, x: float, y: float, w: float, h: float, color: Color, title: str = "") -> None:
        self.shapes.append(_Rect(x, y, w, h, color, title))

    def circle(self, x: float, y: float, r: float, color: Color, title: str = "") -> None:
        self.shapes.append(_Circle(x, y, r, color, title))

    def text(self, x: float, y: float, text: str, color: Color = (0, 0, 0), scale: int = 1) -> None:
        """Text with its top-left corner at ``(x, y)``."""
        self.shapes.append(_Text(x, y, text, color, scale))

    # -- SVG ---------------------------------------------------------------------------
    def svg(self) -> str:
        def rgb(c: Color) -> str:
            return f"rgb({c[0]},{c[1]},{c[2]})"

        out = [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width}" height="{self.height}" '
            f'viewBox="0 0 {self.width} {self.height}" font-family="monospace">',
            f'<rect width="{self.width}" height="{self.height}" fill="{rgb(self.background)}"/>',
        ]
        for s in self.shapes:
            if isinstance(s, _Line):
                out.append(
                    f'<line x1="{s.x1:.1f}" y1="{s.y1:.1f}" x2="{s.x2:.1f}" y2="{s.y2:.1f}" '
                    f'stroke="{rgb(s.color)}" stroke-width="{s.width}"/>'
                )
            elif isinstance(s, _Rect):
                title = f"<title>{escape(s.title)}</title>" if s.title else ""
                out.append(
                    f'<rect x="{s.x:.1f}" y="{s.y:.1f}" width="{max(s.w, 1):.1f}" '
                    f'height="{s.h:.1f}" fill="{rgb(s.color)}">{title}</rect>'
                )
            elif isinstance(s, _Circle):
                title = f"<title>{escape(s.title)}</title>" if s.title else ""
                out.append(
                    f'<circle cx="{s.x:.1f}" cy="{s.y:.1f}" r="{s.r:.1f}" '
                    f'fill="{rgb(s.color)}">{title}</circle>'
                )
            else:
                size = 10 * s.scale
                out.append(
                    f'<text x="{s.x:.1f}" y="{s.y + 7 * s.scale:.1f}" font-size="{size}" '
                    f'fill="{rgb(s.color)}">{escape(s.text)}</text>'
                )
        out.append("</svg>")
        return "\n".join(out)

    # -- PNG ---------------------------------------------------------------------------
    def png(self) -> bytes:
        w, h = self.width, self.height
        bg = bytes(self.background)
        pixels = [bytearray(bg * w) for _ in range(h)]

        def put(x: int, y: int, c: Color) -> None:
            if 0 <= x < w and 0 <= y < h:
                i = 3 * x
                pixels[y][i : i + 3] = bytes(c)

        def fill(x0: int, y0: int, x1: int, y1: int, c: Color) -> None:
            x0, x1 = max(0, x0), min(w, x1)
            if x1 <= x0:
                return
            run = bytes(c) * (x1 - x0)
            for y in range(max(0, y0), min(h, y1)):
                pixels[y][3 * x0 : 3 * x1] = run

        for s in self.shapes:
            if isinstance(s, _Rect):
                fill(round(s.x), round(s.y), round(s.x + max(s.w, 1)), round(s.y + s.h), s.color)
            elif isinstance(s, _Line):
                half = max(0, s.width - 1) // 2
                x0, y0, x1, y1 = round(s.x1), round(s.y1), round(s.x2), round(s.y2)
                if y0 == y1 or x0 == x1:  # axis-aligned: a rectangle
                    fill(
                        min(x0, x1) - half,
                        min(y0, y1) - half,
                        max(x0, x1) + half + 1,
                        max(y0, y1) + half + 1,
                        s.color,
                    )
                    continue
                steps = max(abs(x1 - x0), abs(y1 - y0))
                for k in range(steps + 1):
                    x = x0 + (x1 - x0) * k // steps
                    y = y0 + (y1 - y0) * k // steps
                    fill(x - half, y - half, x + half + 1, y + half + 1, s.color)
            elif isinstance(s, _Circle):
                cx, cy, r = s.x, s.y, s.r
                for y in range(int(cy - r), int(cy + r) + 1):
                    dy = y - cy
                    if dy * dy > r * r:
                        continue
                    dx = int((r * r - dy * dy) ** 0.5)
                    fill(round(cx - dx), y, round(cx + dx) + 1, y + 1, s.color)
            else:
                x = round(s.x)
                for ch in s.text:
                    glyph = _FONT.get(ch.lower(), _FONT["?"])
                    for gy, row in enumerate(glyph):
                        for gx, bit in enumerate(row):
                            if bit == "1":
                                px, py = x + gx * s.scale, round(s.y) + gy * s.scale
                                fill(px, py, px + s.scale, py + s.scale, s.color)
                    x += GLYPH_W * s.scale
        raw = b"".join(b"\x00" + bytes(row) for row in pixels)

        def chunk(kind: bytes, data: bytes) -> bytes:
            body = kind + data
            return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

        header = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
        return (
            b"\x89PNG\r\n\x1a\n"
            + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(raw, 6))
            + chunk(b"IEND", b"")
        )


# -- what a trace says ---------------------------------------------------------------------

_FRONTIER_FIELDS = ("upper", "write", "write_frontier", "frontier", "since")
_TIME_FIELDS = ("timestamp", "time", "ts", "as_of_time")
_INT = re.compile(r"-?\d+")
_CLOSED = -1
"""Series value for the empty frontier ``[]`` (drawn at the top of the lane)."""


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


@dataclass
class TraceSummary:
    """The parts of a trace the picture shows (all times in virtual ms)."""

    title: str = ""
    end_ms: int = 0
    replicas: dict[str, list[tuple[int, str, str]]] = field(default_factory=dict)
    faults: list[tuple[str, int, int, str]] = field(default_factory=list)
    series: dict[str, dict[str, list[tuple[int, int]]]] = field(default_factory=dict)
    peeks: dict[str, list[tuple[int, int, str, str]]] = field(default_factory=dict)
    violation: tuple[int, str] | None = None


def _peek_status(kind: str, ev: dict[str, Any]) -> str:
    text = (kind + " " + str(ev.get("result", "")) + str(ev.get("status", ""))).lower()
    if "cancel" in text:
        return "canceled"
    if "error" in text or "refus" in text or "invalid" in text:
        return "error"
    if any(w in text for w in ("rows", "result", "answer", "response", "success")):
        return "answered"
    return "issued"


_RESULT_STATUS = {"PeekRows": "answered", "PeekError": "error", "PeekCanceled": "canceled"}
_REPORT = re.compile(r"^(Frontiers|SubscribeResponse) (\S+) ")
_WRITE = re.compile(r"\bw=(\[[^\]]*\])")
_BATCH_UPPER = re.compile(r"\.\.(\[[^\]]*\])")


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


def summarise(
    lines: Iterable[str], plan: dict[str, Any] | None = None, title: str = ""
) -> TraceSummary:
    """Read trace lines (JSON objects with ``t`` and ``k``) and a fault plan into a summary."""
    s = TraceSummary(title=title)
    issued: dict[str, tuple[str, int]] = {}  # peek uuid -> (collection, read time)
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
        if "violation" in kind:
            s.violation = (t, str(ev.get("property", kind)))
        if kind == "resp":
            _replica_report(s, t, ev)
            continue
        if kind == "peek" and isinstance(ev.get("uuid"), str) and isinstance(ev.get("time"), int):
            issued[ev["uuid"]] = (str(cid), ev["time"])
        if kind == "peek_result" and ev.get("uuid") in issued:
            pid, read_at = issued[ev["uuid"]]
            status = _RESULT_STATUS.get(str(ev.get("result")), "canceled")
            s.peeks.setdefault(pid, []).append((t, read_at, status, raw))
            continue
        if "peek" in kind and isinstance(cid, str):
            when = next((ev[f] for f in _TIME_FIELDS if isinstance(ev.get(f), int)), None)
            if when is not None:
                s.peeks.setdefault(cid, []).append((t, when, _peek_status(kind, ev), raw))
                continue
        if isinstance(cid, str):
            for name in _FRONTIER_FIELDS:
                if name not in ev:
                    continue
                value = _frontier(ev[name])
                if value is None:
                    continue
                who = str(replica) if replica is not None else "controller"
                key = f"{who} {name}"
                s.series.setdefault(cid, {}).setdefault(key, []).append((t, value))
            if cid not in s.series and replica is None:
                s.series.setdefault(cid, {})
        if isinstance(replica, str):
            s.replicas.setdefault(replica, []).append((t, kind, raw))
    if plan:
        for f in plan.get("faults", []):
            start = int(f.get("at_ms", 0))
            end = start + int(f.get("duration_ms", 0))
            s.faults.append((str(f.get("target", "")), start, end, str(f.get("kind", "fault"))))
            s.end_ms = max(s.end_ms, end)
            if f.get("target"):
                s.replicas.setdefault(str(f["target"]), [])
    return s


# -- the picture ---------------------------------------------------------------------------

_PALETTE: list[Color] = [
    (31, 119, 180),
    (255, 127, 14),
    (44, 160, 44),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (23, 190, 207),
    (188, 189, 34),
]
_FAULT_COLORS: dict[str, Color] = {
    "crash_replica": (214, 39, 40),
    "cut_connection": (255, 152, 150),
    "slow_replica": (255, 187, 120),
    "replace_replica": (197, 27, 138),
    "restart_controller": (127, 127, 127),
    "delay_storage_write": (188, 189, 34),
}
_PEEK_COLORS: dict[str, Color] = {
    "answered": (44, 160, 44),
    "error": (214, 39, 40),
    "canceled": (150, 150, 150),
    "issued": (31, 119, 180),
}
_GREY: Color = (225, 225, 225)
_SINCE: Color = (170, 170, 170)
_OTHER: Color = (170, 170, 171)
_DARK: Color = (60, 60, 60)


def _lifecycle_color(kind: str) -> Color:
    k = kind.lower()
    if any(w in k for w in ("crash", "lost", "kill", "fault")):
        return (214, 39, 40)
    if any(w in k for w in ("start", "connected", "reconcil", "restor")):
        return (44, 160, 44)
    if "disconnect" in k or "drop" in k:
        return (197, 27, 138)
    return _OTHER


def render(s: TraceSummary, width: int = 1400) -> Canvas:
    """Lay the summary out on a canvas (see the module docstring)."""
    left, right, top = 190, 20, 56
    replica_h, lane_h, gap = 34, 96, 8
    replicas = sorted(s.replicas)
    globals_ = [f for f in s.faults if not f[0]]
    collections = sorted(c for c in set(s.series) | set(s.peeks))
    lanes_h = (len(replicas) + (1 if globals_ else 0)) * (replica_h + gap)
    height = top + lanes_h + len(collections) * (lane_h + gap) + 80
    c = Canvas(width, height)
    span = max(1, s.end_ms)
    plot_w = width - left - right

    def x_of(t: int) -> float:
        return left + plot_w * t / span

    c.text(10, 10, s.title or "simulation trace", _DARK, 2)
    if s.violation is not None:
        vt, prop = s.violation
        c.text(10, 32, f"violation: {prop} at {vt}ms", (214, 39, 40), 1)
    # time grid
    step = _nice_step(span)
    bottom = height - 60
    t = 0
    while t <= span:
        x = x_of(t)
        c.line(x, top - 4, x, bottom, _GREY)
        c.text(x - 10, bottom + 4, f"{t / 1000:g}s", _DARK)
        t += step
    c.text(left, bottom + 18, "virtual time", _DARK)
    if s.violation is not None:
        vx = x_of(s.violation[0])
        c.line(vx, top - 8, vx, bottom, (214, 39, 40), 2)

    y = top
    for name in replicas:
        c.rect(left, y, plot_w, replica_h, (246, 246, 246))
        c.text(10, y + replica_h / 2 - 7, f"replica {name}", _DARK, 2)
        for target, start, end, kind in s.faults:
            if target == name and start <= s.end_ms:
                end = min(end, s.end_ms)
                color = _FAULT_COLORS.get(kind, (214, 39, 40))
                c.rect(
                    x_of(start),
                    y + 4,
                    max(2.0, x_of(end) - x_of(start)),
                    replica_h - 8,
                    color,
                    f"{kind} {name} {start}..{end}ms",
                )
                c.text(
                    x_of(start) + 2,
                    y + 2,
                    kind.replace("_replica", "").replace("_connection", ""),
                    _DARK,
                )
        for t_ev, kind, raw in s.replicas[name]:
            color = _lifecycle_color(kind)
            if color != _OTHER:  # routine traffic would hide the lifecycle
                c.rect(x_of(t_ev) - 1, y + replica_h - 12, 3, 10, color, raw)
        y += replica_h + gap
    if globals_:
        c.rect(left, y, plot_w, replica_h, (246, 246, 246))
        c.text(10, y + replica_h / 2 - 7, "controller/storage", _DARK, 1)
        for _target, start, end, kind in globals_:
            if start > s.end_ms:
                continue
            end = min(end, s.end_ms)
            color = _FAULT_COLORS.get(kind, (127, 127, 127))
            c.rect(
                x_of(start),
                y + 4,
                max(2.0, x_of(end) - x_of(start)),
                replica_h - 8,
                color,
                f"{kind} {start}..{end}ms",
            )
            c.text(x_of(start) + 2, y + 2, kind, _DARK)
        y += replica_h + gap

    colors: dict[str, Color] = {"controller": (0, 0, 0)}
    for i, name in enumerate(replicas):
        colors[name] = _PALETTE[i % len(_PALETTE)]
    for cid in collections:
        series = s.series.get(cid, {})
        peeks = s.peeks.get(cid, [])
        values = [v for pts in series.values() for _, v in pts if v != _CLOSED]
        values += [p[1] for p in peeks]
        lo, hi = (min(values), max(values)) if values else (0, 1)
        hi = max(hi, lo + 1)
        c.rect(left, y, plot_w, lane_h, (250, 250, 250))
        c.text(10, y + 6, f"collection {cid}", _DARK, 2)
        c.text(10, y + 26, f"times {lo}..{hi}", _DARK)

        def y_of(v: int, lane_top: float = y, lo: int = lo, hi: int = hi) -> float:
            if v == _CLOSED:
                return lane_top + 2
            return lane_top + lane_h - 6 - (lane_h - 12) * (v - lo) / (hi - lo)

        for key in sorted(series):
            who = key.split(" ", 1)[0]
            color = colors.get(who, _PALETTE[len(colors) % len(_PALETTE)])
            if key.endswith(" since"):
                color = _SINCE
            width_px = 2 if who == "controller" else 1
            pts = series[key]
            for (t0, v0), (t1, v1) in itertools.pairwise(pts):
                c.line(x_of(t0), y_of(v0), x_of(t1), y_of(v0), color, width_px)
                c.line(x_of(t1), y_of(v0), x_of(t1), y_of(v1), color, width_px)
            if pts:
                t_last, v_last = pts[-1]
                c.line(x_of(t_last), y_of(v_last), x_of(s.end_ms), y_of(v_last), color, width_px)
        for t_ev, when, status, raw in peeks:
            c.circle(x_of(t_ev), y_of(when), 3, _PEEK_COLORS.get(status, _DARK), raw)
        y += lane_h + gap

    # legend
    lx, ly = left, height - 30
    items: list[tuple[str, Color]] = [(f"{k} upper", v) for k, v in colors.items()]
    items.insert(1, ("controller since", _SINCE))
    items += [(f"peek {k}", v) for k, v in _PEEK_COLORS.items()]
    for label, color in items:
        c.rect(lx, ly + 2, 10, 10, color)
        c.text(lx + 14, ly + 3, label, _DARK)
        lx += 14 + 6 * len(label) + 16
    return c


def _nice_step(span: int) -> int:
    for step in (100, 200, 500, 1000, 2000, 5000, 10_000, 20_000, 50_000, 100_000):
        if span / step <= 12:
            return step
    return max(1, span // 10)


def _html(canvas: Canvas, title: str) -> str:
    return (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title>"
        "<style>body{font-family:monospace;margin:16px}</style></head><body>\n"
        f"<h3>{escape(title)}</h3>\n<p>Hover a mark for its trace event.</p>\n"
        f"{canvas.svg()}\n</body></html>\n"
    )


def plot_file(path: str | Path, out: str | Path | None = None) -> tuple[Path, Path]:
    """Re-run a saved trace or plan file (keeping every trace line) and draw it; returns the PNG and HTML paths.

    ``out`` is a path prefix (default: the input path without its ``.json``): the
    files are ``<prefix>.png`` and ``<prefix>.html``, whatever dots the prefix has
    (``run.shrunk.json`` draws to ``run.shrunk.png``, never onto ``run.png``). The
    re-run must reproduce the saved digest; a mismatch is noted in the title.
    """
    from .replay import load_replayable
    from .run import run_simulation

    p = Path(path)
    rep = load_replayable(p)
    result = run_simulation(rep.options(keep_trace=True))
    title = f"seed {result.seed} ({result.scenario_name})"
    if result.mutant:
        title += f" mutant {result.mutant}"
    from .campaign import verdict

    v = verdict(result, rep.scenario)
    title += ": " + ("ok" if v is None else str(v.property))
    if rep.expected_digest is not None and rep.expected_digest != result.trace_digest:
        title += " [digest differs from the saved trace]"
    summary = summarise(result.trace_lines or [], result.plan.to_json(), title)
    if v is not None:
        summary.violation = (int(v.at_ms), str(v.property))
    summary.end_ms = max(1, result.stats.virtual_ms)
    canvas = render(summary)
    png, html = plot_paths(p, out)
    png.write_bytes(canvas.png())
    html.write_text(_html(canvas, title))
    return png, html


def plot_paths(path: str | Path, out: str | Path | None = None) -> tuple[Path, Path]:
    """Where :func:`plot_file` draws ``path``: ``<prefix>.png`` and ``<prefix>.html``."""
    p = Path(path)
    prefix = Path(out) if out is not None else p.with_name(p.name.removesuffix(".json"))
    return prefix.with_name(prefix.name + ".png"), prefix.with_name(prefix.name + ".html")


def _scenario_name(data: dict[str, Any]) -> str:
    sc = data.get("scenario")
    if isinstance(sc, dict):
        return str(sc.get("name", "?"))
    return str(sc or "?")
