"""Execution on Apache Spark: :class:`SparkExecutor` and :func:`spark_session`.

Design (see ``bench/replica.py`` for the measurements):

* Operator state lives in Spark. Each stateful operator (Reduce, Join,
  Distinct, Threshold, TopK) keeps its state as a tiered spine of
  key-partitioned runs (:mod:`.arrangement`): a step appends its change as a
  new run without a job and merges runs four at a time into lazily,
  locally checkpointed runs, so lineage stays one run deep and each entry is
  rewritten O(log steps) times.
* A step costs one Spark job per stateful operator whose input changed: the
  lookup of the keys the change touches (no shuffle; partial entries are summed
  in the driver). The touched keys are then replayed time by time in the
  driver with the spec's own aggregate/ordering functions, so results agree
  with the reference executor by construction. Stateless operators transform
  the step's change as it passes.
* A Reduce of count/sum/avg over int64 keeps per-key accumulators only
  (counts, exact sums as decimal(38,0), and row fingerprints for presence),
  not its input rows: state and work are per key.
* Index exports keep their output in the driver (:mod:`.mirror`), so a peek
  is never a Spark job.
"""

from .executor import SparkExecutor
from .session import spark_session

__all__ = ["SparkExecutor", "spark_session"]
