"""History kept for tests that read at a time they remembered.

A collection's since follows its read policy, by default one second behind its
upper (``DEFAULT_READ_POLICY``). A test that remembers a time (an append's, the
freshest) and reads at it only after waiting for something (a replica to
connect, an index to catch up, another read to answer) races that second: on a
loaded machine the wait can outlast it, and the read is refused with
``SinceViolation``. A user who means to read at a past time keeps the history
for it, as Materialize's ``RETAIN HISTORY FOR '10m'`` does; so do these tests,
through :data:`HISTORY` or :func:`keep_history`.
"""

from __future__ import annotations

from typing import Any

from tidegate.spec.frontier.read_policy import LagWriteFrontier

__all__ = ["HISTORY", "keep_history"]

HISTORY = LagWriteFrontier(lag=600_000, max_granularity=1_000)
"""Ten minutes of readable history: longer than any test waits."""


async def keep_history(env: Any, *refs: Any) -> None:
    """Give each of ``refs`` (names or ids of an ``Environment``'s collections) :data:`HISTORY`."""
    for ref in refs:
        await env.set_read_policy(ref, HISTORY)
