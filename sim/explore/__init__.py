"""Exhaustive small-scope exploration of the executable model (``tidegate sim explore``).

Where a simulation samples one interleaving per seed, the explorer enumerates all of them
for a small configuration (two or three replicas, two or three tables, a few client
commands, faults and storage ticks): the spec's compute controller with its protocol
sessions, each replica's core, and the FIFO channels between them, searched breadth first
with a visited set of canonical state fingerprints and replicas taken up to symmetry. The
invariants are checked on every state and transition; a violation comes with the shortest
path to it. See docs/simulator.md, "Exhaustive exploration".
"""

from __future__ import annotations

from .model import Bounds, Violation, World
from .search import ExploreResult, Finding, explore, replay

__all__ = ["Bounds", "ExploreResult", "Finding", "Violation", "World", "explore", "replay"]
