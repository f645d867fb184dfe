"""What every piece of the storage service's IO work shares (internal): host, store, logs, loop."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from tidegate.runtime.storage import ShardStore
from tidegate.spec.storage.connections import redact_passwords

from ..host import ServiceHost
from .events import IOEvent
from .metrics import StorageMetrics

__all__ = ["IOContext", "describe"]


@dataclass(frozen=True)
class IOContext:
    """The storage service as its IO work sees it.

    ``post`` hands an outcome to the service's loop (thread-safe);
    ``poll_s``/``poll_max_s`` pace shard polling, ``retry_s``/``retry_max_s``
    the retries of transient storage errors; ``source_poll_s`` is how long one
    step of an upstream reader waits for data, ``source_idle_s`` how long it
    rests after a step that brought nothing; ``max_unacked_updates`` how many
    updates a reader delivers beyond what is acknowledged durable before it
    pauses (backpressure: the core buffers every one of them until written).
    """

    host: ServiceHost
    store: ShardStore
    log: logging.Logger
    metrics: StorageMetrics
    post: Callable[[IOEvent], None]
    lease_ms: int
    poll_s: float
    poll_max_s: float
    retry_s: float
    retry_max_s: float
    source_poll_s: float
    source_idle_s: float
    max_unacked_updates: int


def describe(e: BaseException) -> str:
    """``"ErrorClass: message"``: how an error reaches statuses and logs (any password a
    connection in it carries starred out: the reader's connection holds its secret's value)."""
    return redact_passwords(f"{type(e).__name__}: {e}")
