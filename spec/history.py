"""The compute command history: what a controller sent on one instance, reduced for replay.

Every command sent to an instance's replicas is pushed into a
:class:`CommandHistory`. The history is reduced whenever it has doubled since
the last reduction, so its length stays proportional to the live state
(dataflows, peeks, compaction that is still ahead of an as_of) instead of to
everything ever sent. A new or reconnecting replica is sent the reduced
history, and a replica reduces its own history when it reconciles
(docs/reference/compute.md section 8).

Reduction (:func:`reduce_commands`) folds the commands into accumulators --
the last ``AllowCompaction`` per id, the merged configuration, the peeks not
yet cancelled -- advances every dataflow's ``as_of`` to the meet of its
exports' final compaction frontiers, drops dataflows whose ``as_of`` becomes
``[]`` (with their ``Schedule``/``AllowWrites``), and rebuilds the history in
the replay order ``Hello, CreateInstance, [UpdateConfiguration],
CreateDataflow*, Schedule*, Peek* (by uuid), AllowCompaction* (by id),
AllowWrites* (by id), [InitializationComplete]``.

A copy-to dataflow is kept, at its own ``as_of`` (nothing compacts a
copy-to), only until it has been answered: the controller drops it as soon
as the first replica answers, and its ``AllowCompaction(id, [])`` removes it
like any dropped dataflow, so a replica that connects later never writes it
again.

Two deliberate differences from Materialize's ``history.rs``, both only
visible on inputs a correct controller never sends, or to keep the replayed
sequence legal:

* an ``AllowCompaction`` behind a dataflow's ``as_of`` is a no-op (compaction
  never goes back), so the new ``as_of`` is clamped to be at least the old one
  instead of regressing (Materialize soft-asserts and regresses);
* an ``AllowWrites`` for an export that was itself dropped is not replayed: it
  would follow that export's ``AllowCompaction(id, [])`` in the replay order,
  which the protocol forbids.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import fields, replace
from typing import TypeAlias

from .errors import HistoryAsOfUnset, HistoryRepeatsCreateInstance, HistoryRepeatsHello, NotACommand
from .frontier import Antichain
from .ids import GlobalId
from .protocol.commands import (
    AllowCompaction,
    AllowWrites,
    CancelPeek,
    ComputeCommand,
    CreateDataflow,
    CreateInstance,
    Hello,
    InitializationComplete,
    Peek,
    Schedule,
    UpdateConfiguration,
)
from .protocol.types import ComputeParameters, DataflowDescription

__all__ = ["CommandHistory", "reduce_commands"]

_EMPTY = Antichain.empty()

_IdKey: TypeAlias = tuple[str, int]
"""A GlobalId as ``(namespace, value)``: the reduction's dict key. GlobalId's dataclass
``__hash__`` runs in Python; this tuple hashes in C, which makes reductions ~15% faster."""
_UNSET = ComputeParameters()


_DATAFLOW_FIELDS = (
    "debug_name",
    "source_imports",
    "index_imports",
    "objects_to_build",
    "index_exports",
    "sink_exports",
    "as_of",
    "until",
)
_FAST_WITH_AS_OF = tuple(f.name for f in fields(DataflowDescription)) == _DATAFLOW_FIELDS


def _with_as_of(dataflow: DataflowDescription, as_of: Antichain) -> CreateDataflow:
    """``CreateDataflow(dataflow.with_as_of(as_of))``, without ``dataclasses.replace``'s overhead.

    Falls back to ``with_as_of`` if ``DataflowDescription`` gains fields.
    """
    if not _FAST_WITH_AS_OF:
        return CreateDataflow(dataflow.with_as_of(as_of))
    d = dataflow
    return CreateDataflow(
        DataflowDescription(
            d.debug_name,
            d.source_imports,
            d.index_imports,
            d.objects_to_build,
            d.index_exports,
            d.sink_exports,
            as_of,
            d.until,
        )
    )


def _by_id(cmd: ComputeCommand) -> tuple[int, int]:
    """Sort key: the command's GlobalId order, as a tuple so that sorting compares in C."""
    return cmd.id.sort_key  # type: ignore[union-attr]  # only AllowCompaction / AllowWrites


_PLAIN_KINDS = frozenset(
    {Schedule, AllowWrites, UpdateConfiguration, InitializationComplete, Peek, CancelPeek}
)
"""Command types that ``push`` records without checking anything."""


