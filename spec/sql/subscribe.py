"""``SUBSCRIBE``'s options and output, as Materialize has them.

:func:`parse_subscribe_tail` reads the clauses after the subscribed relation,
each at most once and in any order (Materialize's own clients write them in
several orders): ``ENVELOPE UPSERT (KEY (k, ...))`` or ``ENVELOPE DEBEZIUM
(KEY (k, ...))``, ``WITH (SNAPSHOT [= bool], PROGRESS [= bool])``, ``AS OF
[AT LEAST] t`` and ``UP TO t``. ``WITHIN TIMESTAMP ORDER BY`` is refused
[UnsupportedSql]; an unknown option, a repeated one or a clause twice is a
syntax error [SqlSyntaxError]; an option value that is not a boolean is
[InvalidParameterValue].

:class:`SubscribeOutput` is what the rows look like (Materialize's
``SUBSCRIBE`` page and its adapter's batch formatting):

* ``mz_timestamp``, then ``mz_progressed`` with ``PROGRESS``, then
  ``mz_diff`` and the relation's columns;
* with an envelope, ``mz_state`` instead of ``mz_diff``, then the key columns
  in the order the ``KEY`` names them, then the other columns (``DEBEZIUM``:
  ``before_<col>`` and ``after_<col>`` of each). The updates of one time and
  key become one row: a lone insertion is ``upsert`` (``DEBEZIUM``:
  ``insert``), a deletion and an insertion ``upsert``, a lone deletion
  ``delete`` with ``NULL`` values (``DEBEZIUM`` keeps the old ones in
  ``before_``), anything else ``key_violation`` with ``NULL`` values;
* with ``PROGRESS``, a first row at the as_of and one after each batch whose
  upper passed the as_of: ``mz_progressed`` true, the timestamp the new
  frontier, every other column ``NULL``.

Everything here is pure: the runtime feeds batches in and sends rows out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from ..errors import (
    DuplicateColumn,
    InvalidParameterValue,
    SqlSyntaxError,
    UndefinedColumn,
    UnsupportedSql,
)
from ..frontier import Row, row_sort_key
from ._tokens import Token, tokens
from .ast import SubscribeEnvelope

__all__ = [
    "OutputColumn",
    "SubscribeOutput",
    "SubscribeTail",
    "parse_subscribe_tail",
    "subscribe_output",
]

OPTIONS = ("PROGRESS", "SNAPSHOT")
"""The ``WITH`` options of ``SUBSCRIBE`` (both booleans)."""


@dataclass(frozen=True)
class SubscribeTail:
    """The clauses after a ``SUBSCRIBE``'s relation."""

    as_of: int | None = None
    at_least: bool = False
    up_to: int | None = None
    snapshot: bool = True
    progress: bool = False
    envelope: SubscribeEnvelope | None = None


def parse_subscribe_tail(sql: str, start: int) -> SubscribeTail:
    """The clauses of ``sql[start:]`` (the text after the relation); positions in errors are
    1-based in ``sql`` [SqlSyntaxError, InvalidParameterValue, UnsupportedSql]."""
    try:
        found = tokens(sql[start:])
    except SqlSyntaxError as e:  # a character no clause has: point at it in the statement
        pos = None if e.position is None else e.position + start
        raise SqlSyntaxError(e.message, position=pos, sql=sql) from None
    toks = [Token(t.kind, t.text, t.position + start) for t in found]
    p = _Parser(sql, toks)
    seen: set[str] = set()
    out: dict[str, Any] = {}
    while not p.done():
        t = p.peek()
        clause = t.upper
        if clause == "AS":
            clause = "AS OF"
        elif clause == "UP":
            clause = "UP TO"
        if clause in seen:
            raise SqlSyntaxError(f"{clause} given twice", position=t.position, sql=sql)
        seen.add(clause)
        if clause == "ENVELOPE":
            out["envelope"] = p.envelope()
        elif clause == "WITH":
            out.update(p.options())
        elif clause == "AS OF":
            p.words("AS", "OF")
            out["at_least"] = p.maybe_words("AT", "LEAST")
            out["as_of"] = p.time("AS OF")
        elif clause == "UP TO":
            p.words("UP", "TO")
            out["up_to"] = p.time("UP TO")
        elif clause == "WITHIN":
            raise UnsupportedSql("SUBSCRIBE ... WITHIN TIMESTAMP ORDER BY", position=t.position)
        else:
            raise SqlSyntaxError(
                f'syntax error at or near "{t.text}"',
                position=t.position,
                sql=sql,
                hint="SUBSCRIBE takes ENVELOPE UPSERT | DEBEZIUM (KEY (...)), WITH (...), "
                "AS OF and UP TO after its relation",
            )
    return SubscribeTail(**out)


