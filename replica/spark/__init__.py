"""Execution on Apache Spark: :class:`SparkExecutor` and :func:`spark_session`.

Design (see ``bench/replica.py`` for the measurements; ``--phases`` shows where a
step's time goes, from :mod:`.phases`):

* Operator state lives in the driver while small, then in Spark. Up to
  ``state_memory_rows`` entries (1,000,000 by default) an arrangement's runs are
  Arrow tables in the driver, merged in Arrow in the background and filtered in
  Arrow by a lookup: a step runs no Spark job. Past that, the arrangement moves
  into Spark for good, in the background (the driver's tables serve until it is
  there), and the rest of this list applies.
* Each stateful operator (Reduce, Join,
  Distinct, Threshold, TopK) keeps its state as a tiered spine of runs
  (:mod:`.arrangement`), merged four at a time on one background thread, so an
  entry is rewritten O(log steps) times and a step never waits for a merge.
  The newest level (at most three changes) is the spine's write buffer: those
  changes stay in the driver as the step's own Arrow tables until four exist,
  then are consolidated in Arrow and shipped to Spark as one checkpointed run;
  merged runs are hash-partitioned by key. The driver holds change-sized data,
  never the state; a push waits when Spark falls two jobs behind.
* A step costs one Spark job per stateful operator whose input changed: the
  lookup of the keys the change touches over the materialised runs (coalesced
  to the cores; a broadcast semi-join unless the keys are a large part of the
  state), built and run on a fetch thread while the driver works on the change.
  Background jobs run in their own FAIR scheduler pool, so a lookup takes the
  next free task slot instead of queueing behind a merge.
* Every stored accumulator is a Spark long: sums as a 32-bit low half plus a
  high part, fingerprints folded modulo 2**61-1 in long arithmetic (no
  ``decimal(38,0)``: its conversions were ~40% of the JVM's row work).
* A Reduce of count/sum/avg over int64 keeps per-key accumulators only
  (counts, exact sums, and two row fingerprints for group presence -- presence
  is probabilistic, error ~2**-120 under negative multiplicities), not its
  input rows. Its step runs in Arrow: the change is grouped by key and time
  with checked int64 arithmetic, the old vectors are summed and joined per key,
  and the replay is a per-key cumulative sum, so results agree with the
  reference by construction; float keys (whose equality Arrow and Python do not
  share), NULL keys and values beyond int64 take the Python path (the spec's
  functions, per key). Other stateful operators replay touched keys in the
  driver with the spec's functions. The accumulating Reduce's output is
  consolidated, so exports skip re-consolidating it.
* Index exports keep their output in the driver (the spec's ``IndexHistory``) while they
  hold at most ``index_memory_rows`` rows (1,000,000 by default: a few hundred
  MB), so a peek of such an index is never a Spark job (a point peek through
  gRPC: ~1.1-1.6 ms). An index that outgrows that moves its history into
  Spark for good, in the background (the driver's copy serves meanwhile)
  (:mod:`.index_history`: typed columns plus time and diff, key-partitioned,
  checkpointed runs merged like the state's, a driver buffer of recent
  updates); its peeks are then Spark jobs (~85-160 ms for key lookups, ~3 s
  for a scan of 1,000,000 rows on local[2]) and the driver holds no copy
  (:mod:`._index_output`). Neither is ever read as operator state: old values
  always come from the Spark state, which stays complete and authoritative.
* The JVMs run with the client JIT only (:data:`.session.JAVA_OPTIONS`): many
  small jobs kept the optimising JIT compiling (630 ms of JIT per step).

Measured (``python bench/replica.py``, keyed aggregate K=10,000, 50 steps of
20,000 updates, local[2], load average 1-2): 745 ms median per step before
this design (CPU 1,214) -> 250-336 ms (CPU 313-324; target 350). At 10x keys
and state the ratio is 2.15-2.26 (target 1.5): the same 20,000 updates touch
2.1x the keys there, and the PythonExecutor's own ratio is 2.15-2.40; with 10x
the state but steps on the base's keys the ratio is 1.70 -- what remains is
the lookup's scan of the cached runs (Spark has no index to probe) and the
larger merges.
"""

from ._executor import SparkExecutor
from ._index_output import IndexStatus
from .session import JAVA_OPTIONS, spark_session

__all__ = ["JAVA_OPTIONS", "IndexStatus", "SparkExecutor", "spark_session"]
