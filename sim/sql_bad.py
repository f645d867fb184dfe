"""Statements PostgreSQL refuses, each with the SQLSTATE it refuses them with.

The SQL clients (:mod:`.sql_clients`) send these beside their good statements
(the ``sql_bad`` action), so the front end's refusals -- binding, typing,
syntax, data exceptions, an aborted transaction block -- run under the run's
faults, and the checks see what a refusal must do: come back typed, with
PostgreSQL's SQLSTATE, leave the session usable, and change nothing (a
refused write whose rows landed is caught by ``no_phantom_writes``: no
acknowledged or in-doubt append wrote them).

The expected SQLSTATE is the template's, decided when the defect is planted;
nothing here asks the product. ``tests/sim/test_sim_sql_bad.py`` runs every
template against a real PostgreSQL to hold the expectations to it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tidegate.spec.plan import Schema

from .choices import ChoiceSource, pick
from .sql_gen import QueryInput

__all__ = [
    "WRAPS",
    "BadStatement",
    "draw_bad_read",
    "draw_bad_write",
    "read_kinds",
    "sql_literal",
    "write_kinds",
]


@dataclass(frozen=True)
class BadStatement:
    """A statement with one planted defect."""

    kind: str
    sql: str
    sqlstate: str
    """What PostgreSQL answers it with."""
    reads: tuple[str, ...] = ()
    """The relations it names (a client may drop one meanwhile: then ``42P01`` is right too)."""
    table: str | None = None
    """A write: the table it targets."""
    rows: tuple[tuple[Any, ...], ...] = ()
    """A write: the well-formed rows it carries, none of which may land."""
    block: bool = False
    """A ``BEGIN ... COMMIT`` block: the session must be rolled back after the refusal."""
    empty_ok: bool = False
    """An answer with no rows is right too (a run-time error PostgreSQL raises per row)."""
    simple: bool = False
    """Only the simple query protocol answers ``sqlstate`` (the extended one refuses the
    ``Bind`` first: ``08P01``), so it is sent that way; so is a script of several statements."""

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "sql": self.sql,
            "sqlstate": self.sqlstate,
            "reads": list(self.reads),
            "table": self.table,
            "rows": [list(r) for r in self.rows],
            "block": self.block,
            "empty_ok": self.empty_ok,
            "simple": self.simple,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> BadStatement:
        return cls(
            kind=str(d["kind"]),
            sql=str(d["sql"]),
            sqlstate=str(d["sqlstate"]),
            reads=tuple(d.get("reads", ())),
            table=d.get("table"),
            rows=tuple(tuple(r) for r in d.get("rows", ())),
            block=bool(d.get("block", False)),
            empty_ok=bool(d.get("empty_ok", False)),
            simple=bool(d.get("simple", False)),
        )


def _cols(schema: Schema, scalar: str) -> list[str]:
    return [c.name for c in schema.columns if c.type.scalar.value == scalar]


def sql_literal(v: Any) -> str:
    """A value of the simulated tables (NULL, a boolean, text, a number) as a SQL literal."""
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    return str(v)


_Read = Callable[[ChoiceSource, QueryInput, Sequence[QueryInput]], BadStatement | None]


def _unknown_relation(s: ChoiceSource, r: QueryInput, _: Sequence[QueryInput]) -> BadStatement:
    return BadStatement("unknown_relation", f"SELECT * FROM nx_rel{s.integer(0, 99)}", "42P01")


def _unknown_column(s: ChoiceSource, r: QueryInput, _: Sequence[QueryInput]) -> BadStatement:
    return BadStatement("unknown_column", f"SELECT nx_col FROM {r.name}", "42703", (r.name,))


def _syntax(s: ChoiceSource, r: QueryInput, _: Sequence[QueryInput]) -> BadStatement:
    form = pick(
        s,
        (
            f"SELECT * FROM {r.name} )",
            f"SELECT * FROM {r.name} WHERE",
            f"SELEC * FROM {r.name}",
            f"SELECT * FROM {r.name} ORDER BY",
            f"SELECT (* FROM {r.name}",
        ),
    )
    return BadStatement("syntax", form, "42601", (r.name,))


def _text_plus_int(s: ChoiceSource, r: QueryInput, _: Sequence[QueryInput]) -> BadStatement | None:
    texts = _cols(r.schema, "string")
    if not texts:
        return None
    return BadStatement(
        "operator_types", f"SELECT {pick(s, texts)} + 1 FROM {r.name}", "42883", (r.name,)
    )


def _not_of_int(s: ChoiceSource, r: QueryInput, _: Sequence[QueryInput]) -> BadStatement | None:
    ints = _cols(r.schema, "int64")
    if not ints:
        return None
    return BadStatement(
        "not_boolean", f"SELECT NOT {pick(s, ints)} FROM {r.name}", "42804", (r.name,)
    )


def _sum_of_text(s: ChoiceSource, r: QueryInput, _: Sequence[QueryInput]) -> BadStatement | None:
    texts = _cols(r.schema, "string")
    if not texts:
        return None
    return BadStatement(
        "function_types", f"SELECT sum({pick(s, texts)}) FROM {r.name}", "42883", (r.name,)
    )


def _ungrouped(s: ChoiceSource, r: QueryInput, _: Sequence[QueryInput]) -> BadStatement:
    col = pick(s, [c.name for c in r.schema.columns])
    return BadStatement("grouping", f"SELECT {col}, count(*) FROM {r.name}", "42803", (r.name,))


def _union_types(s: ChoiceSource, r: QueryInput, rs: Sequence[QueryInput]) -> BadStatement | None:
    ints = _cols(r.schema, "int64")
    texts = [(o.name, c) for o in rs for c in _cols(o.schema, "string")]
    if not ints or not texts:
        return None
    other, text = pick(s, texts)
    return BadStatement(
        "union_types",
        f"SELECT {pick(s, ints)} FROM {r.name} UNION SELECT {text} FROM {other}",
        "42804",
        (r.name, other),
    )


def _order_position(s: ChoiceSource, r: QueryInput, _: Sequence[QueryInput]) -> BadStatement:
    n = len(r.schema.columns) + s.integer(1, 3)
    return BadStatement(
        "order_position", f"SELECT * FROM {r.name} ORDER BY {n}", "42P10", (r.name,)
    )


def _negative_limit(s: ChoiceSource, r: QueryInput, _: Sequence[QueryInput]) -> BadStatement:
    n = s.integer(1, 5)
    return BadStatement("negative_limit", f"SELECT * FROM {r.name} LIMIT -{n}", "2201W", (r.name,))


def _bad_literal(s: ChoiceSource, r: QueryInput, _: Sequence[QueryInput]) -> BadStatement | None:
    ints = _cols(r.schema, "int64")
    if not ints:
        return None
    sql = f"SELECT * FROM {r.name} WHERE {pick(s, ints)} = 'x{s.integer(0, 9)}'"
    return BadStatement("bad_literal", sql, "22P02", (r.name,))


def _division_by_zero(s: ChoiceSource, r: QueryInput, _: Sequence[QueryInput]) -> BadStatement:
    ints = _cols(r.schema, "int64")
    if ints and s.integer(0, 1):
        # Raised per row: a relation with none answers no rows.
        sql = f"SELECT {pick(s, ints)} / 0 FROM {r.name}"
        return BadStatement("division_by_zero", sql, "22012", (r.name,), empty_ok=True)
    return BadStatement("division_by_zero", f"SELECT {s.integer(1, 9)} / 0", "22012")


def _duplicate_alias(s: ChoiceSource, r: QueryInput, _: Sequence[QueryInput]) -> BadStatement:
    return BadStatement("duplicate_alias", f"SELECT 1 FROM {r.name}, {r.name}", "42712", (r.name,))


def _unknown_function(s: ChoiceSource, r: QueryInput, _: Sequence[QueryInput]) -> BadStatement:
    col = pick(s, [c.name for c in r.schema.columns])
    return BadStatement(
        "unknown_function", f"SELECT nx_fn({col}) FROM {r.name}", "42883", (r.name,)
    )


def _ambiguous(s: ChoiceSource, r: QueryInput, rs: Sequence[QueryInput]) -> BadStatement | None:
    mine = {c.name for c in r.schema.columns}
    pairs = [
        (o.name, c.name) for o in rs if o.name != r.name for c in o.schema.columns if c.name in mine
    ]
    if not pairs:
        return None
    other, col = pick(s, pairs)
    sql = f"SELECT {col} FROM {r.name}, {other}"
    return BadStatement("ambiguous_column", sql, "42702", (r.name, other))


def _no_parameter(s: ChoiceSource, r: QueryInput, _: Sequence[QueryInput]) -> BadStatement:
    sql = f"SELECT * FROM {r.name} WHERE $1"
    return BadStatement("undefined_parameter", sql, "42P02", (r.name,), simple=True)


_READS: dict[str, _Read] = {
    "unknown_relation": _unknown_relation,
    "unknown_column": _unknown_column,
    "syntax": _syntax,
    "operator_types": _text_plus_int,
    "not_boolean": _not_of_int,
    "function_types": _sum_of_text,
    "grouping": _ungrouped,
    "union_types": _union_types,
    "order_position": _order_position,
    "negative_limit": _negative_limit,
    "bad_literal": _bad_literal,
    "division_by_zero": _division_by_zero,
    "duplicate_alias": _duplicate_alias,
    "unknown_function": _unknown_function,
    "ambiguous_column": _ambiguous,
    "undefined_parameter": _no_parameter,
}


def read_kinds() -> list[str]:
    """The kinds of defect a read may carry."""
    return list(_READS)


def draw_bad_read(source: ChoiceSource, relations: Sequence[QueryInput]) -> BadStatement | None:
    """A query with one defect, over one of ``relations`` (``None`` if the drawn kind needs
    columns none of them has)."""
    if not relations:
        return None
    r = pick(source, list(relations))
    return _READS[pick(source, list(_READS))](source, r, relations)


def _row(source: ChoiceSource, schema: Schema, marker: Callable[[], int]) -> tuple[Any, ...]:
    """A well-formed row, its first integer column a unique marker (rows that land unasked for
    are then told apart from every other client's)."""
    row: list[Any] = []
    marked = False
    for c in schema.columns:
        scalar = c.type.scalar.value
        if scalar == "int64" and not marked:
            row.append(marker())
            marked = True
        elif scalar == "string":
            row.append(f"bad{source.integer(0, 9)}")
        elif scalar == "bool":
            row.append(bool(source.integer(0, 1)))
        elif scalar == "int64":
            row.append(source.integer(0, 9))
        else:
            row.append(None)
    return tuple(row)


def _values(row: Sequence[Any]) -> str:
    return "(" + ", ".join(sql_literal(v) for v in row) + ")"


def _too_many(
    s: ChoiceSource, t: str, schema: Schema, m: Callable[[], int]
) -> tuple[str, str, tuple[tuple[Any, ...], ...]] | None:
    row = _row(s, schema, m)
    return f"INSERT INTO {t} VALUES {_values((*row, s.integer(0, 9)))}", "42601", ()


def _bad_text(
    s: ChoiceSource, t: str, schema: Schema, m: Callable[[], int]
) -> tuple[str, str, tuple[tuple[Any, ...], ...]] | None:
    ints = [i for i, c in enumerate(schema.columns) if c.type.scalar.value == "int64"]
    if not ints:
        return None
    good = tuple(_row(s, schema, m) for _ in range(s.integer(0, 2)))
    bad = list(_row(s, schema, m))
    bad[pick(s, ints)] = f"x{s.integer(0, 9)}"
    rows = [*good, tuple(bad)]
    sql = f"INSERT INTO {t} VALUES {', '.join(_values(r) for r in rows)}"
    return sql, "22P02", good


def _not_null(
    s: ChoiceSource, t: str, schema: Schema, m: Callable[[], int]
) -> tuple[str, str, tuple[tuple[Any, ...], ...]] | None:
    required = [c.name for c in schema.columns if not c.type.nullable]
    if not required or len(schema.columns) < 2:
        return None
    missing = pick(s, required)
    row = _row(s, schema, m)
    keep = [(c.name, v) for c, v in zip(schema.columns, row, strict=True) if c.name != missing]
    sql = (
        f"INSERT INTO {t} ({', '.join(n for n, _ in keep)}) VALUES {_values([v for _, v in keep])}"
    )
    return sql, "23502", ()


def _unknown_target(
    s: ChoiceSource, t: str, schema: Schema, m: Callable[[], int]
) -> tuple[str, str, tuple[tuple[Any, ...], ...]] | None:
    return f"INSERT INTO {t} (nx_col) VALUES ({m()})", "42703", ()


_WRITES = {
    "insert_too_many": _too_many,
    "insert_bad_text": _bad_text,
    "insert_not_null": _not_null,
    "insert_unknown_column": _unknown_target,
}


def write_kinds() -> list[str]:
    """The kinds of defect a write may carry (each also inside a ``BEGIN ... COMMIT`` block)."""
    return list(_WRITES)


WRAPS = ("alone", "block", "script")
"""How a bad write is sent: by itself; after a good ``INSERT`` in a ``BEGIN ... COMMIT`` block;
after a good ``INSERT`` in a script of several statements (one implicit transaction)."""


def draw_bad_write(
    source: ChoiceSource,
    writable: Sequence[tuple[str, Schema]],
    marker: Callable[[], int],
    *,
    wrap: str = "alone",
) -> BadStatement | None:
    """An ``INSERT`` with one defect into one of ``writable``, sent as ``wrap`` says (see
    :data:`WRAPS`): the refusal must take the good ``INSERT``'s rows back with it."""
    if not writable:
        return None
    table, schema = pick(source, list(writable))
    kind = pick(source, list(_WRITES))
    drawn = _WRITES[kind](source, table, schema, marker)
    if drawn is None:
        return None
    sql, sqlstate, rows = drawn
    if wrap == "alone":
        return BadStatement(kind, sql, sqlstate, (table,), table, rows)
    good = _row(source, schema, marker)
    first = f"INSERT INTO {table} VALUES {_values(good)}"
    if wrap == "block":
        text = f"BEGIN; {first}; {sql}; COMMIT"
    else:
        text = f"{first}; {sql}"
    block = wrap == "block"
    return BadStatement(
        f"{kind}_in_{wrap}", text, sqlstate, (table,), table, (good, *rows), block, simple=True
    )
