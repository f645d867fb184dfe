"""The replica process: the spec's compute replica served over gRPC, running dataflows on Spark.

* :mod:`.service` -- :class:`ReplicaService`, the replica core driven with real IO
  (storage reads and writes, the stream's responses), a gRPC ``ReplicaHandler``;
* :mod:`.executors` -- :func:`make_executor` (Spark or the Python reference) and the guard around it;
* :mod:`.metrics` -- the Prometheus metrics of one service;
* :mod:`.main` -- ``tidegate replica`` (the process: CLI, signals, ready line);
* :mod:`.logs` -- JSON-lines logging;
* :mod:`.spark` -- the ``SparkExecutor``.

Submodules are imported explicitly (they load grpc, pyarrow or Spark).
"""
