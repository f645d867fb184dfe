"""The compute protocol: commands, responses, and the two session state machines.

* :mod:`.types`, :mod:`.commands`, :mod:`.responses` -- the messages, as frozen dataclasses;
* :class:`ControllerSession` -- what a controller may send in each stage;
* :class:`ReplicaSession` -- what a replica owes back.
"""

from .commands import *  # noqa: F403
from .commands import __all__ as _commands_all
from .responses import *  # noqa: F403
from .responses import __all__ as _responses_all
from .types import *  # noqa: F403
from .types import __all__ as _types_all

__all__ = [*_types_all, *_commands_all, *_responses_all]
