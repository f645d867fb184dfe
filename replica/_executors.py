"""The replica's executors: which one runs the dataflows, and a guard around it.

:func:`make_executor` builds the executor a ``--executor`` flag names: Spark
(the product; imported lazily, it starts a JVM) or the spec's
:class:`~tidegate.spec.executor.PythonExecutor` (tests, small deployments).
:class:`GuardedExecutor` wraps either for the replica process: an unexpected
exception from the executor (a Py4J error, a bug) becomes an
:class:`~tidegate.spec.errors.ExecutorError`, which the replica core turns
into its typed answer (a rejected dataflow, a ``PeekError``, a rejected feed)
instead of a dead process; it counts each export's records, the arrangement
sizes the metrics report; and it runs feeds and steps with Python's cyclic
collector paused (:func:`~tidegate.runtime.heap.gc_paused`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from tidegate.runtime.heap import gc_paused
from tidegate.spec.errors import ExecutorError, TidegateError
from tidegate.spec.executor.contract import DataflowHandle, Executor, ExportBatch
from tidegate.spec.frontier import Antichain, Row, Update
from tidegate.spec.ids import GlobalId
from tidegate.spec.protocol.responses import PeekResult
from tidegate.spec.protocol.types import DataflowDescription, RowSetFinishing

__all__ = ["ExecutorKind", "GuardedExecutor", "make_executor"]

ExecutorKind = Literal["python", "spark"]

DEFAULT_SPARK_MASTER = "local[2]"


def make_executor(
    kind: ExecutorKind,
    *,
    spark_master: str = DEFAULT_SPARK_MASTER,
    workers: int | None = None,
    index_memory_rows: int | None = None,
    spark_conf: Mapping[str, str] | None = None,
    spark_ui: bool = False,
    spark_app_name: str = "tidegate-replica",
    state_memory_rows: int | None = None,
) -> Executor:
    """The executor named by ``kind``.

    ``"spark"``: a ``SparkExecutor`` on a session for ``spark_master``;
    ``workers`` sets the shuffle partitions and, with the default local
    master, the local thread count (``local[workers]``); an index with more
    than ``index_memory_rows`` rows (default: the executor's) keeps its history
    in Spark; a stateful operator keeps at most ``state_memory_rows``
    arrangement entries in the driver (default: the executor's; a replica
    size's); ``spark_conf`` are Spark properties set on the session (over its
    defaults), ``spark_ui`` turns the web UI on and ``spark_app_name`` names the application. ``"python"``: the
    single-threaded reference executor (the other options are ignored).
    """
    if kind == "python":
        from tidegate.spec.executor.python import PythonExecutor

        return PythonExecutor()
    if kind == "spark":
        from tidegate.replica.spark import SparkExecutor, spark_session

        master = spark_master
        if workers is not None and master == DEFAULT_SPARK_MASTER:
            master = f"local[{workers}]"
        session = spark_session(
            master,
            app_name=spark_app_name,
            shuffle_partitions=workers,
            conf=spark_conf,
            ui=spark_ui,
        )
        from tidegate.replica.spark._index_output import DEFAULT_INDEX_MEMORY_ROWS
        from tidegate.replica.spark.arrangement import DEFAULT_STATE_MEMORY_ROWS

        executor: Executor = SparkExecutor(
            session,
            index_memory_rows=DEFAULT_INDEX_MEMORY_ROWS
            if index_memory_rows is None
            else index_memory_rows,
            state_memory_rows=DEFAULT_STATE_MEMORY_ROWS
            if state_memory_rows is None
            else state_memory_rows,
        )
        return executor
    raise ValueError(f"unknown executor {kind!r} (python, spark)")


class GuardedExecutor:
    """``inner`` with unexpected exceptions turned into :class:`ExecutorError`, and sizes counted.

    :attr:`records` holds, per export, the sum of the diffs it has output (its
    number of records at its upper, with multiplicity); a dropped export
    (compaction to ``[]``) leaves it.
    """

    def __init__(self, inner: Executor) -> None:
        self.inner = inner
        self.records: dict[GlobalId, int] = {}
        self.failures = 0

    def _fail(self, what: str, e: Exception) -> ExecutorError:
        self.failures += 1
        return ExecutorError(f"executor failed in {what}: {type(e).__name__}: {e}")

    def install(self, dataflow: DataflowDescription) -> DataflowHandle:
        try:
            return self.inner.install(dataflow)
        except TidegateError:
            raise
        except Exception as e:
            raise self._fail(f"install of {dataflow.debug_name!r}", e) from e

    def feed(
        self,
        handle: DataflowHandle,
        input_id: GlobalId,
        updates: Iterable[Update],
        upper: Antichain,
    ) -> None:
        try:
            with gc_paused():
                self.inner.feed(handle, input_id, updates, upper)
        except TidegateError:
            raise
        except Exception as e:
            raise self._fail(f"feed of {input_id}", e) from e

    def step(self) -> list[ExportBatch]:
        try:
            with gc_paused():
                batches = self.inner.step()
        except TidegateError:
            raise
        except Exception as e:
            raise self._fail("step", e) from e
        records = self.records
        for b in batches:
            if b.updates:
                records[b.id] = records.get(b.id, 0) + sum(d for _r, _t, d in b.updates)
            else:
                records.setdefault(b.id, 0)
        return batches

    def index_status(self) -> dict[GlobalId, Any]:
        """The inner executor's per-index storage status (``SparkExecutor.index_status``:
        where each index keeps its history, failures keeping it there); empty for an
        executor without one, or if asking fails."""
        status = getattr(self.inner, "index_status", None)
        if status is None:
            return {}
        try:
            return dict(status())
        except Exception:
            return {}

    def allow_compaction(self, export_id: GlobalId, frontier: Antichain) -> None:
        try:
            self.inner.allow_compaction(export_id, frontier)
        except TidegateError:
            raise
        except Exception as e:
            raise self._fail(f"allow_compaction of {export_id}", e) from e
        if frontier.is_empty():
            self.records.pop(export_id, None)

    def peek(
        self,
        index_id: GlobalId,
        time: int,
        finishing: RowSetFinishing | None = None,
        key_lookup: tuple[Row, ...] | None = None,
    ) -> PeekResult:
        try:
            return self.inner.peek(index_id, time, finishing, key_lookup)
        except TidegateError:
            raise
        except Exception as e:
            raise self._fail(f"peek of {index_id}", e) from e

    def drop(self, handle: DataflowHandle) -> None:
        try:
            self.inner.drop(handle)
        except TidegateError:
            raise
        except Exception as e:
            raise self._fail(f"drop of dataflow {handle}", e) from e

    def since(self, export_id: GlobalId) -> Antichain:
        try:
            return self.inner.since(export_id)
        except TidegateError:
            raise
        except Exception as e:
            raise self._fail(f"since of {export_id}", e) from e

    def upper(self, export_id: GlobalId) -> Antichain:
        try:
            return self.inner.upper(export_id)
        except TidegateError:
            raise
        except Exception as e:
            raise self._fail(f"upper of {export_id}", e) from e

    def source_inputs(self, handle: DataflowHandle) -> tuple[GlobalId, ...]:
        try:
            return self.inner.source_inputs(handle)
        except TidegateError:
            raise
        except Exception as e:
            raise self._fail(f"source_inputs of dataflow {handle}", e) from e

    def state_records(self) -> dict[DataflowHandle, int]:
        try:
            return self.inner.state_records()
        except TidegateError:
            raise
        except Exception as e:
            raise self._fail("state_records", e) from e

    def fail(self, handle: DataflowHandle, message: str) -> None:
        try:
            self.inner.fail(handle, message)
        except TidegateError:
            raise
        except Exception as e:
            raise self._fail(f"fail of dataflow {handle}", e) from e
