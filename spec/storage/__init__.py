"""The storage controller as a pure state machine (docs/reference/storage-and-frontiers.md section 2).

:class:`StorageController` keeps durable collections and exports, their
sinces, uppers, read policies, holds and dependencies, and the storage
instances that run ingestions and sinks. Calls record effects
(:mod:`.effects`) in its outbox; a driver takes them with ``drain()``, carries
them out against the shard store and the instances, and reports outcomes back
(``complete_write``, ``complete_snapshot``, ``handle_response``).
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
from .propagation import *  # noqa: F403
from .propagation import __all__ as _propagation_all
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
    *_propagation_all,
    *_state_all,
]