class _Parser:
    def __init__(self, sql: str, toks: list[Token]) -> None:
        self.sql = sql
        self.toks = toks
        self.i = 0

    def done(self) -> bool:
        return self.i >= len(self.toks)

    def peek(self) -> Token:
        return self.toks[self.i]

    def _error(self, expected: str) -> SqlSyntaxError:
        if self.done():
            return SqlSyntaxError(
                f"unexpected end of SUBSCRIBE: expected {expected}", position=len(self.sql)
            )
        t = self.peek()
        return SqlSyntaxError(
            f'syntax error at or near "{t.text}": expected {expected}',
            position=t.position,
            sql=self.sql,
        )

    def take(self) -> Token:
        t = self.peek()
        self.i += 1
        return t

    def words(self, *words: str) -> None:
        for w in words:
            if self.done() or self.peek().upper != w:
                raise self._error(w)
            self.i += 1

    def maybe_words(self, *words: str) -> bool:
        n = len(words)
        if [t.upper for t in self.toks[self.i : self.i + n]] != list(words):
            return False
        self.i += n
        return True

    def punct(self, ch: str) -> None:
        if self.done() or self.peek().text != ch or self.peek().kind != "punct":
            raise self._error(f'"{ch}"')
        self.i += 1

    def at_punct(self, ch: str) -> bool:
        return not self.done() and self.peek().kind == "punct" and self.peek().text == ch

    def time(self, clause: str) -> int:
        if self.done() or self.peek().kind != "number" or self.peek().text.startswith("-"):
            if self.done():
                raise self._error(f"a timestamp after {clause}")
            t = self.peek()
            raise SqlSyntaxError(
                f'{clause} needs a timestamp (an integer), got "{t.text}"',
                position=t.position,
                sql=self.sql,
            )
        return int(self.take().text)

    def ident(self) -> str:
        if self.done() or self.peek().kind not in ("word", "quoted"):
            raise self._error("a column name")
        t = self.take()
        if t.kind == "quoted":
            return t.text[1:-1].replace('""', '"')
        return t.text.lower()

    def envelope(self) -> SubscribeEnvelope:
        start = self.take().position
        if self.done() or self.peek().upper not in ("UPSERT", "DEBEZIUM"):
            raise self._error("UPSERT or DEBEZIUM after ENVELOPE")
        kind: Literal["upsert", "debezium"] = (
            "upsert" if self.take().upper == "UPSERT" else "debezium"
        )
        self.punct("(")
        self.words("KEY")
        self.punct("(")
        key = [self.ident()]
        while self.at_punct(","):
            self.i += 1
            key.append(self.ident())
        self.punct(")")
        self.punct(")")
        return SubscribeEnvelope(kind, tuple(key), start)

    def options(self) -> dict[str, bool]:
        self.words("WITH")
        self.punct("(")
        got: dict[str, bool] = {}
        while True:
            if self.done() or self.peek().kind != "word" or self.peek().upper not in OPTIONS:
                raise self._error("one of " + " or ".join(OPTIONS))
            name = self.take()
            if name.upper.lower() in got:
                raise SqlSyntaxError(
                    f"{name.upper} specified more than once", position=name.position, sql=self.sql
                )
            if self.at_punct("="):
                self.i += 1
            value = True
            if not self.at_punct(",") and not self.at_punct(")"):
                if self.done():
                    raise self._error('")"')
                v = self.take()
                if v.upper not in ("TRUE", "FALSE"):
                    raise InvalidParameterValue(
                        f"invalid {name.upper}: expected a boolean, got {v.text}",
                        position=v.position,
                        sql=self.sql,
                    )
                value = v.upper == "TRUE"
            got[name.upper.lower()] = value
            if self.at_punct(","):
                self.i += 1
                continue
            self.punct(")")
            return got


# -- output --------------------------------------------------------------------------------------

OutputColumn: TypeAlias = Literal["mz_timestamp", "mz_progressed", "mz_diff", "mz_state"] | int
"""Where an output column's values come from: a metadata column, or the relation's column at
that index."""


