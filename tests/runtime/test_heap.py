"""``freeze_startup_heap``: garbage is collected first, what survives leaves the collector's view."""

from __future__ import annotations

import subprocess
import sys

_CHECK = """
import gc, weakref
from tidegate.runtime.heap import freeze_startup_heap

class Node:
    pass

dead = Node()
dead.me = dead  # a reference cycle, unreachable below: garbage only a collection frees
gone = weakref.ref(dead)
del dead
kept = Node()
kept.me = kept
frozen = freeze_startup_heap()
assert gone() is None, "garbage was frozen instead of collected"
assert frozen == gc.get_freeze_count() > 1000, frozen
assert not any(o is kept for o in gc.get_objects()), "a survivor is still in a generation"
assert kept.me is kept
"""


def test_startup_garbage_is_collected_and_what_survives_is_frozen() -> None:
    # In a process of its own: freezing the test runner's heap would outlive the test.
    done = subprocess.run([sys.executable, "-c", _CHECK], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
