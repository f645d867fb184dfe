"""The compute protocol: commands, responses, and the two session state machines.

* :mod:`.types`, :mod:`.commands`, :mod:`.responses` -- the messages, as frozen dataclasses;
* :class:`ControllerSession` -- what a controller may send in each stage;
* :class:`ReplicaSession` -- what a replica owes back (and the effects it must perform);
* :mod:`.stages` -- the stages of an iteration; :mod:`.ledger` -- the shared legality rules.
"""

from .commands import *  # noqa: F403
from .commands import __all__ as _commands_all
from .controller_session import *  # noqa: F403
from .controller_session import __all__ as _controller_session_all
from .ledger import *  # noqa: F403
from .ledger import __all__ as _ledger_all
from .replica_effects import *  # noqa: F403
from .replica_effects import __all__ as _replica_effects_all
from .replica_session import *  # noqa: F403
from .replica_session import __all__ as _replica_session_all
from .responses import *  # noqa: F403
from .responses import __all__ as _responses_all
from .stages import *  # noqa: F403
from .stages import __all__ as _stages_all
from .types import *  # noqa: F403
from .types import __all__ as _types_all

__all__ = [
    *_types_all,
    *_commands_all,
    *_responses_all,
    *_stages_all,
    *_ledger_all,
    *_controller_session_all,
    *_replica_session_all,
    *_replica_effects_all,
]
