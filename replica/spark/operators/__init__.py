"""Operators of the :class:`~.._executor.SparkExecutor`, one step (many times) at a time.

A node turns its inputs' changes for every time of a step, ``(row, time,
diff)``, into its own. Stateless operators (Map, Filter, Project, Union,
Negate, Constant) transform the step's change as it passes. Stateful ones
(Reduce, Distinct, Threshold, TopK, Window, Join) keep their input arrangement in
Spark (:class:`~..arrangement.SparkArrangement`, indexed by their key): a step
looks up the rows under the keys its change touches (one Spark job), replays
the change time by time for those keys only -- with the spec's aggregate,
ordering and selection functions, so results agree with the reference -- and
appends the change to the arrangement. Work per step follows the change. The
accumulating Reduce (:class:`AccumulatingReduceNode`) keeps per-key vectors
instead and does its step in a few numpy passes over the whole change where
that is exact.

Errors (messages of failed scalar evaluations) flow through every operator
unchanged, as in the reference: each node's errors are its inputs' plus its own.

Everything public is imported from here; the modules behind it are private:

* ``_base`` -- :class:`Node`, :class:`StatefulNode` and the change helpers;
* ``_stateless`` -- Source, Constant, Map, Filter, Project, Negate, Union, the
  equivalence filter of a one-input join, and the temporal filter (whose future
  changes wait in the driver until the step's frontier passes them);
* ``_grouped`` -- Reduce, Distinct/Threshold, TopK and Window over arranged rows;
* ``_join`` -- the binary equi-join;
* ``_accumulating_reduce`` -- the Reduce kept as per-key accumulators;
* ``_vectors`` -- its numpy kernels: grouping, per-key running sums, checked replay.
"""

from ._accumulating_reduce import AccumulatingReduceNode
from ._base import Node, StatefulNode
from ._grouped import DistinctNode, ReduceNode, TopKNode, WindowNode
from ._join import JoinNode
from ._stateless import (
    ConstantNode,
    FilterClassesNode,
    FilterNode,
    MapNode,
    NegateNode,
    ProjectNode,
    SourceNode,
    TemporalFilterNode,
    UnionNode,
)

__all__ = [
    "AccumulatingReduceNode",
    "ConstantNode",
    "DistinctNode",
    "FilterClassesNode",
    "FilterNode",
    "JoinNode",
    "MapNode",
    "NegateNode",
    "Node",
    "ProjectNode",
    "ReduceNode",
    "SourceNode",
    "StatefulNode",
    "TemporalFilterNode",
    "TopKNode",
    "UnionNode",
    "WindowNode",
]
