"""Execution on Apache Spark: :class:`SparkExecutor` and :func:`spark_session`.

Design (see ``bench/replica.py`` for the measurements):

* Operator state lives in Spark. Each stateful operator (Reduce, Join,
  Distinct, Threshold, TopK) keeps its state as a tiered spine of
  key-partitioned runs (:mod:`.arrangement`): a step appends its change as a
  new run without a job; background jobs (one thread, off the step's critical
  path) checkpoint each new run into Spark's block store and merge runs four
  at a time, so lineage stays one run deep, each entry is rewritten
  O(log steps) times, and a step never waits for a merge (reads use a
  pending merge's parts).
* A step costs one Spark job per stateful operator whose input changed: the
  lookup of the keys the change touches (no shuffle; partial entries are summed
  in the driver, with Arrow's grouped sums for accumulators). The touched keys
  are then replayed time by time in the driver with the spec's own
  aggregate/ordering functions, so results agree with the reference executor
  by construction. The accumulating Reduce overlaps its lookup job with the
  driver work that does not need the state (the change's own per-key
  vectors). Stateless operators transform the step's change as it passes.
* A Reduce of count/sum/avg over int64 keeps per-key accumulators only
  (counts, exact sums as decimal(38,0), and row fingerprints for presence;
  a NOT NULL column needs only its sum), not its input rows: state and work
  are per key.
* Index exports keep their output in the driver (:mod:`.mirror`), so a peek
  is never a Spark job. The mirror is never read as operator state: old values
  always come from the Spark state, which stays complete and authoritative.
"""

from .executor import SparkExecutor
from .session import spark_session

__all__ = ["SparkExecutor", "spark_session"]
