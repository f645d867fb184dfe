"""Effects leave the model one way: each state machine's outbox, drained by its owner.

Walks the public methods of every state machine in ``spec`` and checks that
none returns or takes a list of effects (the issue this replaced had three
conventions: returned lists, an ``out`` list threaded through calls, and an
outbox). Effects are taken with ``drain()`` only.
"""

from __future__ import annotations

import inspect
import typing
from typing import Any, get_args, get_origin, get_type_hints

import pytest

from tidegate.spec.compute import ComputeController, Effect, InMemoryStorage
from tidegate.spec.compute_replica import ComputeReplica
from tidegate.spec.compute_replica.outputs import ReplicaOutput
from tidegate.spec.controller import Controller, ControllerEffect
from tidegate.spec.executor.python import PythonExecutor
from tidegate.spec.outbox import Outbox, atomic
from tidegate.spec.storage import StorageController, StorageEffect
from tidegate.spec.storage_replica import StorageReplica, StorageReplicaOutput

MACHINES = [ComputeController, StorageController, Controller, ComputeReplica, StorageReplica]
EFFECT_TYPES = {
    t
    for u in (Effect, StorageEffect, ControllerEffect, ReplicaOutput, StorageReplicaOutput)
    for t in get_args(u)
}


def _mentions_effects(hint: Any) -> bool:
    """Whether ``hint`` is, or contains, an effect type (list[Effect], tuple[UUID, list[...]], ...)."""
    if hint in EFFECT_TYPES:
        return True
    return any(_mentions_effects(a) for a in get_args(hint))


def _public_methods(cls: type) -> list[tuple[str, Any]]:
    return [
        (name, fn)
        for name, fn in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_") and name != "drain"
    ]


@pytest.mark.parametrize("cls", MACHINES, ids=lambda c: c.__name__)
def test_no_public_method_returns_or_takes_effects(cls: type) -> None:
    checked = 0
    for name, fn in _public_methods(cls):
        hints = get_type_hints(inspect.unwrap(fn), vars(typing) | vars(inspect.getmodule(fn)))
        for param, hint in hints.items():
            where = "returns" if param == "return" else f"takes {param} as"
            assert not _mentions_effects(hint), f"{cls.__name__}.{name} {where} {hint}"
        checked += 1
    # The composed controller's own methods are the few that span both layers.
    assert checked >= (2 if cls is Controller else 5)


@pytest.mark.parametrize("cls", MACHINES, ids=lambda c: c.__name__)
def test_every_machine_has_an_outbox_its_owner_drains(cls: type) -> None:
    hints = get_type_hints(cls.drain)
    assert get_origin(hints["return"]) is list
    assert all(_mentions_effects(a) for a in get_args(hints["return"]))


def test_calls_return_nothing_and_drain_hands_over_each_effect_once() -> None:
    ctl = Controller()
    assert ctl.compute.create_instance("c1") is None
    assert ctl.compute.add_replica("c1", "r1") is None
    effects = ctl.drain()
    assert [type(e).__name__ for e in effects][:2] == ["ConnectReplica", "ReplicaStatusEvent"]
    assert ctl.drain() == []
    replica = ComputeReplica(PythonExecutor())
    assert replica.step() is None and replica.drain() == []


def test_a_call_that_raises_emits_nothing() -> None:
    ctl = ComputeController(InMemoryStorage())
    ctl.create_instance("c1")
    ctl.add_replica("c1", "r1")
    ctl.drain()
    with pytest.raises(Exception):  # noqa: B017 -- any typed refusal
        ctl.add_replica("c1", "r1")
    assert ctl.drain() == []


def test_atomic_discards_what_a_failed_call_emitted() -> None:
    class Machine:
        def __init__(self) -> None:
            self._outbox: Outbox[int] = Outbox()

        @atomic
        def fail_after_emitting(self) -> None:
            self._outbox.emit(2)
            raise ValueError

    m = Machine()
    m._outbox.emit(1)
    with pytest.raises(ValueError):
        m.fail_after_emitting()
    assert m._outbox.drain() == [1]