class _Reduced:
    """What a reduction produced: the commands, plus the live state the history keeps counts of."""

    __slots__ = ("commands", "live_exports", "live_peeks")

    def __init__(
        self,
        commands: list[ComputeCommand],
        live_exports: dict[_IdKey, int],
        live_peeks: set[int],
    ) -> None:
        self.commands = commands
        self.live_exports = live_exports
        self.live_peeks = live_peeks


def reduce_commands(commands: Iterable[ComputeCommand]) -> list[ComputeCommand]:
    """The reduced form of a command sequence (docs/reference/compute.md section 8.2).

    Pure: the input is not modified, and commands that survive unchanged are
    the very objects passed in. A second ``Hello`` or ``CreateInstance`` keeps
    the last one (:class:`CommandHistory` rejects them on push). Raises
    :class:`NotACommand` for a non-command and :class:`HistoryAsOfUnset` for
    a dataflow without ``as_of``.
    """
    return _reduce(commands).commands


def _reduce(commands: Iterable[ComputeCommand]) -> _Reduced:
    hello: Hello | None = None
    create_instance: CreateInstance | None = None
    init_complete: InitializationComplete | None = None
    configs: list[UpdateConfiguration] = []
    created: list[CreateDataflow] = []
    scheduled: list[Schedule] = []
    final: dict[_IdKey, AllowCompaction] = {}
    peeks: dict[int, Peek] = {}  # keyed by uuid.int: cheaper to hash, same order
    writes: dict[_IdKey, AllowWrites] = {}

    # 1. Fold into accumulators (most frequent kinds first).
    for cmd in commands:
        if type(cmd) is AllowCompaction:
            gid = cmd.id
            final[gid.namespace, gid.value] = cmd
        elif type(cmd) is Peek:
            peeks[cmd.peek.uuid.int] = cmd
        elif type(cmd) is CancelPeek:
            peeks.pop(cmd.uuid.int, None)
        elif type(cmd) is CreateDataflow:
            created.append(cmd)
        elif type(cmd) is Schedule:
            scheduled.append(cmd)
        elif type(cmd) is AllowWrites:
            gid = cmd.id
            writes.setdefault((gid.namespace, gid.value), cmd)
        elif type(cmd) is UpdateConfiguration:
            configs.append(cmd)
        elif type(cmd) is Hello:
            hello = cmd
        elif type(cmd) is CreateInstance:
            create_instance = cmd
        elif type(cmd) is InitializationComplete:
            init_complete = cmd
        else:
            raise NotACommand(f"not a compute command: {cmd!r}")

    # 2-3. Advance each dataflow's as_of to its exports' meet; drop the fully dropped ones.
    retained: list[CreateDataflow] = []
    # Exports of retained dataflows -> dataflow index; the exports dropped on their own are
    # removed only after the Schedules are filtered (a retained dataflow needs all its Schedules).
    live_exports: dict[_IdKey, int] = {}
    dropped_exports: set[_IdKey] = set()
    for index, cmd in enumerate(created):
        dataflow = cmd.dataflow
        as_of = dataflow.as_of
        if as_of is None:
            raise HistoryAsOfUnset(f"dataflow {dataflow.debug_name!r} has no as_of")
        index_exports = dataflow.index_exports
        if len(index_exports) == 1 and not dataflow.sink_exports:
            # One export (the common case): its final frontier, if any, always folds into the as_of.
            gid = index_exports[0].id
            export: _IdKey = (gid.namespace, gid.value)
            compaction = final.pop(export, None)
            if compaction is not None:
                frontier = compaction.frontier
                if frontier != as_of and as_of.le(frontier):
                    if not frontier:
                        continue
                    cmd = _with_as_of(dataflow, frontier)
            if as_of:
                retained.append(cmd)
                live_exports[export] = index
            continue
        exports = [(e.id.namespace, e.id.value) for e in index_exports]
        exports.extend([(s.id.namespace, s.id.value) for s in dataflow.sink_exports])
        if not exports:
            continue  # the meet over no exports is []: nothing of the dataflow remains
        finals = [final.get(e) for e in exports]
        if finals.count(None) == len(finals) and as_of:
            # No export compacted since the dataflow was created or last reduced: unchanged.
            retained.append(cmd)
            for export in exports:
                live_exports[export] = index
            continue
        # The meet of the exports' final frontiers (the as_of for exports without one).
        new_as_of = _EMPTY
        for compaction in finals:
            frontier = as_of if compaction is None else compaction.frontier
            if frontier is not new_as_of:
                new_as_of = new_as_of.meet(frontier)
        clamped = not as_of.le(new_as_of)
        if clamped:
            new_as_of = _clamped_meet(as_of, finals)
        for export, compaction in zip(exports, finals, strict=True):
            if compaction is not None:
                frontier = compaction.frontier
                if (
                    frontier is new_as_of
                    or frontier == new_as_of
                    or (clamped and frontier.le(as_of))
                ):
                    # Folded into the as_of, or behind it (a no-op on the replica).
                    del final[export]
                elif not frontier:
                    dropped_exports.add(export)
        if not new_as_of:
            continue
        if new_as_of != as_of:
            cmd = _with_as_of(dataflow, new_as_of)
        retained.append(cmd)
        for export in exports:
            live_exports[export] = index

    # 4. Rebuild in replay order.
    out: list[ComputeCommand] = []
    if hello is not None:
        out.append(hello)
    if create_instance is not None:
        out.append(create_instance)
    if configs:
        merged = _UNSET
        for config in configs:
            merged = merged.update(config.params)
        if not merged.all_unset():
            out.append(
                configs[0]
                if len(configs) == 1 and configs[0].params == merged
                else UpdateConfiguration(merged)
            )
    out.extend(retained)
    out.extend([s for s in scheduled if (s.id.namespace, s.id.value) in live_exports])
    for export in dropped_exports:
        live_exports.pop(export, None)
    if peeks:
        out.extend([peeks[u] for u in sorted(peeks)])
    if final:
        out.extend(sorted(final.values(), key=_by_id))
    if writes:
        out.extend(sorted([w for i, w in writes.items() if i in live_exports], key=_by_id))
    if init_complete is not None:
        out.append(init_complete)
    return _Reduced(out, live_exports, set(peeks))


