"""A replica link whose stream ended takes commands quietly until the controller moves on."""

from __future__ import annotations

import anyio

from tidegate.runtime.controller.links import Backoff, ReplicaLink
from tidegate.runtime.transport import ConnectionRefused, Transport
from tidegate.spec.ids import GlobalId
from tidegate.spec.protocol.commands import Schedule


class _Nobody(Transport):
    async def connect(self, address: str):  # type: ignore[no-untyped-def]
        raise ConnectionRefused(f"{address}: nobody listens")


def test_a_command_for_a_link_whose_task_ended_goes_nowhere() -> None:
    """Found by the simulator: once a link's task had ended (its stream broke, before the
    controller replaced the link), the next command for it raised anyio's untyped
    ``ClosedResourceError`` out of the driver, into whichever client call caused it."""

    async def main() -> None:
        link = ReplicaLink("default", "r1", 1)
        refused: list[str] = []

        def on_refused(_link: ReplicaLink, reason: str) -> None:
            refused.append(reason)
            link.scope.cancel()  # end the task, as a broken stream would

        await link.run(
            _Nobody(),
            lambda r: r,
            Backoff(0.0, 0.0),
            lambda: 0,
            lambda _l: None,
            lambda _l, _r: None,
            lambda _l, _r: None,
            on_refused,
        )
        assert refused and not link.closed
        link.send(Schedule(GlobalId.user(1)))  # no exception

    anyio.run(main)
