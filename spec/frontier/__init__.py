"""The frontier algebra: timestamps, antichains, change batches, compaction, read policies and holds.

See ``reference/storage-and-frontiers.md`` section 1 for the laws this module
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
from .rows import Row, row_sort_key, value_sort_key

__all__ = [
    "Antichain",
    "ChangeBatch",
    "MutableAntichain",
    "PartialOrder",
    "Product",
    "Row",
    "Time",
    "Update",
    "accumulate",
    "advance_by",
    "advance_updates",
    "check_time",
    "consolidate",
    "consolidate_pairs",
    "join",
    "less_equal",
    "less_than",
    "meet",
    "minimal_elements",
    "minimum",
    "row_sort_key",
    "sort_key",
    "time_kind",
    "value_sort_key",
]
