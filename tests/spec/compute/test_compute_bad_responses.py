"""Whatever a replica sends, the controller takes it or refuses it with a typed error, unchanged.

A replica is another process: a buggy one must not crash the controller (every
refusal is a :class:`TidegateError`, after which the replica's session is as
before), and a refused response must not poison the controller's later work.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tidegate.spec.compute import ComputeController, InMemoryStorage
from tidegate.spec.errors import TidegateError
from tidegate.spec.frontier import Antichain
from tidegate.spec.ids import GlobalId
from tidegate.spec.protocol.responses import Frontiers, PeekResponse, SubscribeResponse
from tidegate.spec.strategies.protocol import responses
from tidegate.spec.testing.controller import index_dataflow, subscribe_dataflow

S1, IDX, SUB, UNKNOWN = (GlobalId.user(n) for n in (1, 10, 11, 99))
_ids = st.sampled_from([S1, IDX, SUB, UNKNOWN])


def _setup() -> tuple[ComputeController, InMemoryStorage, list[uuid.UUID]]:
    storage = InMemoryStorage()
    storage.add_collection(S1, since=0, upper=5)
    ctl = ComputeController(storage, check_protocol=True)
    ctl.initialization_complete()
    ctl.create_instance("c1")
    ctl.add_replica("c1", "r1")
    ctl.create_dataflow("c1", index_dataflow(IDX, sources=[S1], as_of=4))
    ctl.create_dataflow("c1", subscribe_dataflow(SUB, sources=[S1], as_of=4))
    ctl.handle_response(
        "c1", "r1", 1, Frontiers(IDX, Antichain([5]), Antichain([4]), Antichain([5]))
    )
    ctl.drain()
    peek = ctl.peek("c1", IDX, 4)
    ctl.drain()
    return ctl, storage, [peek, uuid.UUID(int=1)]


@st.composite
def _aimed_responses(draw: st.DrawFn, peeks: list[uuid.UUID]) -> Any:
    """Any response, most of them about the collections and peeks the controller has."""
    resp = draw(responses())
    if isinstance(resp, Frontiers | SubscribeResponse) and draw(st.booleans()):
        resp = dataclasses.replace(resp, id=draw(_ids))
    elif isinstance(resp, PeekResponse) and draw(st.booleans()):
        resp = dataclasses.replace(resp, uuid=draw(st.sampled_from(peeks)))
    return resp


@given(st.data())
def test_every_response_is_taken_or_refused_typed_and_unchanged(data: st.DataObject) -> None:
    ctl, storage, peeks = _setup()
    sessions = ctl._instance("c1").sessions  # the protocol sessions the controller checks with
    assert sessions is not None
    session = sessions["r1"]
    for _ in range(data.draw(st.integers(1, 6))):
        resp = data.draw(_aimed_responses(peeks))
        before = session.snapshot()
        try:
            ctl.handle_response("c1", "r1", 1, resp)
        except TidegateError:
            assert session.snapshot() == before
        ctl.maintain()
    storage.advance_upper(S1, Antichain([9]))
    ctl.storage_frontiers_advanced([S1])  # later work still runs
