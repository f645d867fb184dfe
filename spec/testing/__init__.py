"""Reusable test machinery for users' own suites: state machines and contract tests.

Requires ``hypothesis`` (``pip install tidegate[testing]``). Subclass the
state machines here to check your own replicas, controllers and executors
against the spec.
"""

from .compute_replica import *  # noqa: F403
from .compute_replica import __all__ as _compute_replica_all
from .controller import *  # noqa: F403
from .controller import __all__ as _controller_all
from .executor import *  # noqa: F403
from .executor import __all__ as _executor_all
from .history import *  # noqa: F403
from .history import __all__ as _history_all
from .protocol import *  # noqa: F403
from .protocol import __all__ as _protocol_all
from .sql_cases import *  # noqa: F403
from .sql_cases import __all__ as _sql_cases_all
from .storage_controller import *  # noqa: F403
from .storage_controller import __all__ as _storage_controller_all
from .storage_replica import *  # noqa: F403
from .storage_replica import __all__ as _storage_replica_all

__all__ = [
    *_protocol_all,
    *_history_all,
    *_controller_all,
    *_storage_controller_all,
    *_storage_replica_all,
    *_executor_all,
    *_sql_cases_all,
    *_compute_replica_all,
]
