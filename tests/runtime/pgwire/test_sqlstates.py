"""The SQLSTATE a wire client sees for the runtime's typed errors."""

from __future__ import annotations

from tidegate.runtime.errors import EnvironmentFenced, OracleFenced
from tidegate.runtime.pgwire.session import error_fields, sqlstate_of


def test_a_fenced_oracle_is_a_controller_going_away_not_an_internal_error() -> None:
    """Found by the simulator's SQL clients (``standard``, seed 1): an ``INSERT`` racing a
    controller's replacement met the old controller's fenced oracle, and the wire answered
    ``XX000`` (internal error). Like ``EnvironmentFenced``, it is ``57P01``: this controller
    is being replaced, reconnect."""
    fenced = OracleFenced("tidegate/oracle", 33, 34)
    assert sqlstate_of(fenced) == "57P01" == sqlstate_of(EnvironmentFenced(3, 4))
    assert ("C", "57P01") in error_fields(fenced)