@dataclass(frozen=True)
class SubscribeOutput:
    """The shape of a ``SUBSCRIBE``'s rows (see the module docstring)."""

    names: tuple[str, ...]
    """The output columns' names."""
    sources: tuple[OutputColumn, ...]
    """What each output column holds."""
    progress: bool
    envelope: Literal["upsert", "debezium"] | None
    key: tuple[int, ...]
    """The envelope's key columns, as indexes into the relation's columns."""
    arity: int

    def initial(self, as_of: int) -> list[Row]:
        """The rows before any batch: with ``PROGRESS``, one at the as_of."""
        return [self._progress_row(as_of)] if self.progress else []

    def rows(
        self, updates: Iterable[tuple[Any, Row, int]], upper: Sequence[Any], as_of: int
    ) -> list[Row]:
        """The rows of one batch: its consolidated ``(time, row, diff)`` updates, and (with
        ``PROGRESS``) a progress row at its upper ``upper`` (its elements) if that passed the
        as_of."""
        ordered = sorted(updates, key=lambda u: (u[0], self._order(u[1]), u[2]))
        out = self._data(ordered) if self.envelope is not None else self._diffs(ordered)
        if self.progress and upper and int(upper[0]) > as_of:
            out.append(self._progress_row(int(upper[0])))
        return out

    def _order(self, row: Row) -> Any:
        if self.envelope is None:
            return row_sort_key(row)
        return (row_sort_key(tuple(row[k] for k in self.key)), row_sort_key(row))

    def _head(self, t: int) -> tuple[Any, ...]:
        return (t, False) if self.progress else (t,)

    def _diffs(self, ordered: list[tuple[Any, Row, int]]) -> list[Row]:
        return [(*self._head(int(t)), int(d), *row) for t, row, d in ordered]

    def _data(self, ordered: list[tuple[Any, Row, int]]) -> list[Row]:
        out: list[Row] = []
        i = 0
        while i < len(ordered):
            t, first, _d = ordered[i]
            key = tuple(first[k] for k in self.key)
            group = [ordered[i]]
            i += 1
            while i < len(ordered) and ordered[i][0] == t and self._key_of(ordered[i][1]) == key:
                group.append(ordered[i])
                i += 1
            group.sort(key=lambda u: u[2])
            out.append((*self._head(int(t)), *self._state(key, [(r, d) for _t, r, d in group])))
        return out

    def _key_of(self, row: Row) -> tuple[Any, ...]:
        return tuple(row[k] for k in self.key)

    def _values(self, row: Row | None) -> tuple[Any, ...]:
        n = self.arity - len(self.key)
        if row is None:
            return (None,) * n
        return tuple(v for i, v in enumerate(row) if i not in self.key)

    def _state(self, key: tuple[Any, ...], group: list[tuple[Row, int]]) -> tuple[Any, ...]:
        debezium = self.envelope == "debezium"
        if len(group) == 1 and group[0][1] == 1:
            state, before, after = ("insert" if debezium else "upsert"), None, group[0][0]
        elif len(group) == 1 and group[0][1] == -1:
            state, before, after = "delete", group[0][0], None
        elif len(group) == 2 and group[0][1] == -1 and group[1][1] == 1:
            state, before, after = "upsert", group[0][0], group[1][0]
        else:
            state, before, after = "key_violation", None, None
        if debezium:
            return (state, *key, *self._values(before), *self._values(after))
        return (state, *key, *self._values(after))

    def _progress_row(self, t: int) -> Row:
        return (t, True, *([None] * (len(self.names) - 2)))


def subscribe_output(
    names: Sequence[str],
    *,
    progress: bool = False,
    envelope: SubscribeEnvelope | None = None,
    sql: str | None = None,
) -> SubscribeOutput:
    """The output of a ``SUBSCRIBE`` of a relation with columns ``names``; an envelope's key
    must name distinct columns of it [UndefinedColumn, DuplicateColumn]."""
    head: list[tuple[str, OutputColumn]] = [("mz_timestamp", "mz_timestamp")]
    if progress:
        head.append(("mz_progressed", "mz_progressed"))
    if envelope is None:
        cols = [*head, ("mz_diff", "mz_diff"), *((n, i) for i, n in enumerate(names))]
        return SubscribeOutput(
            tuple(n for n, _ in cols),
            tuple(s for _, s in cols),
            progress,
            None,
            (),
            len(names),
        )
    key: list[int] = []
    for k in envelope.key:
        matches = [i for i, n in enumerate(names) if n == k]
        if not matches:
            raise UndefinedColumn(
                f'column "{k}" does not exist', position=envelope.position, sql=sql
            )
        if matches[0] in key:
            raise DuplicateColumn(
                f'column "{k}" appears more than once in the KEY of ENVELOPE '
                f"{envelope.kind.upper()}",
                position=envelope.position,
                sql=sql,
            )
        key.append(matches[0])
    rest = [i for i in range(len(names)) if i not in key]
    cols = [*head, ("mz_state", "mz_state"), *((names[i], i) for i in key)]
    if envelope.kind == "debezium":
        cols += [(f"before_{names[i]}", i) for i in rest]
        cols += [(f"after_{names[i]}", i) for i in rest]
    else:
        cols += [(names[i], i) for i in rest]
    return SubscribeOutput(
        tuple(n for n, _ in cols),
        tuple(s for _, s in cols),
        progress,
        envelope.kind,
        tuple(key),
        len(names),
    )
