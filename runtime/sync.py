"""A blocking wrapper of :class:`~tidegate.runtime.environment.Environment`, for scripts and notebooks.

::

    with SyncEnvironment.open("./tidegate-data", replicas={"r1": "127.0.0.1:6876"}) as env:
        env.create_table("t", Schema.of(("x", "int64")))
        env.append("t", [(1,), (2,)])
        print(env.peek("t"))

The environment runs on an event loop in a background thread (an anyio
blocking portal, asyncio by default); every method blocks until its
coroutine there finishes and raises the same typed errors.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any, Generic, TypeVar

from anyio.from_thread import BlockingPortal, start_blocking_portal

from tidegate.spec.compute import ReplicaStatusEvent, SubscribeBatchOut

from .controller.driver import ReplicaInfo
from .controller.storage_status import StorageStatus
from .controller.streams import Subscription
from .environment import Environment
from .frames import PeekAnswer
from .hydration import HydrationInfo

__all__ = ["SyncEnvironment", "SyncIterator", "SyncSubscription"]

T = TypeVar("T")


class SyncIterator(Generic[T]):
    """An async iterator of the environment (subscribe batches, events) as a blocking one.

    :meth:`close` closes the async iterator (for a subscription: drops the subscribe).
    """

    def __init__(self, portal: BlockingPortal, source: Any) -> None:
        self._portal = portal
        self._source = source

    def __iter__(self) -> Iterator[T]:
        return self

    def __next__(self) -> T:
        try:
            item: T = self._portal.call(self._source.__anext__)
        except StopAsyncIteration:
            raise StopIteration from None
        return item

    def close(self) -> None:
        self._portal.call(self._source.aclose)

    def __enter__(self) -> SyncIterator[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


SyncSubscription = SyncIterator[SubscribeBatchOut]
"""A subscribe's batches as a blocking iterator."""


class SyncEnvironment:
    """The blocking twin of :class:`Environment` (same methods, same arguments)."""

    def __init__(self, portal: BlockingPortal, env: Environment, close: Callable[[], None]) -> None:
        self._portal = portal
        self.env = env
        self._close = close

    @classmethod
    def open(cls, *args: Any, backend: str = "asyncio", **kwargs: Any) -> SyncEnvironment:
        """Open an environment (arguments as :meth:`Environment.open`) on a loop of ``backend``."""
        stack = contextlib.ExitStack()
        try:
            portal = stack.enter_context(start_blocking_portal(backend))
            env = stack.enter_context(
                portal.wrap_async_context_manager(Environment.open(*args, **kwargs))
            )
        except BaseException:
            stack.close()
            raise
        return cls(portal, env, stack.close)

    def close(self) -> None:
        """Close the environment and stop its loop thread."""
        self._close()

    def __enter__(self) -> SyncEnvironment:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return self._portal.call(lambda: fn(*args, **kwargs))

    def _sync(self, fn: Callable[..., T], *args: Any) -> T:
        result: T = self._portal.call(_async, fn, *args)
        return result

    # The API, method by method (see Environment for each one's contract).
    def create_table(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(self.env.create_table, *args, **kwargs)

    def create_index(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(self.env.create_index, *args, **kwargs)

    def create_materialized_view(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(self.env.create_materialized_view, *args, **kwargs)

    def append(self, *args: Any, **kwargs: Any) -> int:
        """Rows, ``(row, diff)`` pairs, or a ``pyarrow.Table``/``RecordBatch`` or
        ``pandas.DataFrame`` (see :mod:`tidegate.runtime.frames`)."""
        return int(self._call(self.env.append, *args, **kwargs))

    def append_many(self, *args: Any, **kwargs: Any) -> int:
        return int(self._call(self.env.append_many, *args, **kwargs))

    def peek(self, *args: Any, **kwargs: Any) -> PeekAnswer:
        """A :class:`~tidegate.runtime.frames.PeekAnswer` (``to_arrow()``, ``to_pandas()``)."""
        result: PeekAnswer = self._call(self.env.peek, *args, **kwargs)
        return result

    def copy_to(self, *args: Any, **kwargs: Any) -> int:
        return int(self._call(self.env.copy_to, *args, **kwargs))

    def subscribe(self, *args: Any, **kwargs: Any) -> SyncIterator[SubscribeBatchOut]:
        sub: Subscription = self._call(self.env.subscribe, *args, **kwargs)
        return SyncIterator(self._portal, sub)

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(self.env.execute, *args, **kwargs)

    def subscribe_sql(self, *args: Any, **kwargs: Any) -> SyncIterator[SubscribeBatchOut]:
        return SyncIterator(self._portal, self._call(self.env.subscribe_sql, *args, **kwargs))

    def events(self, buffer: int | None = None) -> SyncIterator[ReplicaStatusEvent]:
        return SyncIterator(self._portal, self._sync(self.env.events, buffer))

    def set_read_policy(self, *args: Any, **kwargs: Any) -> None:
        self._call(self.env.set_read_policy, *args, **kwargs)

    def drop(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(self.env.drop, *args, **kwargs)

    def wait_for(self, *args: Any, **kwargs: Any) -> None:
        self._call(self.env.wait_for, *args, **kwargs)

    def wait_connected(self, *args: Any, **kwargs: Any) -> None:
        self._call(self.env.wait_connected, *args, **kwargs)

    def promote(self) -> None:
        self._call(self.env.promote)

    def create_source(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(self.env.create_source, *args, **kwargs)

    def create_sink(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(self.env.create_sink, *args, **kwargs)

    def storage_status(self, ref: Any = None) -> list[StorageStatus]:
        return self._sync(self.env.storage_status, ref)

    def storage_replica(self) -> ReplicaInfo | None:
        return self._sync(self.env.storage_replica)

    def wait_storage_connected(self, *args: Any, **kwargs: Any) -> None:
        self._call(self.env.wait_storage_connected, *args, **kwargs)

    def freshest(self, ref: Any) -> int:
        return int(self._call(self.env.freshest, ref))

    def table(self, name: Any) -> Any:
        return self._sync(self.env.table, name)

    def frontiers(self, ref: Any) -> Any:
        return self._sync(self.env.frontiers, ref)

    def replicas(self) -> list[ReplicaInfo]:
        return self._sync(self.env.replicas)

    def hydrated(self, ref: Any = None, *, replicas: Any = None) -> bool:
        return bool(self._sync(functools.partial(self.env.hydrated, ref, replicas=replicas)))

    def hydration(self, ref: Any = None) -> list[HydrationInfo]:
        return self._sync(self.env.hydration, ref)


async def _async(fn: Callable[..., T], *args: Any) -> T:
    """Run a synchronous method of the environment on its loop (its state lives there)."""
    return fn(*args)
