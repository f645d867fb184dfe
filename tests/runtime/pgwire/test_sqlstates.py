"""The SQLSTATE a wire client sees for the runtime's typed errors."""

from __future__ import annotations

import errno

from tidegate.runtime.controller.errors import DependencyDropped
from tidegate.runtime.errors import EnvironmentFenced, OracleFenced
from tidegate.runtime.pgwire.session import error_fields, sqlstate_of
from tidegate.spec.errors import (
    BlobCorrupt,
    ConsensusCorrupt,
    ConsensusStoreCorrupt,
    StorageUnavailable,
)


def test_a_fenced_oracle_is_a_controller_going_away_not_an_internal_error() -> None:
    """Found by the simulator's SQL clients (``standard``, seed 1): an ``INSERT`` racing a
    controller's replacement met the old controller's fenced oracle, and the wire answered
    ``XX000`` (internal error). Like ``EnvironmentFenced``, it is ``57P01``: this controller
    is being replaced, reconnect."""
    fenced = OracleFenced("tidegate/oracle", 33, 34)
    assert sqlstate_of(fenced) == "57P01" == sqlstate_of(EnvironmentFenced(3, 4))
    assert ("C", "57P01") in error_fields(fenced)


def test_a_store_refusing_a_write_is_a_typed_sqlstate_not_an_internal_error() -> None:
    """Found by the simulator's SQL clients (``small``, seed 1, a full disk): an ``INSERT``
    refused by a full disk was answered ``XX000`` with the OS's words. A store's refusal is
    expected and its outcome known (nothing applied): PostgreSQL answers a full disk
    ``53100`` (disk_full), a read-only or inaccessible directory ``42501``; a code the store
    said itself (PostgreSQL consensus, SQLite's error name) is kept; anything else is
    ``58030`` (io_error)."""

    def refusal(*, errno: int | None = None, sqlstate: str | None = None) -> StorageUnavailable:
        return StorageUnavailable(
            "u1", "consensus", "u1", "compare-and-set", "no room", errno=errno, sqlstate=sqlstate
        )

    full = refusal(errno=errno.ENOSPC)
    assert sqlstate_of(full) == "53100" == sqlstate_of(refusal(errno=errno.EDQUOT))
    assert ("C", "53100") in error_fields(full)
    assert sqlstate_of(refusal(errno=errno.EROFS)) == "42501"
    assert sqlstate_of(refusal(errno=errno.EFBIG)) == "54000"
    assert sqlstate_of(refusal(sqlstate="53100")) == "53100"
    assert sqlstate_of(refusal()) == "58030"


def test_a_damaged_record_is_data_corrupted_not_an_internal_error() -> None:
    """Found by the simulator's SQL clients (``small``, seed 3, bit rot in a consensus record):
    an ``INSERT`` that met the damaged record was answered ``XX000``. PostgreSQL answers data
    whose checksum does not match ``XX001`` (data_corrupted)."""
    record = ConsensusCorrupt("u2", 85, "checksum mismatch")
    blob = BlobCorrupt("u2", "u2/batch-1", "checksum mismatch")
    assert sqlstate_of(record) == sqlstate_of(blob) == "XX001"
    assert sqlstate_of(ConsensusStoreCorrupt("tidegate/consensus.db", "not a database")) == "XX001"
    assert ("C", "XX001") in error_fields(record)


def test_a_query_whose_input_was_dropped_meanwhile_is_55000_by_either_path() -> None:
    """Found by the simulator's SQL clients (``small``, seed 1, consensus failures): a query
    answered by a transient dataflow (a subscribe) whose input a client dropped meanwhile was
    answered ``22023``, a data error; the same query answered by a peek was ``55000``
    (object_not_in_prerequisite_state). Both paths now say the same."""
    from tidegate.runtime.controller.errors import dropped_while_subscribed, input_dropped
    from tidegate.runtime.sql import _peek_error, _read_failed

    error = dropped_while_subscribed("u6")
    assert input_dropped(error) == "u6" and input_dropped("division by zero") is None
    slow = _peek_error(_read_failed("t37", 2090, error))
    fast = _peek_error(DependencyDropped("u6", 2090, "u6"))
    assert sqlstate_of(slow) == sqlstate_of(fast) == "55000"
    assert str(slow).startswith("u6 was dropped")
    assert sqlstate_of(_peek_error(_read_failed("t37", 2090, "division by zero"))) == "22012"


def test_a_read_of_a_stalled_or_ceased_source_is_typed_not_an_internal_error() -> None:
    """A fresh read that needs a stalled source is ``57P03`` (cannot answer now: retry, as for
    replicas not yet connected), one of a ceased source ``55000`` (the source must be dropped and
    created again first); both name the source and carry its error."""
    from tidegate.runtime.controller.errors import SourceCeased, SourceStalled

    stalled = SourceStalled("u3", "UpstreamUnreachable: upstream db:5432 is unreachable", "s")
    ceased = SourceCeased("u3", "UpstreamTruncated: upstream table t was truncated", "s")
    assert sqlstate_of(stalled) == "57P03" and sqlstate_of(ceased) == "55000"
    for e in (stalled, ceased):
        assert "'s' (u3)" in str(e) and str(e.error) in str(e)
