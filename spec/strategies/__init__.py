"""Hypothesis strategies for building property-test suites on tidegate.

Requires ``hypothesis`` (``pip install tidegate[testing]``). Strategies for
times and frontiers live in :mod:`.frontier`, for compute protocol messages in
:mod:`.protocol`, for storage protocol messages and source batches in
:mod:`.storage`, for plans and input streams in :mod:`.plan`; all are
re-exported here.
"""

from .frontier import *  # noqa: F403
from .frontier import __all__ as _frontier_all
from .plan import *  # noqa: F403
from .plan import __all__ as _plan_all
from .protocol import *  # noqa: F403
from .protocol import __all__ as _protocol_all
from .storage import *  # noqa: F403
from .storage import __all__ as _storage_all

__all__ = [*_frontier_all, *_protocol_all, *_plan_all, *_storage_all]