def _clamped_meet(as_of: Antichain, finals: list[AllowCompaction | None]) -> Antichain:
    """The meet of the exports' final frontiers, each first joined with ``as_of``.

    Compaction never moves back, so a frontier behind the ``as_of`` counts as the ``as_of``.
    """
    new_as_of = _EMPTY
    for compaction in finals:
        frontier = as_of if compaction is None else as_of.join(compaction.frontier)
        new_as_of = new_as_of.meet(frontier)
    return new_as_of


class CommandHistory:
    """The commands sent on one instance, reduced whenever the history has doubled.

    ``push`` appends a command and, once the history is longer than twice its
    length after the last reduction, calls :meth:`reduce`; the first push
    therefore reduces at once. Iterating yields the commands in order (a
    snapshot: pushing while iterating is safe).

    The history keeps ``live_dataflow_count`` and ``live_peek_count`` current
    on every push, for metrics and for sizing; for sequences that respect the
    protocol's dependency rules they equal what :meth:`reduce` would keep.
    """

    __slots__ = (
        "_commands",
        "_export_owner",
        "_has_create_instance",
        "_has_hello",
        "_live_peeks",
        "_next_key",
        "_reduce_above",
        "_reduced_count",
        "_remaining",
    )

    def __init__(self) -> None:
        self._commands: list[ComputeCommand] = []
        self._reduced_count = 0
        self._reduce_above = 0
        self._has_hello = False
        self._has_create_instance = False
        self._live_peeks: set[int] = set()  # uuid.int of each live peek
        # Live dataflows: export id -> dataflow key, and key -> number of exports not yet dropped.
        self._export_owner: dict[_IdKey, int] = {}
        self._remaining: dict[int, int] = {}
        self._next_key = 0

    # -- recording -------------------------------------------------------------------

    def push(self, cmd: ComputeCommand) -> None:
        """Append ``cmd``, then reduce if the history has more than doubled since the last reduction.

        Raises :class:`HistoryRepeatsHello` / :class:`HistoryRepeatsCreateInstance`
        for a second one of those, :class:`HistoryAsOfUnset` for a dataflow
        without ``as_of``, :class:`NotACommand` for anything else that is not a
        compute command; the history is then unchanged.
        """
        if type(cmd) is AllowCompaction:
            if not cmd.frontier:
                gid = cmd.id
                self._drop_export((gid.namespace, gid.value))
        elif type(cmd) is Peek:
            self._live_peeks.add(cmd.peek.uuid.int)
        elif type(cmd) is CancelPeek:
            self._live_peeks.discard(cmd.uuid.int)
        elif type(cmd) is CreateDataflow:
            self._add_dataflow(cmd.dataflow)
        elif type(cmd) not in _PLAIN_KINDS:
            if type(cmd) is Hello:
                if self._has_hello:
                    raise HistoryRepeatsHello(
                        "the history already holds a Hello; a new iteration needs a new history"
                    )
                self._has_hello = True
            elif type(cmd) is CreateInstance:
                if self._has_create_instance:
                    raise HistoryRepeatsCreateInstance("the history already holds a CreateInstance")
                self._has_create_instance = True
            else:
                raise NotACommand(f"not a compute command: {cmd!r}")
        commands = self._commands
        commands.append(cmd)
        if len(commands) > self._reduce_above:
            self.reduce()

    def _add_dataflow(self, dataflow: DataflowDescription) -> None:
        as_of = dataflow.as_of
        if as_of is None:
            raise HistoryAsOfUnset(f"CreateDataflow {dataflow.debug_name!r} has no as_of")
        if not as_of:
            return  # as_of [] never runs; reduction drops it.
        exports = {(gid.namespace, gid.value) for gid in dataflow.export_ids}
        if not exports:
            return
        key = self._next_key
        self._next_key = key + 1
        owner = self._export_owner
        for export in exports:
            owner[export] = key
        self._remaining[key] = len(exports)

    def _drop_export(self, export: _IdKey) -> None:
        key = self._export_owner.pop(export, None)
        if key is None:
            return
        remaining = self._remaining[key] - 1
        if remaining:
            self._remaining[key] = remaining
        else:
            del self._remaining[key]

    # -- reduction -------------------------------------------------------------------

    def reduce(self) -> None:
        """Reduce the history in place (docs/reference/compute.md section 8.2; see the module docstring)."""
        reduced = _reduce(self._commands)
        self._commands = reduced.commands
        self._reduced_count = len(reduced.commands)
        self._reduce_above = 2 * self._reduced_count
        self._live_peeks = reduced.live_peeks
        # Resynchronise the live-dataflow counts with what the reduction kept.
        owner = reduced.live_exports
        remaining: dict[int, int] = {}
        for key in owner.values():
            remaining[key] = remaining.get(key, 0) + 1
        self._export_owner = owner
        self._remaining = remaining
        self._next_key = max(remaining, default=-1) + 1

    def discard_peeks(self) -> None:
        """Remove every ``Peek`` and ``CancelPeek`` (a replica does this before reconciling)."""
        self._commands = [
            c for c in self._commands if type(c) is not Peek and type(c) is not CancelPeek
        ]
        self._live_peeks = set()

    def update_source_uppers(self, uppers: Mapping[GlobalId, Antichain]) -> None:
        """Set every dataflow's source-import ``upper`` to the given current write frontiers.

        Sources not in ``uppers`` keep their upper; dataflows whose imports do
        not change are kept as the same objects.
        """
        if not uppers:
            return
        commands = self._commands
        for i, cmd in enumerate(commands):
            if type(cmd) is not CreateDataflow:
                continue
            dataflow = cmd.dataflow
            imports = dataflow.source_imports
            if not any(s.id in uppers and uppers[s.id] != s.upper for s in imports):
                continue
            new_imports = tuple(
                replace(s, upper=uppers[s.id]) if s.id in uppers else s for s in imports
            )
            commands[i] = CreateDataflow(replace(dataflow, source_imports=new_imports))

    # -- inspection ------------------------------------------------------------------

    def __iter__(self) -> Iterator[ComputeCommand]:
        return iter(tuple(self._commands))

    def __len__(self) -> int:
        return len(self._commands)

    @property
    def reduced_count(self) -> int:
        """The history's length right after the last reduction (0 before the first)."""
        return self._reduced_count

    @property
    def live_dataflow_count(self) -> int:
        """Dataflows in the history with at least one export not yet dropped."""
        return len(self._remaining)

    @property
    def live_peek_count(self) -> int:
        """Peeks in the history not yet cancelled."""
        return len(self._live_peeks)

    def __repr__(self) -> str:
        return (
            f"CommandHistory(len={len(self._commands)}, reduced_count={self._reduced_count}, "
            f"live_dataflows={self.live_dataflow_count}, live_peeks={self.live_peek_count})"
        )
