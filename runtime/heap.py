"""Shorter full collections for long-running processes: what startup made is frozen.

A replica process starts with some 80,000 objects the cyclic collector tracks
(modules, classes, functions, the executor, the gRPC server), and every full
collection walks all of them: 60-90 ms on this project's 2-core machine before it
reaches the objects serving made. Full collections come every few seconds while a
replica's state grows (each time the long-lived objects grow by a quarter), and a
peek or a frontier report waiting behind one is late by that much: they were most
of ``bench/appends.py``'s freshness tail (probes of 140-270 ms).

:func:`freeze_startup_heap` collects once, then moves every surviving object into
the collector's permanent generation (:func:`gc.freeze`), so later collections
walk only what was made after startup. Frozen objects are still freed when their
reference count drops to zero; only a reference cycle among them would never be
reclaimed, which is why this runs once, when the process is ready to serve, and
only in processes whose startup objects live as long as the process does (a
replica, ``tidegate up``), never in an embedder's process.
"""

from __future__ import annotations

import gc

__all__ = ["freeze_startup_heap"]


def freeze_startup_heap() -> int:
    """Collect garbage, then freeze what survives; returns how many objects are frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
