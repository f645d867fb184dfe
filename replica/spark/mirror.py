"""``IndexMirror``: the in-driver copy of an index's contents, for peeks from memory.

It is the spec's :class:`~tidegate.spec.executor.IndexHistory` (the index's
output since its compaction frontier, arranged by key, then row, then time),
under the name the Spark replica's tests and benchmarks know it by.
"""

from __future__ import annotations

from tidegate.spec.executor.index_history import IndexHistory as IndexMirror

__all__ = ["IndexMirror"]
