"""Every typed error tidegate raises, in one import location.

All errors derive from :class:`TidegateError`. Each area keeps its errors in a
module of its own (``frontier``, ``protocol``, ``compute``, ``storage``,
``shard``, ``plan``, ``history``, ``replica``, ``sql``, ``pgwire``); this package re-exports them all, so users write
``from tidegate.spec.errors import SinceViolation``.

An error is raised *before* any state changes: a call that raises leaves the
object it was called on exactly as it was.
"""

from .base import *  # noqa: F403
from .base import __all__ as _base_all
from .compute import *  # noqa: F403
from .compute import __all__ as _compute_all
from .frontier import *  # noqa: F403
from .frontier import __all__ as _frontier_all
from .history import *  # noqa: F403
from .history import __all__ as _history_all
from .pgwire import *  # noqa: F403
from .pgwire import __all__ as _pgwire_all
from .plan import *  # noqa: F403
from .plan import __all__ as _plan_all
from .protocol import *  # noqa: F403
from .protocol import __all__ as _protocol_all
from .replica import *  # noqa: F403
from .replica import __all__ as _replica_all
from .shard import *  # noqa: F403
from .shard import __all__ as _shard_all
from .sinks import *  # noqa: F403
from .sinks import __all__ as _sinks_all
from .sources import *  # noqa: F403
from .sources import __all__ as _sources_all
from .sql import *  # noqa: F403
from .sql import __all__ as _sql_all
from .storage import *  # noqa: F403
from .storage import __all__ as _storage_all
from .storage_protocol import *  # noqa: F403
from .storage_protocol import __all__ as _storage_protocol_all
from .storage_replica import *  # noqa: F403
from .storage_replica import __all__ as _storage_replica_all

__all__ = [
    *_base_all,
    *_frontier_all,
    *_protocol_all,
    *_compute_all,
    *_storage_all,
    *_storage_protocol_all,
    *_storage_replica_all,
    *_replica_all,
    *_shard_all,
    *_history_all,
    *_plan_all,
    *_sql_all,
    *_pgwire_all,
    *_sinks_all,
    *_sources_all,
]
