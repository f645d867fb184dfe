"""Errors of the compute protocol: a command or response that breaks a rule of docs/reference/compute.md §3-6.

Every error is a :class:`ProtocolError` whose class attribute ``rule`` names the
broken rule in a short, stable, greppable form (e.g. ``"one-response-per-peek"``);
the message names the offending id, uuid or frontier. Raised by
:class:`~tidegate.spec.protocol.ControllerSession` and
:class:`~tidegate.spec.protocol.ReplicaSession` *before* any state changes.

Each error also says who broke the rule, as h11's errors do: a session
raises every rule as a :class:`LocalProtocolError` when its own side broke it
(a bug in this process: raise, never blame the peer) and as a
:class:`RemoteProtocolError` when the peer did (drop the connection to it).
``except SubscribeGap`` catches both; ``except RemoteProtocolError`` catches
every rule the peer broke.

>>> e = blamed(SubscribeGap("batch starts at [5], expected [3]"), RemoteProtocolError)
>>> isinstance(e, SubscribeGap), isinstance(e, RemoteProtocolError), type(e).__name__
(True, True, 'RemoteSubscribeGap')
"""

from __future__ import annotations

from typing import ClassVar

from .base import TidegateError

__all__ = [
    "AllowCompactionRegression",
    "CommandAfterDrop",
    "CompactionPastPendingPeek",
    "DataflowAsOfUnset",
    "DeposedController",
    "DroppedAtMismatch",
    "DuplicateAllowWrites",
    "DuplicateCollection",
    "DuplicateCopyToResponse",
    "DuplicatePeek",
    "DuplicatePeekResponse",
    "DuplicateSchedule",
    "FrontierBeforeAsOf",
    "FrontierRegression",
    "FrontiersForCopyTo",
    "FrontiersForSubscribe",
    "ImportSinceViolation",
    "InvalidPeekRows",
    "LocalProtocolError",
    "NotACopyTo",
    "NotASubscribe",
    "NotAnIndex",
    "ProtocolError",
    "RemoteProtocolError",
    "ResponseAfterClose",
    "ResponseAfterDrop",
    "StageViolation",
    "SubscribeGap",
    "SubscribeNotConsolidated",
    "SubscribeUpdateOutOfRange",
    "UnknownCollection",
    "UnknownPeek",
    "UnrequestedCancel",
    "UnrequestedCopyToDropped",
    "UnrequestedDroppedAt",
    "blamed",
]


class ProtocolError(TidegateError, ValueError):
    """A command or response that the compute protocol forbids at this point of the session.

    ``rule`` names the broken rule; ``str(error)`` says what broke it.
    """

    rule: ClassVar[str] = "protocol"

    def __str__(self) -> str:
        return f"[{self.rule}] {super().__str__()}"


class DeposedController(ProtocolError):
    """A ``Hello`` from a controller whose epoch is below one the replica has served: a newer
    controller took over (this one was stopped, taken for dead, and runs on). Refused; the
    replica keeps serving the newer controller."""

    rule = "deposed_controller"

    def __init__(self, epoch: int, served: int) -> None:
        super().__init__(
            f"Hello from a controller of epoch {epoch}: this replica serves epoch {served}; a "
            "newer controller took over"
        )
        self.epoch = epoch
        self.served = served


# -- commands: stages ---------------------------------------------------------------


class StageViolation(ProtocolError):
    """A message not allowed in the session's current stage (e.g. Peek before CreateInstance,
    a second InitializationComplete, a response before InitializationComplete)."""

    rule = "stage-order"


# -- commands: collections ----------------------------------------------------------


class UnknownCollection(ProtocolError):
    """A message names a collection that was never created in this protocol iteration."""

    rule = "collection-created-first"


class CommandAfterDrop(ProtocolError):
    """A command names a collection already dropped by ``AllowCompaction(id, [])``."""

    rule = "no-command-after-drop"


class DuplicateCollection(ProtocolError):
    """A collection id is created twice in one protocol iteration (export ids never repeat)."""

    rule = "export-ids-unique"


class DataflowAsOfUnset(ProtocolError):
    """A ``CreateDataflow`` whose ``as_of`` is not set."""

    rule = "as-of-set"


class ImportSinceViolation(ProtocolError):
    """A dataflow imports an index whose since (as_of or allowed compaction) is beyond the dataflow's as_of."""

    rule = "import-since-le-as-of"


class AllowCompactionRegression(ProtocolError):
    """An ``AllowCompaction`` frontier that is not at least the collection's current since."""

    rule = "compaction-monotone"


class CompactionPastPendingPeek(ProtocolError):
    """An ``AllowCompaction`` beyond the time of a peek of that collection that is still
    pending on this connection (neither answered nor cancelled).

    The controller holds a peek's time until the peek is finished, and cancels it on
    every replica before it lets that hold go.
    """

    rule = "no-compaction-past-pending-peek"


class DuplicateSchedule(ProtocolError):
    """A second ``Schedule`` for the same collection in one iteration."""

    rule = "schedule-once"


class DuplicateAllowWrites(ProtocolError):
    """A second ``AllowWrites`` for the same collection in one iteration."""

    rule = "allow-writes-once"


# -- commands and responses: peeks --------------------------------------------------


class NotAnIndex(ProtocolError):
    """An index peek or index import naming a collection that is not an index (e.g. a sink)."""

    rule = "index-required"


class DuplicatePeek(ProtocolError):
    """A ``Peek`` whose uuid was already used in this protocol iteration."""

    rule = "peek-uuid-unique"


