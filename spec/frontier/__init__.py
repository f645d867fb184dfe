"""The frontier algebra: timestamps, antichains, change batches, compaction, read policies and holds.

See ``docs/reference/storage-and-frontiers.md`` section 1 for the laws this module
satisfies; ``tests/spec/frontier`` checks each of them with Hypothesis.
"""

from .antichain import Antichain, minimal_elements
from .change_batch import ChangeBatch
from .compaction import (
    Update,
    accumulate,
    advance_by,
    advance_updates,
    consolidate,
    consolidate_pairs,
)
from .mutable_antichain import MutableAntichain
from .order import (
    PartialOrder,
    Product,
    Time,
    check_time,
    join,
    less_equal,
    less_than,
    meet,
    minimum,
    sort_key,
    time_kind,
)
from .read_holds import ReadHold, ReadHolds
from .read_policy import (
    LagWriteFrontier,
    Multiple,
    NoPolicy,
    ReadPolicy,
    StepBack,
    ValidFrom,
    apply_policy,
    lag_writes_by,
    step_back,
)
from .rows import Row, row_sort_key, value_sort_key

__all__ = [
    "Antichain",
    "ChangeBatch",
    "LagWriteFrontier",
    "Multiple",
    "MutableAntichain",
    "NoPolicy",
    "PartialOrder",
    "Product",
    "ReadHold",
    "ReadHolds",
    "ReadPolicy",
    "Row",
    "StepBack",
    "Time",
    "Update",
    "ValidFrom",
    "accumulate",
    "advance_by",
    "advance_updates",
    "apply_policy",
    "check_time",
    "consolidate",
    "consolidate_pairs",
    "join",
    "lag_writes_by",
    "less_equal",
    "less_than",
    "meet",
    "minimal_elements",
    "minimum",
    "row_sort_key",
    "sort_key",
    "step_back",
    "time_kind",
    "value_sort_key",
]
