"""Who broke the rule decides what the driver does (h11's Local/RemoteProtocolError).

A replica that sends a response the protocol forbids is at fault: the driver
ends its connection with the rule in the reason and rehydrates it on the next
epoch. An error raised by the controller's own code while handling a response
is a bug here: it propagates out of the driver and never marks the replica
failed. An effect no handler knows raises ``UnhandledEffect``.
"""

from __future__ import annotations

import uuid
from typing import Any

import anyio
import pytest

from tidegate.runtime.controller import Backoff, ControllerDriver, ShardStorageIO
from tidegate.spec.compute import ReplicaStatusEvent
from tidegate.spec.controller import Controller
from tidegate.spec.errors import InvalidUsage, UnhandledEffect
from tidegate.spec.protocol.responses import PeekResponse, PeekRows

pytestmark = pytest.mark.timeout(60)


class _Stream:
    """One connection of a scripted replica: responses are pushed by the test."""

    def __init__(self) -> None:
        self.send, self.inbox = anyio.create_memory_object_stream[Any](16)
        self.commands: list[Any] = []

    async def receive(self) -> Any:
        return await self.inbox.receive()

    async def send_many(self, commands: Any) -> None:
        self.commands.extend(commands)

    async def aclose(self) -> None:
        pass


class _Transport:
    def __init__(self) -> None:
        self.streams: list[_Stream] = []
        self.connected = anyio.Event()

    async def connect(self, address: str) -> _Stream:
        s = _Stream()
        self.streams.append(s)
        self.connected.set()
        return s


def _driver(transport: _Transport, cluster: Any) -> ControllerDriver:
    return ControllerDriver(
        Controller(check_protocol=True),
        transport,  # type: ignore[arg-type]
        ShardStorageIO(cluster.store),
        address_of=lambda r: r,
        backoff=Backoff(0.01, 0.05),
        tick_ms=None,
        maintain_ms=None,
        poll_ms=None,
    )


async def _start(driver: ControllerDriver, transport: _Transport) -> None:
    ctl = driver.ctl
    ctl.compute.create_instance(driver.instance)
    ctl.compute.add_replica(driver.instance, "r1")
    ctl.initialization_complete()
    driver.apply()
    await transport.connected.wait()


def test_a_replica_that_breaks_a_rule_is_disconnected_and_rehydrated(cluster: Any) -> None:
    transport = _Transport()

    async def main() -> None:
        with anyio.fail_after(30):
            async with _driver(transport, cluster) as driver:
                events = driver.events()
                await _start(driver, transport)
                # An answer to a peek nobody asked for: no correct replica sends it.
                bogus = PeekResponse(uuid.UUID(int=99), PeekRows(()))
                await transport.streams[0].send.send(bogus)
                seen = []
                async for e in events:
                    seen.append(e)
                    if e.epoch == 2:
                        break
                failed = [e for e in seen if e.status == "failed"]
                assert failed and failed[0].epoch == 1
                assert "RemoteUnknownPeek: [peek-known]" in failed[0].reason
                assert seen[-1].epoch == 2  # the replica is rehydrated on the next epoch
                await events.aclose()

    anyio.run(main)


def test_the_controllers_own_bug_propagates_and_blames_no_replica(cluster: Any) -> None:
    transport = _Transport()
    effects: list[Any] = []

    async def main() -> None:
        with anyio.fail_after(30):
            async with _driver(transport, cluster) as driver:
                driver.observers.append(effects.append)
                await _start(driver, transport)

                def broken(*args: Any) -> None:
                    raise InvalidUsage("a bug in the controller while merging a response")

                driver.ctl.compute.handle_response = broken  # type: ignore[method-assign]
                await transport.streams[0].send.send(PeekResponse(uuid.UUID(int=1), PeekRows(())))
                await anyio.sleep(5)

    with pytest.raises(BaseException) as info:
        anyio.run(main)
    assert (
        info.group_contains(InvalidUsage)
        if isinstance(info.value, BaseExceptionGroup)
        else (isinstance(info.value, InvalidUsage))
    )
    statuses = [e.status for e in effects if isinstance(e, ReplicaStatusEvent)]
    assert statuses == ["connecting", "connected"]  # never "failed": the replica did nothing wrong


def test_an_effect_without_a_handler_raises(cluster: Any) -> None:
    transport = _Transport()

    async def main() -> None:
        async with _driver(transport, cluster) as driver:
            driver.ctl._outbox.emit(object())  # type: ignore[arg-type]  # a new effect type
            with pytest.raises(UnhandledEffect) as info:
                driver.apply()
            assert "the controller driver has no handler for effect object" in str(info.value)

    anyio.run(main)
