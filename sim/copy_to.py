"""Copy-to, judged: the files a copy-to wrote hold the reference's contents at one valid time.

A client's ``copy_to`` action (``Environment.copy_to``) writes a collection's
contents at a time as Parquet files under a ``mem://`` URL of its own (the
blob store of ``mem://`` URLs is process-local: every replica of the run writes
the same files there). When the call answers, :class:`CopyToChecker` reads the
files back with pyarrow (not the product's reader) and requires:

* the files are named for one time (``part-<id>-<time>-<n>.parquet``): the
  explicit time asked for, or -- a fresh copy-to -- a time no earlier than
  every write acknowledged before the call began (as a fresh peek);
* the rows, each written once per count, are the reference evaluator's
  contents of the collection at that time, and their number is what the call
  returned (``copy_to_matches_reference``).
"""

from __future__ import annotations

import io
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

import pyarrow.parquet as pq

from tidegate.runtime.storage.urls import open_blob
from tidegate.spec.ids import GlobalId

from .history import ReferenceModel, Windows

__all__ = ["COPY_TO_ROOT", "CopyToChecker", "clear", "copy_to_url"]

COPY_TO_ROOT = "mem://tidegate-sim-copy-to"
"""Where the simulation's copy-tos write, one directory per operation."""

_NAME = re.compile(r"part-(?P<id>[^-]+)-(?P<time>\d+)-(?P<n>\d+)\.parquet$")


def copy_to_url(n: int) -> str:
    """The URL copy-to operation ``n`` writes under."""
    return f"{COPY_TO_ROOT}/op{n}"


def clear(url: str) -> None:
    """Delete what an earlier run in this process left under ``url`` (the store outlives runs)."""
    blob = open_blob(url)
    for meta in blob.list_keys():
        blob.delete(meta.key)


class CopyToChecker:
    """Judges answered copy-tos (see the module docstring) against ``model`` (the reference,
    brought up to date by ``refresh``) and the real-time bounds of fresh reads (``windows``)."""

    def __init__(
        self,
        model: ReferenceModel,
        windows: Windows,
        violate: Callable[[str, str], None],
        refresh: Callable[[], None],
        count: Callable[[str], None],
    ) -> None:
        self.model = model
        self.windows = windows
        self.violate = violate
        self.refresh = refresh
        self.count = count

    def judge(self, ev: dict[str, Any]) -> None:
        if ev["status"] != "ok":
            return
        gid = GlobalId.parse(ev["target"])
        if gid not in self.model.plans and gid not in self.model.tables:
            return
        blob = open_blob(ev["url"])
        names = sorted(meta.key for meta in blob.list_keys())
        found = [m for m in map(_NAME.search, names) if m is not None]
        times = {int(m["time"]) for m in found}
        if len(times) != 1 or len(found) != len(names):
            self.violate(
                "copy_to_matches_reference",
                f"copy-to {ev['n']} of {ev['name']} wrote files {names[:4]}, not the files of "
                "one time",
            )
            return
        (t,) = times
        if ev.get("at") is not None and t != int(ev["at"]):
            self.violate(
                "copy_to_matches_reference",
                f"copy-to {ev['n']} of {ev['name']} at {ev['at']} wrote the contents at {t}",
            )
        lo = self.windows.lo(int(ev["invoke"]))
        if ev.get("at") is None and t < lo:
            self.violate(
                "strict_serializable",
                f"fresh copy-to {ev['n']} of {ev['name']} wrote the contents at {t}, before {lo}, "
                "the time of a write acknowledged before it began",
            )
        got: Counter[tuple[Any, ...]] = Counter()
        for name in names:
            data = blob.get(name)
            assert data is not None
            for row in pq.read_table(io.BytesIO(data)).to_pylist():
                got[tuple(row.values())] += 1
        self.refresh()
        want = Counter({row: n for row, n in self.model.contents(gid, t).rows.items() if n > 0})
        if got != want or int(ev["rows_written"]) != sum(want.values()):
            over = sorted((+(got - want)).items(), key=repr)[:3]
            under = sorted((+(want - got)).items(), key=repr)[:3]
            self.violate(
                "copy_to_matches_reference",
                f"copy-to {ev['n']} of {ev['name']} at {t} wrote {sum(got.values())} rows "
                f"(answered {ev['rows_written']}), the reference has {sum(want.values())}: "
                f"extra {over}, missing {under}",
            )
        ev["time"] = t
        self.count("copy_to_checked")
