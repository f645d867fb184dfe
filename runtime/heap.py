"""The cyclic garbage collector's cost, kept off the paths that serve.

Two tools, for two costs.

**What startup made is frozen.** A replica process starts with some 80,000
objects the cyclic collector tracks (modules, classes, functions, the executor,
the gRPC server), and every full collection walks all of them: 60-90 ms on this
project's 2-core machine before it reaches the objects serving made. Full
collections come every few seconds while a replica's state grows (each time the
long-lived objects grow by a quarter), and a peek or a frontier report waiting
behind one is late by that much: they were most of ``bench/appends.py``'s
freshness tail (probes of 140-270 ms).

:func:`freeze_startup_heap` collects once, then moves every surviving object into
the collector's permanent generation (:func:`gc.freeze`), so later collections
walk only what was made after startup. Frozen objects are still freed when their
reference count drops to zero; only a reference cycle among them would never be
reclaimed, which is why this runs once, when the process is ready to serve, and
only in processes whose startup objects live as long as the process does (a
replica, ``tidegate up``), never in an embedder's process.

**A step runs with the collector paused.** An executor's feed or step allocates
hundreds of thousands of short-lived, acyclic objects (row tuples, per-key
dicts); each survivor of a young collection counts toward the next full one,
which walks every tracked object alive at that moment. On the W join of
``bench/replica.py`` (20,000 updates a step) that was 80-120 ms of a 330 ms step.
:func:`gc_paused` turns the collector off for the block: reference counting still
frees acyclic garbage at once, and cyclic garbage (a step's is bounded) waits for
the first collection after it. The ``SparkExecutor`` pauses it for its own feeds
and steps, the replica's ``GuardedExecutor`` for any executor's; that is safe in an
embedder's process too, since it only delays collection.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["freeze_startup_heap", "gc_paused"]

_pause_lock = threading.Lock()
_pauses = 0
_resume = False


def freeze_startup_heap() -> int:
    """Collect garbage, then freeze what survives; returns how many objects are frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


@contextmanager
def gc_paused() -> Iterator[None]:
    """Run the block with the cyclic collector off; reentrant, and shared by all threads.

    The collector goes off when the first block (of any thread) starts, and back on
    when the last one ends, if it was on when the first started: a program that keeps
    it off keeps it off.
    """
    global _pauses, _resume
    with _pause_lock:
        if _pauses == 0:
            _resume = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _pause_lock:
            _pauses -= 1
            if _pauses == 0 and _resume:
                gc.enable()
