"""``freeze_startup_heap``: garbage is collected first, what survives leaves the collector's view."""

from __future__ import annotations

import subprocess
import sys

import pytest

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


@pytest.mark.processes
def test_startup_garbage_is_collected_and_what_survives_is_frozen() -> None:
    # In a process of its own: freezing the test runner's heap would outlive the test.
    done = subprocess.run([sys.executable, "-c", _CHECK], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_collector_is_paused_while_any_block_of_any_thread_is_open() -> None:
    import gc
    import threading

    from tidegate.runtime.heap import gc_paused

    assert gc.isenabled()
    seen: list[bool] = []
    opened, may_close = threading.Event(), threading.Event()

    def inner_block() -> None:
        with gc_paused():
            pass
        seen.append(gc.isenabled())  # the main thread's block is still open

    def outlasting_block() -> None:
        with gc_paused():
            opened.set()
            assert may_close.wait(10)

    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():  # reentrant
            pass
        assert not gc.isenabled()
        t = threading.Thread(target=inner_block)
        t.start()
        t.join(10)
        assert seen == [False]
        t = threading.Thread(target=outlasting_block)
        t.start()
        assert opened.wait(10)
    assert not gc.isenabled()  # the other thread's block is still open
    may_close.set()
    t.join(10)
    assert gc.isenabled()


def test_a_collector_the_program_turned_off_stays_off_and_errors_still_resume_it() -> None:
    import gc

    import pytest

    from tidegate.runtime.heap import gc_paused

    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
    with pytest.raises(RuntimeError), gc_paused():
        raise RuntimeError("a failed step")
    assert gc.isenabled()


def test_cyclic_garbage_made_while_paused_is_collected_afterwards() -> None:
    import gc
    import weakref

    from tidegate.runtime.heap import gc_paused

    class Node:
        me: object

    with gc_paused():
        dead = Node()
        dead.me = dead
        gone = weakref.ref(dead)
        del dead
        assert gone() is not None  # a cycle: reference counting alone does not free it
    gc.collect()
    assert gone() is None