class UnknownPeek(ProtocolError):
    """A ``CancelPeek`` or ``PeekResponse`` for a uuid that no ``Peek`` of this iteration carried."""

    rule = "peek-known"


class DuplicatePeekResponse(ProtocolError):
    """A second ``PeekResponse`` for the same peek (exactly one is owed)."""

    rule = "one-response-per-peek"


class UnrequestedCancel(ProtocolError):
    """A ``PeekCanceled`` answer for a peek that no ``CancelPeek`` asked to cancel."""

    rule = "canceled-only-after-cancel-peek"


class InvalidPeekRows(ProtocolError):
    """A ``PeekRows`` answer with a multiplicity that is not positive."""

    rule = "peek-rows-positive"


# -- responses: frontiers -----------------------------------------------------------


class FrontierRegression(ProtocolError):
    """A frontier report that is not strictly greater than the last report of that kind."""

    rule = "frontiers-strictly-increase"


class FrontierBeforeAsOf(ProtocolError):
    """A first frontier report (or first subscribe upper) that is not at least the collection's as_of."""

    rule = "first-frontier-at-least-as-of"


class FrontiersForSubscribe(ProtocolError):
    """A ``Frontiers`` report for a subscribe (subscribes report only through their batches)."""

    rule = "no-frontiers-for-subscribes"


class FrontiersForCopyTo(ProtocolError):
    """A ``Frontiers`` report for a copy-to (a copy-to answers only with its ``CopyToResponse``)."""

    rule = "no-frontiers-for-copy-tos"


class ResponseAfterDrop(ProtocolError):
    """After ``AllowCompaction(id, [])``: a non-empty frontier or a subscribe batch for ``id``."""

    rule = "only-empty-after-drop"


class ResponseAfterClose(ProtocolError):
    """A response for a collection that already reported ``[]`` everywhere, or a subscribe that ended."""

    rule = "nothing-after-close"


# -- responses: subscribes ----------------------------------------------------------


class NotASubscribe(ProtocolError):
    """A ``SubscribeResponse`` for a collection that is not a subscribe sink."""

    rule = "subscribe-response-for-subscribe"


class SubscribeGap(ProtocolError):
    """A subscribe batch whose lower is not the previous upper (the minimum time at first),
    or whose lower is not strictly less than its upper."""

    rule = "subscribe-batches-contiguous"


class SubscribeUpdateOutOfRange(ProtocolError):
    """A subscribe update whose time is outside its batch's ``[lower, upper)`` or before the as_of."""

    rule = "subscribe-updates-in-range"


class SubscribeNotConsolidated(ProtocolError):
    """A subscribe batch with a zero diff or two updates at the same (time, row)."""

    rule = "subscribe-updates-consolidated"


class UnrequestedDroppedAt(ProtocolError):
    """A ``DroppedAt`` for a subscribe that was not dropped."""

    rule = "dropped-at-only-after-drop"


class DroppedAtMismatch(ProtocolError):
    """A ``DroppedAt`` whose frontier is not the upper of the subscribe's last batch."""

    rule = "dropped-at-last-upper"


# -- responses: copy-tos -----------------------------------------------------------


class NotACopyTo(ProtocolError):
    """A ``CopyToResponse`` for a collection that is not a copy-to sink."""

    rule = "copy-to-response-for-copy-to"


class DuplicateCopyToResponse(ProtocolError):
    """A second ``CopyToResponse`` for one copy-to (a replica answers each copy-to at most once)."""

    rule = "one-response-per-copy-to"


class UnrequestedCopyToDropped(ProtocolError):
    """A ``CopyToDropped`` for a copy-to that was not dropped."""

    rule = "copy-to-dropped-only-after-drop"


# -- blame --------------------------------------------------------------------------


class LocalProtocolError(ProtocolError):
    """This side broke a protocol rule: a bug here, not the peer's fault (h11's ``LocalProtocolError``)."""


class RemoteProtocolError(ProtocolError):
    """The peer broke a protocol rule: the connection to it cannot go on (h11's ``RemoteProtocolError``)."""


_BLAMED: dict[tuple[type[ProtocolError], type[ProtocolError]], type[ProtocolError]] = {}


def _rules() -> list[type[ProtocolError]]:
    found: list[type[ProtocolError]] = []
    pending = list(ProtocolError.__subclasses__())
    while pending:
        cls = pending.pop()
        if cls not in (LocalProtocolError, RemoteProtocolError) and cls.__module__ == __name__:
            found.append(cls)
            pending.extend(cls.__subclasses__())
    return found


for _rule in _rules():
    for _side in (LocalProtocolError, RemoteProtocolError):
        _name = f"{_side.__name__.removesuffix('ProtocolError')}{_rule.__name__}"
        _cls = type(_name, (_rule, _side), {"__module__": __name__, "__doc__": _rule.__doc__})
        globals()[_name] = _cls  # a module attribute, so the error pickles
        _BLAMED[(_rule, _side)] = _cls


def blamed(
    error: ProtocolError, side: type[LocalProtocolError] | type[RemoteProtocolError]
) -> ProtocolError:
    """``error`` as the same rule, blamed on ``side`` (already blamed errors are returned as they are)."""
    if isinstance(error, LocalProtocolError | RemoteProtocolError):
        return error
    cls = _BLAMED.get((type(error), side))
    if cls is None:  # a rule defined outside this module
        cls = type(
            f"{side.__name__.removesuffix('ProtocolError')}{type(error).__name__}",
            (type(error), side),
            {},
        )
        _BLAMED[(type(error), side)] = cls
    return cls(*error.args)
