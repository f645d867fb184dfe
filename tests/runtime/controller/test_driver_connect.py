"""The driver's connection attempts: refusals are ``failed`` events, ``wait_connected`` waits.

A replica that refuses the controller (here: a wrong token) is reported as a
``failed`` status event on every attempt, with the refusal as the reason; the
link keeps retrying on the same epoch and connects once the replica accepts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest

from tidegate.replica.service import ReplicaService
from tidegate.runtime.controller import (
    Backoff,
    ControllerDriver,
    ReplicasNotConnected,
    ShardStorageIO,
)
from tidegate.runtime.controller.links import ReplicaLink
from tidegate.runtime.transport.grpc_client import GrpcTransport
from tidegate.runtime.transport.grpc_server import ReplicaServer
from tidegate.spec.controller import Controller
from tidegate.spec.errors import ReplicaMissing
from tidegate.spec.executor.python import PythonExecutor

pytestmark = pytest.mark.timeout(120)

BACKENDS = ["asyncio", "trio"]


def run(backend: str, main: Callable[[], Any]) -> None:
    anyio.run(main, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_refusals_are_failed_events_until_the_replica_accepts(cluster: Any, backend: str) -> None:
    service = ReplicaService(PythonExecutor(), cluster.store, tick_s=0.01).start()
    strict = ReplicaServer(service, token="secret").start()
    open_ = ReplicaServer(service).start()
    address = {"r1": strict.address}

    async def main() -> None:
        with anyio.fail_after(60):
            async with (
                GrpcTransport() as transport,
                ControllerDriver(
                    Controller(),
                    transport,
                    ShardStorageIO(cluster.store),
                    address_of=address.__getitem__,
                    backoff=Backoff(0.02, 0.1),
                    tick_ms=None,
                    maintain_ms=None,
                    poll_ms=None,
                ) as driver,
            ):
                ctl = driver.ctl
                events = driver.events()
                ctl.compute.create_instance(driver.instance)
                driver.apply()
                ctl.compute.add_replica(driver.instance, "r1")
                driver.apply()
                ctl.initialization_complete()
                driver.apply()
                seen = []
                async for e in events:
                    seen.append((e.status, e.epoch, e.reason))
                    if len([s for s in seen if s[0] == "failed"]) == 3:
                        break
                assert seen[0] == ("connecting", 1, "")
                assert all(
                    status == "failed" and epoch == 1 and "Unauthenticated" in reason
                    for status, epoch, reason in seen[1:]
                )
                (info,) = driver.replicas()
                assert (info.status, info.epoch, info.connected) == ("failed", 1, False)
                with pytest.raises(ReplicasNotConnected) as timeout:
                    await driver.wait_connected(timeout_s=0.1)
                assert [i.replica for i in timeout.value.waiting] == ["r1"]
                # The replica now accepts: the same link (epoch 1) connects; nothing was replayed.
                address["r1"] = open_.address
                await driver.wait_connected(["r1"], timeout_s=30)
                (info,) = driver.replicas()
                assert (info.status, info.epoch, info.connected) == ("connected", 1, True)
                assert info.last_error.startswith("Unauthenticated")
                async for e in events:
                    if e.status != "failed":
                        assert (e.status, e.epoch) == ("connected", 1)
                        break
                with pytest.raises(ReplicaMissing):
                    await driver.wait_connected(["r9"])
                await events.aclose()

    try:
        run(backend, main)
    finally:
        strict.stop(0)
        open_.stop(0)
        service.stop()


def test_a_link_reports_each_failed_attempt_and_then_connects() -> None:
    """``on_refused`` sees every failed attempt; ``refused`` clears once the stream is up."""

    class Flaky:
        def __init__(self) -> None:
            self.tries = 0

        async def connect(self, address: str) -> Any:
            self.tries += 1
            if self.tries < 3:
                raise OSError(f"attempt {self.tries} refused")
            return Stream()

    class Stream:
        async def receive(self) -> Any:
            await anyio.sleep_forever()

        async def send_many(self, commands: Any) -> None:
            pass

        async def aclose(self) -> None:
            pass

    refusals: list[str] = []
    states: list[bool] = []

    async def main() -> None:
        link = ReplicaLink("default", "r1", 1)
        async with anyio.create_task_group() as tg:

            def connected(lk: ReplicaLink) -> None:
                states.append(lk.refused)
                tg.cancel_scope.cancel()

            tg.start_soon(
                link.run,
                Flaky(),
                lambda _: "h:1",
                Backoff(0.0, 0.0),
                lambda: 0,
                connected,
                lambda *_: None,
                lambda *_: None,
                lambda _, reason: refusals.append(reason),
            )

    anyio.run(main)
    assert refusals == ["OSError: attempt 1 refused", "OSError: attempt 2 refused"]
    assert states == [False]
