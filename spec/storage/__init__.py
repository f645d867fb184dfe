"""The storage controller as a pure state machine, and the storage protocol (docs/reference/storage-and-frontiers.md section 2).

:class:`StorageController` keeps durable collections and exports, their
sinces, uppers, read policies, holds and dependencies, and the storage
instances (one replica each) that run ingestions and sinks. Calls record
effects (:mod:`.effects`) in its outbox; a driver takes them with ``drain()``,
carries them out against the shard store and the instances, and reports
outcomes back (``complete_write``, ``complete_snapshot``, ``handle_response``).

The protocol between the controller and a storage replica is in
:mod:`.commands` (messages), :mod:`.stages`, :mod:`.ledger` and
:mod:`.sessions` (its rules, for each side). What a replica does with it is
:mod:`tidegate.spec.storage_replica`; the pure functions it relies on are
here: :mod:`.reclock` (offsets to timestamps through the remap collection),
:mod:`.resumption` (where a restarted ingestion resumes) and :mod:`.loadgen`
(deterministic load generators). :mod:`.introspection` defines the
storage-managed collections (status history, statistics).
"""

from .appends import *  # noqa: F403
from .appends import __all__ as _appends_all
from .commands import *  # noqa: F403
from .commands import __all__ as _commands_all
from .connections import *  # noqa: F403
from .connections import __all__ as _connections_all
from .controller import *  # noqa: F403
from .controller import __all__ as _controller_all
from .descriptions import *  # noqa: F403
from .descriptions import __all__ as _descriptions_all
from .effects import *  # noqa: F403
from .effects import __all__ as _effects_all
from .holds import *  # noqa: F403
from .holds import __all__ as _holds_all
from .instances import *  # noqa: F403
from .instances import __all__ as _instances_all
from .introspection import *  # noqa: F403
from .introspection import __all__ as _introspection_all
from .ledger import *  # noqa: F403
from .ledger import __all__ as _ledger_all
from .loadgen import *  # noqa: F403
from .loadgen import __all__ as _loadgen_all
from .monotonic import *  # noqa: F403
from .monotonic import __all__ as _monotonic_all
from .propagation import *  # noqa: F403
from .propagation import __all__ as _propagation_all
from .reclock import *  # noqa: F403
from .reclock import __all__ as _reclock_all
from .resumption import *  # noqa: F403
from .resumption import __all__ as _resumption_all
from .sessions import *  # noqa: F403
from .sessions import __all__ as _sessions_all
from .stages import *  # noqa: F403
from .stages import __all__ as _stages_all
from .state import *  # noqa: F403
from .state import __all__ as _state_all

__all__ = [
    *_appends_all,
    *_commands_all,
    *_connections_all,
    *_controller_all,
    *_descriptions_all,
    *_effects_all,
    *_holds_all,
    *_instances_all,
    *_introspection_all,
    *_ledger_all,
    *_loadgen_all,
    *_monotonic_all,
    *_propagation_all,
    *_reclock_all,
    *_resumption_all,
    *_sessions_all,
    *_stages_all,
    *_state_all,
]
