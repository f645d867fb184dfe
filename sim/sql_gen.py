"""Random SQL with its meaning: queries drawn from the supported language, each with its reference plan.

The SQL clients (:mod:`.sql_clients`) run what this module draws through the
product's SQL front end, and the checkers judge the answers against the
reference evaluator. The reference plan of a query is built here, from the
same draws as its text, with the plan IR's own constructors: it says what the
text means in PostgreSQL, worked out apart from :mod:`tidegate.spec.sql` (the
binder and lowering under test share no code with it). So a binder that
resolves a ``USING`` column from the wrong side, or a lowering that drops an
``OFFSET``, gives answers that differ from the reference.

What is drawn (each a *construct*, named in :data:`CONSTRUCTS` with its
weight, so a new one is a function and a line; :data:`DISABLED` lists the
ones left out and why):

* ``FROM``: a table or view; a subquery with ``ORDER BY`` over every column
  and ``LIMIT``/``OFFSET`` (a ``TopK``); ``[INNER] JOIN ... ON`` and
  ``LEFT JOIN ... ON`` an equality; ``JOIN``/``LEFT JOIN ... USING``; a comma
  join with the equality in ``WHERE``; a ``WITH`` query;
* ``SELECT``: columns (qualified, or unqualified where that is unambiguous,
  ``USING`` columns merged), arithmetic, ``COALESCE``, ``CASE``, ``||``,
  ``upper``/``lower``/``length``/``abs``, ``DISTINCT``;
* ``WHERE``/``HAVING``: comparisons, ``BETWEEN``, ``IN`` lists, ``[NOT]
  LIKE``/``ILIKE`` with ``%``, ``_`` and escapes (PostgreSQL's default
  backslash, or ``ESCAPE``), ``IS [NOT] NULL``, ``AND``/``OR``/``NOT``
  (three-valued: NULLs arise from nullable columns and outer joins);
* window functions (``row_number``, ``rank``, ``dense_rank``, ``lag``,
  ``lead``, aggregates over the default frame and ``ROWS`` frames, each
  ``OVER (PARTITION BY ... ORDER BY ...)``), the Top-K idiom ``WHERE rn <= k``
  over a subquery numbering rows, ``DISTINCT ON``;
* subqueries in expressions: scalar (uncorrelated, and correlated on an
  equality) in the select list or compared in ``WHERE``, ``[NOT] EXISTS``,
  ``x [NOT] IN (SELECT ...)`` in ``WHERE`` and as a value;
* ``GROUP BY`` with ``count(*)``, ``count``, ``count(DISTINCT ...)``,
  ``sum``, ``min``, ``max``, ``avg``; an aggregate without ``GROUP BY`` (one
  row over no rows);
* ``UNION``/``EXCEPT``/``INTERSECT``, each with and without ``ALL``;
* a top-level ``ORDER BY`` over every output column (directions and NULLS
  FIRST/LAST, PostgreSQL's defaults when unsaid) with ``LIMIT``/``OFFSET``:
  a peek's finishing, or a view's ``TopK``;
* ``$n`` parameters in place of some integer constants;
* temporal filters, when the caller gives the time (``now_ms``): ``mz_now()``
  compared with an int64 column plus a constant near that time, in ``WHERE``
  (windows ``mz_now() >= a AND mz_now() < b``, ``BETWEEN``, ``<=``, ``>``, and
  ``b > mz_now()``); the reference is a ``TemporalFilter`` evaluated at the
  peek's time.

Orders are total (every output column, in some order), so a ``LIMIT`` picks
rows the reference can name; so are the orders of window functions whose
values depend on a row's position (``row_number``, ``lag``, ``lead``, ``ROWS``
frames, ``DISTINCT ON``), one of them a query at most; the references of the
newer constructs say in their docstrings why they are independent of the
front end; constants are small so nothing overflows. The
plans read base tables through *symbolic* ids (:func:`symbol`), one per
table name, that the clients map to the catalog's ids when they run the
query: a plan saved in a run's actions stays meaningful when the shrinker
removes the actions that created other objects.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import (
    AggFunc,
    Aggregate,
    BinaryFunc,
    CallBinary,
    CallUnary,
    CallVariadic,
    Column,
    ColumnRef,
    ColumnType,
    Constant,
    Distinct,
    Filter,
    If,
    Join,
    JoinKind,
    Literal,
    Map,
    Negate,
    Plan,
    Project,
    Reduce,
    ScalarExpr,
    ScalarType,
    Schema,
    TemporalFilter,
    TemporalOp,
    Threshold,
    TopK,
    UnaryFunc,
    Union,
    VariadicFunc,
    Window,
    WindowBound,
    WindowBoundKind,
    WindowFrame,
    WindowFunc,
    WindowFuncKind,
    typecheck,
)
from tidegate.spec.protocol.types import ColumnOrder, RowSetFinishing

from .choices import ChoiceSource, chance, pick

__all__ = [
    "CONSTRUCTS",
    "DISABLED",
    "SYMBOL_BASE",
    "Query",
    "QueryInput",
    "SqlGen",
    "symbol",
]

S = ScalarType
SYMBOL_BASE = 2_000_000_000
"""Symbolic ids are transient ids from here on (far from any the runtime hands out)."""
WORDS = ("ann", "bob", "cy", "dee", "eve", "fay")
"""The strings tables hold (and constants are drawn from)."""


_PARAM = "\x00"
"""Brackets a parameter's index in text being drawn (numbered once the text is final)."""


def symbol(k: int) -> GlobalId:
    """The symbolic id of the ``k``-th base table name (see the module docstring)."""
    return GlobalId.transient(SYMBOL_BASE + k)


@dataclass(frozen=True)
class QueryInput:
    """What a query may read: ``name`` in SQL, its columns, and the reference plan of reading it
    (a table's ``Get`` of its symbol; a view's or materialized view's definition, inlined)."""

    name: str
    schema: Schema
    plan: Plan


@dataclass(frozen=True)
class Query:
    """A drawn query: its ``sql`` (``$n`` placeholders filled by ``params``), the reference
    ``plan`` of its rows (before the top-level ``ORDER BY``/``LIMIT``/``OFFSET``), the output
    columns, and those three."""

    sql: str
    plan: Plan
    names: tuple[str, ...]
    types: tuple[ColumnType, ...]
    order_by: tuple[ColumnOrder, ...] = ()
    limit: int | None = None
    offset: int = 0
    params: tuple[Any, ...] = ()
    constructs: tuple[str, ...] = ()
    """The constructs drawn (for the "sometimes" counters)."""

    def finishing(self) -> RowSetFinishing:
        """What a peek of :attr:`plan` applies (the top-level ``ORDER BY``/``LIMIT``/``OFFSET``)."""
        return RowSetFinishing(self.order_by, self.limit, self.offset)

    def relation(self) -> Plan:
        """The query as a collection (a view's meaning): ``LIMIT``/``OFFSET`` as a ``TopK``."""
        if self.limit is None and not self.offset:
            return self.plan
        return TopK(self.plan, (), self.order_by, self.limit, self.offset)

    @property
    def schema(self) -> Schema:
        return Schema(tuple(Column(n, t) for n, t in zip(self.names, self.types, strict=True)))


# -- scopes: what names mean inside a FROM ---------------------------------------------------


@dataclass
class _Col:
    qual: str | None
    """The alias that qualifies it (``None``: a merged ``USING`` column)."""
    name: str
    type: ColumnType
    pos: int
    """Its position in the FROM's plan (for a merged column: the side whose value it has)."""
    hidden: bool = False
    """A side's column that ``USING`` merged: reachable qualified only."""


@dataclass
class _From:
    """A FROM clause: its text, reference plan (every column of every input), and scope."""

    sql: str
    plan: Plan
    cols: list[_Col]
    """Every nameable column: qualified ones, and merged ``USING`` ones (qual ``None``)."""
    star: list[_Col]
    """What ``SELECT *`` gives, in order."""
    conds: list[str] = field(default_factory=list)
    """Conditions the WHERE must add (a comma join's equality; already in :attr:`plan`)."""
    ctes: list[str] = field(default_factory=list)
    """``WITH`` definitions the query must start with (``name AS (query)``)."""
    joined: bool = False
    """A join (parenthesized as another join's right side)."""
    comma: bool = False
    """A comma join: a ``JOIN`` after it binds to its last item alone (a comma binds looser),
    so its ``ON``/``USING`` could not name the items before."""

    def unqualified(self) -> dict[str, _Col]:
        """The columns an unqualified name resolves to: names exactly one column answers to
        (the sides' columns that ``USING`` merged answer only qualified)."""
        seen: dict[str, list[_Col]] = {}
        for c in self.cols:
            if not c.hidden:
                seen.setdefault(c.name, []).append(c)
        return {name: cs[0] for name, cs in seen.items() if len(cs) == 1}

    def refs(self) -> list[tuple[str, _Col]]:
        """Every way to name a column here: ``alias.col``, and ``col`` where unambiguous."""
        out = [(f"{c.qual}.{c.name}", c) for c in self.cols if c.qual is not None]
        out += sorted(self.unqualified().items())
        return out


@dataclass
class _Expr:
    sql: str
    expr: ScalarExpr
    type: ColumnType


def _lit(value: Any, scalar: ScalarType) -> _Expr:
    if value is None:
        return _Expr("NULL", Literal(None, scalar), ColumnType(scalar, True))
    if scalar is S.STRING:
        return _Expr(
            "'" + str(value).replace("'", "''") + "'",
            Literal(value, scalar),
            ColumnType(scalar, False),
        )
    if scalar is S.BOOL:
        return _Expr(
            "true" if value else "false", Literal(value, scalar), ColumnType(scalar, False)
        )
    return _Expr(str(value), Literal(value, scalar), ColumnType(scalar, False))


def _or(*parts: ScalarExpr) -> ScalarExpr:
    return CallVariadic(VariadicFunc.OR, tuple(parts))


def _and(*parts: ScalarExpr) -> ScalarExpr:
    return CallVariadic(VariadicFunc.AND, tuple(parts))


_COMPARE = {
    "=": BinaryFunc.EQ,
    "<>": BinaryFunc.NE,
    "<": BinaryFunc.LT,
    "<=": BinaryFunc.LE,
    ">": BinaryFunc.GT,
    ">=": BinaryFunc.GE,
}


# -- the generator ----------------------------------------------------------------------------


Construct = Callable[["SqlGen", int], Any]


@dataclass
class SqlGen:
    """Draws queries over ``relations`` from ``choices`` (see the module docstring).

    ``params``: whether integer constants may become ``$n`` parameters (not in view
    definitions). ``enabled``: the constructs to draw from (default: all but
    :data:`DISABLED`).
    """

    choices: ChoiceSource
    relations: Sequence[QueryInput]
    params: bool = False
    enabled: frozenset[str] | None = None
    now_ms: int | None = None
    """The simulated time the query is drawn at: temporal filters (``mz_now()`` compared with
    an int64 column plus a constant) put their bounds around it; ``None``: none are drawn."""
    temporal_per_mille: int = 300
    """How often a ``WHERE`` gets a temporal filter (when ``now_ms`` is given)."""
    temporal_choices: ChoiceSource | None = None
    """Where a temporal filter's draws come from (``None``: :attr:`choices`); the SQL clients
    keep them apart, so the rest of a query is drawn as it was without them."""
    _alias: int = 0
    _params: list[Any] = field(default_factory=list)
    _used: list[str] = field(default_factory=list)

    # -- entry points ---------------------------------------------------------------------------
    def query(self, *, top: bool = True) -> Query:
        """A whole query; with ``top``, perhaps with a top-level ORDER BY/LIMIT/OFFSET."""
        self._params = []
        self._used = []
        shape = self._pick("shape", _SHAPES)
        q = shape(self, 2)
        if top and not q.order_by and chance(self.choices, 450):
            q = self._ordered(q)
        sql, params = self._numbered(q.sql)
        return Query(
            sql,
            q.plan,
            q.names,
            q.types,
            q.order_by,
            q.limit,
            q.offset,
            params,
            tuple(self._used),
        )

    def _numbered(self, sql: str) -> tuple[str, tuple[Any, ...]]:
        """The parameters the final text uses, numbered ``$1, $2, ...`` in order of appearance
        (a fragment drawn and then left out leaves its parameters out too)."""
        parts = sql.split(_PARAM)
        out = [parts[0]]
        params: list[Any] = []
        for i in range(1, len(parts), 2):
            params.append(self._params[int(parts[i])])
            out.append(f"${len(params)}")
            out.append(parts[i + 1])
        return "".join(out), tuple(params)

    # -- helpers --------------------------------------------------------------------------------
    def _on(self, name: str) -> bool:
        return name not in DISABLED and (self.enabled is None or name in self.enabled)

    def _pick(self, kind: str, table: Sequence[tuple[str, int, Any]]) -> Any:
        options = [(n, w, f) for n, w, f in table if self._on(n)]
        total = sum(w for _, w, _ in options)
        roll = self.choices.integer(0, total - 1)
        for n, w, f in options:
            if roll < w:
                self._used.append(n)
                return f
            roll -= w
        raise AssertionError(kind)

    def _fresh(self) -> str:
        self._alias += 1
        return f"t{self._alias}"

    def _int(self, low: int = 0, high: int = 9) -> _Expr:
        value = self.choices.integer(low, high)
        if self.params and chance(self.choices, 300):
            self._params.append(value)
            self._used.append("parameter")
            marker = f"{_PARAM}{len(self._params) - 1}{_PARAM}"
            return _Expr(marker, Literal(value, S.INT64), ColumnType(S.INT64, False))
        return _lit(value, S.INT64)

    def _word(self) -> _Expr:
        return _lit(pick(self.choices, WORDS), S.STRING)

    # -- FROM -----------------------------------------------------------------------------------
    def from_item(self, depth: int) -> _From:
        if depth <= 0:
            return _table(self, depth)
        return self._pick("from", _FROMS)(self, depth)  # type: ignore[no-any-return]

    # -- expressions ----------------------------------------------------------------------------
    def column(self, f: _From, scalar: ScalarType | None = None) -> tuple[str, _Col] | None:
        refs = [(s, c) for s, c in f.refs() if scalar is None or c.type.scalar is scalar]
        return pick(self.choices, refs) if refs else None

    def value(self, f: _From, depth: int = 1) -> _Expr:
        """A scalar expression over ``f``'s columns (int64, string or bool)."""
        got = self.column(f)
        assert got is not None
        text, c = got
        base = _Expr(text, ColumnRef(c.pos), c.type)
        if depth <= 0 or chance(self.choices, 550):
            return base
        return self._pick("expr", _EXPRS)(self, f, base)  # type: ignore[no-any-return]

    def predicate(self, f: _From, depth: int = 1) -> _Expr:
        """A condition over ``f`` (three-valued)."""
        if depth > 0 and chance(self.choices, 250):
            a, b = self.predicate(f, depth - 1), self.predicate(f, depth - 1)
            if chance(self.choices, 500):
                return _Expr(f"({a.sql} AND {b.sql})", _and(a.expr, b.expr), _bool(a, b))
            return _Expr(f"({a.sql} OR {b.sql})", _or(a.expr, b.expr), _bool(a, b))
        if depth > 0 and chance(self.choices, 80):
            a = self.predicate(f, depth - 1)
            return _Expr(f"NOT ({a.sql})", CallUnary(UnaryFunc.NOT, a.expr), a.type)
        return self._pick("predicate", _PREDICATES)(self, f)  # type: ignore[no-any-return]

    # -- select lists ---------------------------------------------------------------------------
    def select_items(self, f: _From, n: int) -> list[tuple[_Expr, str]]:
        out: list[tuple[_Expr, str]] = []
        for i in range(n):
            out.append((self.value(f), f"c{i}"))
        return out

    def _ordered(self, q: Query) -> Query:
        """``q`` with an ORDER BY over every output column, perhaps LIMIT and OFFSET."""
        cols = list(range(len(q.names)))
        order: list[ColumnOrder] = []
        words: list[str] = []
        while cols:
            c = cols.pop(self.choices.integer(0, len(cols) - 1))
            desc = chance(self.choices, 400)
            say = self.choices.integer(0, 2)  # 0: PostgreSQL's default, 1: NULLS FIRST, 2: LAST
            nulls_last = (not desc) if say == 0 else say == 2
            ref = str(c + 1) if chance(self.choices, 600) else q.names[c]
            words.append(
                ref
                + (" DESC" if desc else (" ASC" if chance(self.choices, 200) else ""))
                + ("" if say == 0 else (" NULLS LAST" if nulls_last else " NULLS FIRST"))
            )
            order.append(ColumnOrder(c, desc, nulls_last))
        sql = f"{q.sql} ORDER BY {', '.join(words)}"
        limit: int | None = None
        offset = 0
        if chance(self.choices, 750):
            limit = self.choices.integer(0, 4)
            sql += f" LIMIT {limit}"
        if chance(self.choices, 350):
            offset = self.choices.integer(1, 3)
            sql += f" OFFSET {offset}"
        self._used.append("order_by" if limit is None and not offset else "order_limit_offset")
        return Query(sql, q.plan, q.names, q.types, tuple(order), limit, offset)


def _bool(*parts: _Expr) -> ColumnType:
    return ColumnType(S.BOOL, any(p.type.nullable for p in parts))


def _typed_names(
    plan: Plan, names: Sequence[str]
) -> tuple[tuple[str, ...], tuple[ColumnType, ...]]:
    schema = typecheck(plan)
    return tuple(names), tuple(c.type for c in schema.columns)


# -- FROM constructs ---------------------------------------------------------------------------


def _table(g: SqlGen, depth: int) -> _From:
    rel = pick(g.choices, list(g.relations))
    alias = g._fresh()
    cols = [_Col(alias, c.name, c.type, i) for i, c in enumerate(rel.schema.columns)]
    return _From(f"{rel.name} AS {alias}", rel.plan, cols, list(cols))


def _subquery_topk(g: SqlGen, depth: int) -> _From:
    """``(SELECT ... ORDER BY <every column> LIMIT k [OFFSET j]) AS s``: a TopK."""
    inner = _select(g, depth - 1)
    ordered = g._ordered(inner)
    if ordered.limit is None and not ordered.offset:
        ordered = Query(
            ordered.sql + " LIMIT 3",
            ordered.plan,
            ordered.names,
            ordered.types,
            ordered.order_by,
            3,
        )
    alias = g._fresh()
    plan = ordered.relation()
    cols = [
        _Col(alias, n, t, i)
        for i, (n, t) in enumerate(zip(ordered.names, ordered.types, strict=True))
    ]
    return _From(f"({ordered.sql}) AS {alias}", plan, cols, list(cols))


def _renamed(g: SqlGen, depth: int) -> _From:
    """``(SELECT a AS x, b AS y FROM ...) AS s``: a subquery renaming columns (so joins of
    different tables have names in common for ``USING``)."""
    inner = _table(g, 0) if depth <= 1 else g.from_item(depth - 1)
    chosen = list(inner.star)
    names = []
    exprs: list[tuple[str, _Col]] = []
    taken: set[str] = set()
    for c in chosen:
        name = _RENAMES.get(c.name, c.name)
        if name in taken:
            name = f"{name}_{len(taken)}"
        taken.add(name)
        names.append(name)
        exprs.append((name, c))
    ref = {c.pos: s for s, c in inner.refs()}
    sql_items = ", ".join(f"{ref.get(c.pos, _qual(c))} AS {n}" for n, c in exprs)
    plan: Plan = Project(inner.plan, tuple(c.pos for _, c in exprs))
    alias = g._fresh()
    _names, types = _typed_names(plan, names)
    cols = [_Col(alias, n, t, i) for i, (n, t) in enumerate(zip(names, types, strict=True))]
    where = f" WHERE {' AND '.join(inner.conds)}" if inner.conds else ""
    text = f"(SELECT {sql_items} FROM {inner.sql}{where}) AS {alias}"
    return _From(text, plan, cols, list(cols), [], list(inner.ctes))


_RENAMES = {"kind": "customer", "n": "amount", "region": "customer"}
"""How the renaming subquery names columns (towards the names other tables have)."""


def _right_side(g: SqlGen, depth: int) -> _From:
    """A join's right input: a table or a subquery (or, if enabled, another join)."""
    if g._on("parenthesized_join") and chance(g.choices, 300):
        return g.from_item(depth)
    if depth > 0 and chance(g.choices, 250):
        return _subquery_topk(g, depth) if chance(g.choices, 500) else _renamed(g, depth)
    return _table(g, 0)


def _nested(f: _From) -> str:
    """``f`` as the right side of a join: a join in parentheses."""
    return f"({f.sql})" if f.joined else f.sql


def _merge(left: _From, right: _From) -> tuple[list[str], list[str]]:
    """The WHERE conditions and WITH definitions of two joined FROM items."""
    return [*left.conds, *right.conds], [*left.ctes, *right.ctes]


def _qual(c: _Col) -> str:
    return c.name if c.qual is None else f"{c.qual}.{c.name}"


def _join_on(kind: JoinKind) -> Construct:
    word = {JoinKind.INNER: "JOIN", JoinKind.LEFT: "LEFT JOIN"}[kind]

    def make(g: SqlGen, depth: int) -> _From:
        left = g.from_item(depth - 1)
        right = _right_side(g, depth - 1)
        pairs = [
            (a, b)
            for a in left.cols
            for b in right.cols
            if a.qual is not None and b.qual is not None and a.type.scalar is b.type.scalar
        ]
        if not pairs or left.comma:
            return left
        a, b = pick(g.choices, pairs)
        nl = typecheck(left.plan).arity
        plan = Join((left.plan, right.plan), ((a.pos, nl + b.pos),), kind)
        shifted = [
            _Col(c.qual, c.name, _nullable(c.type, kind is JoinKind.LEFT), c.pos + nl, c.hidden)
            for c in right.cols
        ]
        cols = [*left.cols, *shifted]
        star = [
            *left.star,
            *[_Col(c.qual, c.name, c.type, c.pos + nl, c.hidden) for c in right.star],
        ]
        sql = f"{left.sql} {word} {_nested(right)} ON {_qual(a)} = {_qual(b)}"
        return _From(sql, plan, cols, star, *_merge(left, right), joined=True)

    return make


def _nullable(t: ColumnType, yes: bool) -> ColumnType:
    return ColumnType(t.scalar, True) if yes else t


def _join_using(kind: JoinKind) -> Construct:
    word = {
        JoinKind.INNER: "JOIN",
        JoinKind.LEFT: "LEFT JOIN",
        JoinKind.RIGHT: "RIGHT JOIN",
        JoinKind.FULL: "FULL JOIN",
    }[kind]

    def make(g: SqlGen, depth: int) -> _From:
        left = _table(g, 0) if chance(g.choices, 500) else g.from_item(depth - 1)
        right = _renamed(g, 1) if chance(g.choices, 400) else _table(g, 0)
        lnames = {c.name: c for c in left.star}
        rnames = {c.name: c for c in right.star}
        common = [
            n
            for n in lnames
            if n in rnames
            and lnames[n].type.scalar is rnames[n].type.scalar
            and sum(1 for c in left.cols if c.name == n and not c.hidden) == 1
            and sum(1 for c in right.cols if c.name == n and not c.hidden) == 1
        ]
        if not common or left.comma:
            return left
        using = [pick(g.choices, common)]
        nl = typecheck(left.plan).arity
        lp, rp = left.plan, right.plan
        classes = tuple((lnames[n].pos, nl + rnames[n].pos) for n in using)
        joined: Plan = Join((lp, rp), classes, kind)
        merged: list[_Col] = []
        exprs: list[ScalarExpr] = []
        width = nl + typecheck(rp).arity
        for n in using:
            lc, rc = lnames[n], rnames[n]
            if kind is JoinKind.FULL:
                exprs.append(
                    CallVariadic(VariadicFunc.COALESCE, (ColumnRef(lc.pos), ColumnRef(nl + rc.pos)))
                )
                merged.append(
                    _Col(None, n, ColumnType(lc.type.scalar, True), width + len(exprs) - 1)
                )
            elif kind is JoinKind.RIGHT:
                merged.append(_Col(None, n, rc.type, nl + rc.pos))
            else:
                merged.append(_Col(None, n, lc.type, lc.pos))
        if exprs:
            joined = Map(joined, tuple(exprs), tuple(f"using_{n}" for n in using))
        pad_left = kind in (JoinKind.RIGHT, JoinKind.FULL)
        pad_right = kind in (JoinKind.LEFT, JoinKind.FULL)
        lcols = [
            _Col(c.qual, c.name, _nullable(c.type, pad_left), c.pos, c.hidden or c.name in using)
            for c in left.cols
        ]
        rcols = [
            _Col(
                c.qual,
                c.name,
                _nullable(c.type, pad_right),
                c.pos + nl,
                c.hidden or c.name in using,
            )
            for c in right.cols
        ]
        star = [*merged]
        star += [c for c in lcols if any(s.pos == c.pos for s in left.star) and c.name not in using]
        star += [
            c for c in rcols if any(s.pos + nl == c.pos for s in right.star) and c.name not in using
        ]
        # A name USING merges is the merged column unqualified; each side's stays reachable
        # qualified by its alias (ON conditions and WHERE may name either).
        cols = [*merged, *lcols, *rcols]
        sql = f"{left.sql} {word} {_nested(right)} USING ({', '.join(using)})"
        return _From(sql, joined, cols, star, *_merge(left, right), joined=True)

    return make


def _comma_join(g: SqlGen, depth: int) -> _From:
    """``FROM a, b WHERE a.x = b.y``: a cross join filtered (the lowering turns the equality
    into the join's)."""
    left = g.from_item(depth - 1)
    right = _table(g, 0)
    pairs = [
        (a, b)
        for a in left.cols
        for b in right.cols
        if a.qual is not None and a.type.scalar is b.type.scalar
    ]
    if not pairs:
        return left
    a, b = pick(g.choices, pairs)
    nl = typecheck(left.plan).arity
    shifted = [_Col(c.qual, c.name, c.type, c.pos + nl, c.hidden) for c in right.cols]
    plan: Plan = Filter(
        Join((left.plan, right.plan), (), JoinKind.INNER),
        (CallBinary(BinaryFunc.EQ, ColumnRef(a.pos), ColumnRef(b.pos + nl)),),
    )
    conds, ctes = _merge(left, right)
    conds.append(f"{_qual(a)} = {_qual(b)}")
    cols, star = [*left.cols, *shifted], [*left.star, *shifted]
    return _From(f"{left.sql}, {right.sql}", plan, cols, star, conds, ctes, joined=True, comma=True)


def _cte(g: SqlGen, depth: int) -> _From:
    """``WITH w AS (query) ... FROM w``: read like a table (its plan inlined)."""
    inner = _select(g, depth - 1)
    name = g._fresh().replace("t", "w")
    rel = QueryInput(name, inner.schema, inner.relation())
    alias = g._fresh()
    cols = [_Col(alias, c.name, c.type, i) for i, c in enumerate(rel.schema.columns)]
    return _From(f"{name} AS {alias}", rel.plan, cols, list(cols), [], [f"{name} AS ({inner.sql})"])


_FROMS: list[tuple[str, int, Construct]] = [
    ("table", 30, _table),
    ("subquery_topk", 8, _subquery_topk),
    ("renamed_subquery", 4, _renamed),
    ("join_on", 10, _join_on(JoinKind.INNER)),
    ("left_join_on", 8, _join_on(JoinKind.LEFT)),
    ("join_using", 8, _join_using(JoinKind.INNER)),
    ("left_join_using", 8, _join_using(JoinKind.LEFT)),
    ("right_join_using", 5, _join_using(JoinKind.RIGHT)),
    ("full_join_using", 5, _join_using(JoinKind.FULL)),
    ("comma_join", 5, _comma_join),
    ("with", 4, _cte),
]


# -- expressions ---------------------------------------------------------------------------------


def _arith(g: SqlGen, f: _From, base: _Expr) -> _Expr:
    if base.type.scalar is not S.INT64:
        return _strings(g, f, base)
    op, func = pick(
        g.choices, (("+", BinaryFunc.ADD), ("-", BinaryFunc.SUB), ("*", BinaryFunc.MUL))
    )
    k = g._int(1, 3)
    return _Expr(f"({base.sql} {op} {k.sql})", CallBinary(func, base.expr, k.expr), base.type)


def _coalesce(g: SqlGen, f: _From, base: _Expr) -> _Expr:
    if base.type.scalar is S.INT64:
        d = g._int()
    elif base.type.scalar is S.STRING:
        d = g._word()
    else:
        return base
    return _Expr(
        f"COALESCE({base.sql}, {d.sql})",
        CallVariadic(VariadicFunc.COALESCE, (base.expr, d.expr)),
        ColumnType(base.type.scalar, False),
    )


def _case(g: SqlGen, f: _From, base: _Expr) -> _Expr:
    cond = g.predicate(f, 0)
    if base.type.scalar is S.STRING:
        other = g._word()
    elif base.type.scalar is S.INT64:
        other = g._int()
    else:
        return base
    return _Expr(
        f"CASE WHEN {cond.sql} THEN {base.sql} ELSE {other.sql} END",
        If(cond.expr, base.expr, other.expr),
        ColumnType(base.type.scalar, base.type.nullable),
    )


def _strings(g: SqlGen, f: _From, base: _Expr) -> _Expr:
    if base.type.scalar is S.INT64:
        return _Expr(f"abs({base.sql})", CallUnary(UnaryFunc.ABS, base.expr), base.type)
    if base.type.scalar is not S.STRING:
        return base
    k = g.choices.integer(0, 3)
    if k == 0:
        return _Expr(f"upper({base.sql})", CallUnary(UnaryFunc.UPPER, base.expr), base.type)
    if k == 1:
        return _Expr(f"lower({base.sql})", CallUnary(UnaryFunc.LOWER, base.expr), base.type)
    if k == 2:
        return _Expr(
            f"length({base.sql})",
            CallUnary(UnaryFunc.LENGTH, base.expr),
            ColumnType(S.INT64, base.type.nullable),
        )
    other = g.value(f, 0)
    if other.type.scalar is not S.STRING:
        other = g._word()
    return _Expr(
        f"({base.sql} || {other.sql})",
        CallBinary(BinaryFunc.CONCAT, base.expr, other.expr),
        ColumnType(S.STRING, base.type.nullable or other.type.nullable),
    )


_EXPRS: list[tuple[str, int, Any]] = [
    ("arithmetic", 4, _arith),
    ("coalesce", 3, _coalesce),
    ("case", 2, _case),
    ("string_functions", 3, _strings),
]


# -- predicates ------------------------------------------------------------------------------


def _compare(g: SqlGen, f: _From) -> _Expr:
    got = g.column(f)
    assert got is not None
    text, c = got
    if c.type.scalar is S.INT64:
        op = pick(g.choices, tuple(_COMPARE))
        k = g._int()
    elif c.type.scalar is S.STRING:
        op = pick(g.choices, ("=", "<>", "<", ">="))
        k = g._word()
    elif c.type.scalar is S.FLOAT64:  # an average: against a number between two integers
        op = pick(g.choices, ("<", ">", "<=", ">="))
        half = g.choices.integer(0, 9) + 0.5
        k = _Expr(str(half), Literal(half, S.FLOAT64), ColumnType(S.FLOAT64, False))
    else:  # a bool column: itself, or compared with a constant
        if chance(g.choices, 500):
            return _Expr(text, ColumnRef(c.pos), c.type)
        b = _lit(bool(g.choices.integer(0, 1)), S.BOOL)
        op = pick(g.choices, ("=", "<>"))
        return _Expr(
            f"{text} {op} {b.sql}",
            CallBinary(_COMPARE[op], ColumnRef(c.pos), b.expr),
            ColumnType(S.BOOL, c.type.nullable),
        )
    return _Expr(
        f"{text} {op} {k.sql}",
        CallBinary(_COMPARE[op], ColumnRef(c.pos), k.expr),
        ColumnType(S.BOOL, c.type.nullable),
    )


def _is_null(g: SqlGen, f: _From) -> _Expr:
    got = g.column(f)
    assert got is not None
    text, c = got
    test: ScalarExpr = CallUnary(UnaryFunc.IS_NULL, ColumnRef(c.pos))
    if chance(g.choices, 500):
        return _Expr(
            f"{text} IS NOT NULL", CallUnary(UnaryFunc.NOT, test), ColumnType(S.BOOL, False)
        )
    return _Expr(f"{text} IS NULL", test, ColumnType(S.BOOL, False))


def _between(g: SqlGen, f: _From) -> _Expr:
    got = g.column(f, S.INT64)
    if got is None:
        return _compare(g, f)
    text, c = got
    lo, hi = g._int(0, 4), g._int(3, 9)
    ref = ColumnRef(c.pos)
    return _Expr(
        f"{text} BETWEEN {lo.sql} AND {hi.sql}",
        _and(CallBinary(BinaryFunc.GE, ref, lo.expr), CallBinary(BinaryFunc.LE, ref, hi.expr)),
        ColumnType(S.BOOL, c.type.nullable),
    )


def _in_list(g: SqlGen, f: _From) -> _Expr:
    got = g.column(f)
    assert got is not None
    text, c = got
    if c.type.scalar is S.INT64:
        items = [g._int() for _ in range(g.choices.integer(1, 3))]
    elif c.type.scalar is S.STRING:
        items = [g._word() for _ in range(g.choices.integer(1, 3))]
    else:
        return _is_null(g, f)
    ref = ColumnRef(c.pos)
    return _Expr(
        f"{text} IN ({', '.join(i.sql for i in items)})",
        _or(*(CallBinary(BinaryFunc.EQ, ref, i.expr) for i in items)),
        ColumnType(S.BOOL, c.type.nullable),
    )


def _like(g: SqlGen, f: _From) -> _Expr:
    """``s [NOT] LIKE|ILIKE pattern [ESCAPE e]``: a pattern of literal characters, ``_``, ``%``
    and escaped ``_``, ``%`` and escape characters, over a string column or a column with a
    wildcard character appended (so the data holds the characters the escapes stand for).

    The reference is a regular expression the generator writes from the pattern it drew
    (:func:`_like_regex`, matched by ``~``/``~*``), not ``LIKE`` itself: it shares no code with
    the front end's reading of the pattern (its escapes, its default ``\\``) nor with the
    evaluator's ``LIKE`` matcher."""
    got = g.column(f, S.STRING)
    if got is None:
        return _compare(g, f)
    text, c = got
    subject = _Expr(text, ColumnRef(c.pos), c.type)
    if chance(g.choices, 300):
        tail = _lit(pick(g.choices, ("_", "%", "\\", "#")), S.STRING)
        subject = _Expr(
            f"({text} || {tail.sql})",
            CallBinary(BinaryFunc.CONCAT, ColumnRef(c.pos), tail.expr),
            c.type,
        )
    fold = chance(g.choices, 300)
    # the escape: none drawn (no escapes in the pattern), PostgreSQL's default backslash, or
    # a named one
    escape = pick(g.choices, ("", "", "default", "\\", "#"))
    pieces: list[tuple[str, str]] = []  # (kind, char): kind one of lit, one, any, escaped
    word = pick(g.choices, WORDS)
    if fold and chance(g.choices, 600):
        word = "".join(ch.upper() if chance(g.choices, 500) else ch for ch in word)
    if chance(g.choices, 400):
        pieces.append(("any", "%"))
    for ch in word[: g.choices.integer(0, len(word))]:
        roll = g.choices.integer(0, 9)
        pieces.append(("one", "_") if roll < 2 else ("any", "%") if roll < 3 else ("lit", ch))
    if escape and chance(g.choices, 700):
        pieces.append(("escaped", pick(g.choices, ("_", "%", "\\" if escape != "#" else "#"))))
    if chance(g.choices, 600) or (not pieces and not g._on("like_empty_pattern")):
        pieces.append(("any", "%"))
    if not pieces:
        g._used.append("like_empty_pattern")
    esc = "\\" if escape == "default" else escape
    pattern = "".join(esc + ch if kind == "escaped" else ch for kind, ch in pieces)
    p = _lit(pattern, S.STRING)
    negated = chance(g.choices, 300)
    word_sql = ("NOT " if negated else "") + ("ILIKE" if fold else "LIKE")
    clause = f" ESCAPE {_lit(escape, S.STRING).sql}" if escape not in ("", "default") else ""
    if fold:
        g._used.append("ilike")
    if escape:
        g._used.append("like_default_escape" if escape == "default" else "like_escape")
    if negated:
        g._used.append("not_like")
    regex = _lit(_like_regex(pieces), S.STRING)
    func = BinaryFunc.REGEX_IMATCH if fold else BinaryFunc.REGEX_MATCH
    test: ScalarExpr = CallBinary(func, subject.expr, regex.expr)
    if negated:
        test = CallUnary(UnaryFunc.NOT, test)
    return _Expr(
        f"{subject.sql} {word_sql} {p.sql}{clause}", test, ColumnType(S.BOOL, c.type.nullable)
    )


def _like_regex(pieces: Sequence[tuple[str, str]]) -> str:
    """The regular expression (RE2's syntax) a LIKE pattern of ``pieces`` means: the whole
    string, ``_`` any one character, ``%`` any run, everything else itself."""
    out = []
    for kind, ch in pieces:
        if kind == "one":
            out.append(".")
        elif kind == "any":
            out.append(".*")
        else:
            out.append(ch if ch.isalnum() else "\\" + ch)
    return "^" + "".join(out) + "$"


_PREDICATES: list[tuple[str, int, Any]] = [
    ("compare", 10, _compare),
    ("is_null", 4, _is_null),
    ("between", 2, _between),
    ("in_list", 2, _in_list),
    ("like", 4, _like),
]


# -- query shapes ----------------------------------------------------------------------------


def _where(g: SqlGen, f: _From) -> tuple[str, str, Plan]:
    """``f`` filtered by a WHERE (perhaps): the ``WITH`` prefix, the text from FROM on, and the
    plan."""
    plan = f.plan
    conds = list(f.conds)
    if chance(g.choices, 550):
        p = g.predicate(f)
        conds.append(p.sql)
        plan = Filter(plan, (p.expr,))
    src = g.temporal_choices if g.temporal_choices is not None else g.choices
    if g.now_ms is not None and g._on("temporal_filter") and chance(src, g.temporal_per_mille):
        texts, predicates = _temporal(src, f, g.now_ms)
        conds.extend(texts)
        plan = TemporalFilter(plan, tuple(predicates))
        g._used.append("temporal_filter")
    prefix = f"WITH {', '.join(f.ctes)} " if f.ctes else ""
    text = f.sql + (f" WHERE {' AND '.join(conds)}" if conds else "")
    return prefix, text, plan


def _temporal(
    src: ChoiceSource, f: _From, now: int
) -> tuple[list[str], list[tuple[TemporalOp, ScalarExpr]]]:
    """A temporal filter's conjuncts: ``mz_now()`` compared with an int64 column plus a constant
    (or a constant alone) a little before or after ``now``, in the forms Materialize accepts --
    ``>=``/``<`` windows, ``<=``, ``>``, the comparison written the other way round, and
    ``BETWEEN``. The reference keeps a row at ``t`` while every comparison holds with
    ``mz_now()`` = ``t`` (so rows leave views as the run's time passes, with no write)."""
    refs = [(text, c) for text, c in f.refs() if c.type.scalar is S.INT64]
    got = pick(src, refs) if refs else None

    def bound() -> tuple[str, ScalarExpr]:
        k = max(0, now + src.integer(-1500, 3000))
        if got is None:
            return str(k), Literal(k, S.INT64)
        text, c = got
        return f"{text} + {k}", CallBinary(BinaryFunc.ADD, ColumnRef(c.pos), Literal(k, S.INT64))

    form = src.integer(0, 4)
    if form == 0:  # a window: valid from one bound until the other
        (lo_sql, lo), (hi_sql, hi) = bound(), bound()
        return (
            [f"mz_now() >= {lo_sql}", f"mz_now() < {hi_sql}"],
            [(TemporalOp.GE, lo), (TemporalOp.LT, hi)],
        )
    if form == 1:
        (a_sql, a), (b_sql, b) = bound(), bound()
        return [f"mz_now() BETWEEN {a_sql} AND {b_sql}"], [(TemporalOp.GE, a), (TemporalOp.LE, b)]
    b_sql, b = bound()
    if form == 2:
        return [f"mz_now() <= {b_sql}"], [(TemporalOp.LE, b)]
    if form == 3:
        return [f"mz_now() > {b_sql}"], [(TemporalOp.GT, b)]
    return [f"{b_sql} > mz_now()"], [(TemporalOp.LT, b)]  # mz_now() < bound, written flipped


def _select(g: SqlGen, depth: int) -> Query:
    """``SELECT [DISTINCT] items FROM ... [WHERE ...]``."""
    f = g.from_item(depth)
    prefix, from_text, plan = _where(g, f)
    star = chance(g.choices, 150) and len({c.name for c in f.star}) == len(f.star)
    if star:
        names = tuple(c.name for c in f.star)
        plan = Project(plan, tuple(c.pos for c in f.star))
        items = "*"
    else:
        chosen = g.select_items(f, g.choices.integer(1, 3))
        arity = typecheck(plan).arity
        names = tuple(n for _, n in chosen)
        plan = Project(
            Map(plan, tuple(e.expr for e, _ in chosen), names),
            tuple(range(arity, arity + len(chosen))),
        )
        items = ", ".join(f"{e.sql} AS {n}" for e, n in chosen)
    distinct = ""
    if chance(g.choices, 150):
        distinct = "DISTINCT "
        plan = Distinct(plan)
        g._used.append("distinct")
    sql = f"{prefix}SELECT {distinct}{items} FROM {from_text}"
    names, types = _typed_names(plan, names)
    return Query(sql, plan, names, types)


_AGGS: list[tuple[str, AggFunc, bool, ScalarType | None]] = [
    ("count", AggFunc.COUNT, False, None),
    ("count_distinct", AggFunc.COUNT, True, None),
    ("sum", AggFunc.SUM, False, S.INT64),
    ("min", AggFunc.MIN, False, None),
    ("max", AggFunc.MAX, False, None),
    ("avg", AggFunc.AVG, False, S.INT64),
    ("bool_and", AggFunc.BOOL_AND, False, S.BOOL),
    ("bool_or", AggFunc.BOOL_OR, False, S.BOOL),
]


def _aggregates(g: SqlGen, f: _From, n: int) -> list[tuple[str, Aggregate]]:
    out: list[tuple[str, Aggregate]] = []
    for _ in range(n):
        if chance(g.choices, 250):
            out.append(("count(*)", Aggregate(AggFunc.COUNT)))
            continue
        name, func, distinct, scalar = pick(g.choices, [a for a in _AGGS if g._on(f"agg_{a[0]}")])
        got = g.column(f, scalar)
        boolish = func in (AggFunc.BOOL_AND, AggFunc.BOOL_OR)
        if (
            got is None
            or (
                got[1].type.scalar is S.BOOL
                and func not in (AggFunc.COUNT, AggFunc.BOOL_AND, AggFunc.BOOL_OR)
            )
            or (boolish and got[1].type.scalar is not S.BOOL)
        ):
            out.append(("count(*)", Aggregate(AggFunc.COUNT)))
            continue
        text, c = got
        word = "count" if func is AggFunc.COUNT else func.value
        sql = f"{word}({'DISTINCT ' if distinct else ''}{text})"
        out.append((sql, Aggregate(func, c.pos, distinct)))
        g._used.append(f"agg_{name}")
    return out


def _grouped(g: SqlGen, depth: int) -> Query:
    """``SELECT keys, aggregates FROM ... [WHERE] GROUP BY keys [HAVING]``."""
    f = g.from_item(depth)
    prefix, from_text, plan = _where(g, f)
    keys: list[tuple[str, _Col]] = []
    for _ in range(g.choices.integer(1, 2)):
        got = g.column(f)
        assert got is not None
        if all(c.pos != got[1].pos for _, c in keys):
            keys.append(got)
    aggs = _aggregates(g, f, g.choices.integer(1, 3))
    plan = Reduce(plan, tuple(c.pos for _, c in keys), tuple(a for _, a in aggs))
    names = tuple([f"k{i}" for i in range(len(keys))] + [f"a{i}" for i in range(len(aggs))])
    items = [f"{t} AS k{i}" for i, (t, _) in enumerate(keys)]
    items += [f"{s} AS a{i}" for i, (s, _) in enumerate(aggs)]
    sql = f"{prefix}SELECT {', '.join(items)} FROM {from_text} GROUP BY {', '.join(t for t, _ in keys)}"
    if chance(g.choices, 300):
        j = g.choices.integer(0, len(aggs) - 1)
        schema = typecheck(plan)
        pos = len(keys) + j
        if schema.columns[pos].type.scalar is S.INT64:
            k = g._int(0, 4)
            op = pick(g.choices, (">", ">=", "<"))
            sql += f" HAVING {aggs[j][0]} {op} {k.sql}"
            plan = Filter(plan, (CallBinary(_COMPARE[op], ColumnRef(pos), k.expr),))
            g._used.append("having")
    names, types = _typed_names(plan, names)
    return Query(sql, plan, names, types)


def _global_aggregate(g: SqlGen, depth: int) -> Query:
    """``SELECT aggregates FROM ... [WHERE]``: one row, even over no rows (count 0, others
    NULL)."""
    f = g.from_item(depth)
    prefix, from_text, plan = _where(g, f)
    aggs = _aggregates(g, f, g.choices.integer(1, 3))
    reduced = Reduce(plan, (), tuple(a for _, a in aggs))
    schema = typecheck(reduced)
    default = tuple(0 if a.func is AggFunc.COUNT else None for _, a in aggs)
    nullable = Schema(
        tuple(Column(c.name, ColumnType(c.type.scalar, True)) for c in schema.columns)
    )
    row = Constant(((default, 1),), nullable)
    nonempty = Distinct(Project(reduced, ()))
    out: Plan = Union((reduced, row, Negate(Join((row, nonempty), (), JoinKind.INNER))))
    names = tuple(f"a{i}" for i in range(len(aggs)))
    items = ", ".join(f"{s} AS a{i}" for i, (s, _) in enumerate(aggs))
    sql = f"{prefix}SELECT {items} FROM {from_text}"
    names, types = _typed_names(out, names)
    return Query(sql, out, names, types)


def _set_operation(g: SqlGen, depth: int) -> Query:
    """``a UNION|EXCEPT|INTERSECT [ALL] b`` over two selects of one shape."""
    shape = pick(g.choices, ((S.STRING,), (S.INT64,), (S.STRING, S.INT64)))
    a, b = _shaped(g, shape), _shaped(g, shape)
    if a is None or b is None:
        return _select(g, depth)
    op = pick(g.choices, ("UNION", "EXCEPT", "INTERSECT"))
    every = chance(g.choices, 500)
    g._used.append(f"{op.lower()}{'_all' if every else ''}")
    pa, pb = a.plan, b.plan
    plan: Plan
    if op == "UNION":
        plan = Union((pa, pb)) if every else Distinct(Union((pa, pb)))
    elif op == "EXCEPT":
        plan = (
            Threshold(Union((pa, Negate(pb))))
            if every
            else Threshold(Union((Distinct(pa), Negate(Distinct(pb)))))
        )
    else:
        da, db = (pa, pb) if every else (Distinct(pa), Distinct(pb))
        plan = Union((da, Negate(Threshold(Union((da, Negate(db)))))))
    sql = f"({a.sql}) {op}{' ALL' if every else ''} ({b.sql})"
    names, types = _typed_names(plan, a.names)
    return Query(sql, plan, names, types)


def _shaped(g: SqlGen, shape: Sequence[ScalarType]) -> Query | None:
    """``SELECT <columns of the given types> FROM <a table> [WHERE ...]`` (for set operations)."""
    f = _table(g, 0)
    items: list[tuple[str, _Col]] = []
    for i, scalar in enumerate(shape):
        got = g.column(f, scalar)
        if got is None:
            return None
        items.append((f"{got[0]} AS s{i}", got[1]))
    prefix, from_text, plan = _where(g, f)
    plan = Project(plan, tuple(c.pos for _, c in items))
    names = tuple(f"s{i}" for i in range(len(items)))
    sql = f"{prefix}SELECT {', '.join(t for t, _ in items)} FROM {from_text}"
    names, types = _typed_names(plan, names)
    return Query(sql, plan, names, types)


# -- window functions, Top-K and DISTINCT ON -------------------------------------------------
#
# References are Window operators written from the draws (with TopK's idiom and DISTINCT ON
# as what they say: a row number filtered, not the TopK the lowering turns them into). Every
# ORDER BY that positions rows (row_number, lag, lead, ROWS frames, DISTINCT ON) is over every
# column, so the answer is one PostgreSQL gives too; rank, dense_rank and aggregates over the
# default frame take a partial order, their peers sharing one value. A query has at most one
# positional function: two over different orders would pair duplicates' numbers as the engine
# pleases.


def _orderable(f: _From) -> list[tuple[str, _Col]]:
    """Each column of ``f``'s plan once, qualified (ordering by all of them is total: the only
    columns without a qualified name are a FULL JOIN's merged ones, functions of the others)."""
    seen: set[int] = set()
    out: list[tuple[str, _Col]] = []
    for c in f.cols:
        if c.qual is not None and c.pos not in seen:
            seen.add(c.pos)
            out.append((f"{c.qual}.{c.name}", c))
    return out


def _order_words(g: SqlGen, cols: Sequence[tuple[str, int]]) -> tuple[list[str], list[ColumnOrder]]:
    """An ORDER BY over ``cols`` (text, position), shuffled, with drawn directions and NULLS."""
    rest = list(cols)
    words: list[str] = []
    order: list[ColumnOrder] = []
    while rest:
        text, pos = rest.pop(g.choices.integer(0, len(rest) - 1))
        desc = chance(g.choices, 400)
        say = g.choices.integer(0, 2)
        nulls_last = (not desc) if say == 0 else say == 2
        words.append(
            text
            + (" DESC" if desc else "")
            + ("" if say == 0 else (" NULLS LAST" if nulls_last else " NULLS FIRST"))
        )
        order.append(ColumnOrder(pos, desc, nulls_last))
    return words, order


_WINDOW_KINDS = (
    "row_number",
    "rank",
    "dense_rank",
    "lag",
    "lead",
    "aggregate",
    "rows_frame",
)

_WINDOW_AGGS: list[tuple[str, AggFunc, ScalarType | None]] = [
    ("count", AggFunc.COUNT, None),
    ("sum", AggFunc.SUM, S.INT64),
    ("min", AggFunc.MIN, S.INT64),
    ("max", AggFunc.MAX, S.STRING),
]


def _window_func(g: SqlGen, f: _From, plan: Plan, taken: bool) -> tuple[str, Plan, bool]:
    """One ``f(...) OVER (...)`` over ``plan`` (``f``'s rows): its text, ``plan`` with its
    column appended (and perhaps a constant before it), and whether it is positional (none
    may be if ``taken``: a positional one is already drawn)."""
    allcols = _orderable(f)
    width = typecheck(plan).arity
    kinds = ["rank", "dense_rank", "aggregate"]
    if not taken:
        kinds += ["row_number", "row_number", "lag", "lead", "rows_frame"]
    kind = pick(g.choices, kinds)
    part: list[tuple[str, _Col]] = []
    if chance(g.choices, 600):
        part = [pick(g.choices, allcols)]
    others = [(t, c.pos) for t, c in allcols if all(c.pos != p.pos for _, p in part)]
    total = kind in ("row_number", "lag", "lead", "rows_frame")
    if not total:  # a partial order (perhaps none): peers share a value
        others = others[: g.choices.integer(0 if kind == "aggregate" else 1, 2)]
    words, order = _order_words(g, others)
    frame_sql = ""
    func: WindowFunc
    if kind in ("row_number", "rank", "dense_rank"):
        text = f"{kind}()"
        func = WindowFunc(WindowFuncKind(kind))
    elif kind in ("lag", "lead"):
        _t, c = pick(g.choices, allcols)
        args = [f"{c.qual}.{c.name}"]
        offset, default = 1, None
        if chance(g.choices, 600):
            offset = g.choices.integer(0, 2)
            args.append(str(offset))
            if chance(g.choices, 500) and c.type.scalar in (S.INT64, S.STRING):
                d = (
                    g._word()
                    if c.type.scalar is S.STRING
                    else _lit(g.choices.integer(0, 9), S.INT64)
                )
                args.append(d.sql)
                plan = Map(plan, (d.expr,), (f"default_{width}",))
                default = width
                width += 1
        text = f"{kind}({', '.join(args)})"
        func = WindowFunc(WindowFuncKind(kind), c.pos, offset, default)
    else:
        name, agg_func, scalar = pick(g.choices, _WINDOW_AGGS)
        got = g.column(f, scalar) if name != "count" or chance(g.choices, 600) else None
        if got is None or (got[1].type.scalar is S.BOOL and name != "count"):
            text, agg = "count(*)", Aggregate(AggFunc.COUNT)
        else:
            text, agg = f"{name}({got[0]})", Aggregate(agg_func, got[1].pos)
        frame = WindowFrame()
        if kind == "rows_frame":
            back = g.choices.integer(0, 2)
            ahead = g.choices.integer(0, 1)
            end = "CURRENT ROW" if ahead == 0 else f"{ahead} FOLLOWING"
            frame_sql = f" ROWS BETWEEN {back} PRECEDING AND {end}"
            frame = WindowFrame(
                False,
                WindowBound(WindowBoundKind.PRECEDING, back),
                WindowBound(WindowBoundKind.CURRENT_ROW)
                if ahead == 0
                else WindowBound(WindowBoundKind.FOLLOWING, ahead),
            )
        func = WindowFunc(WindowFuncKind.AGGREGATE, aggregate=agg, frame=frame)
    g._used.append(f"window_{kind}")
    over = []
    if part:
        over.append(f"PARTITION BY {part[0][0]}")
    if words:
        over.append(f"ORDER BY {', '.join(words)}")
    sql = f"{text} OVER ({' '.join(over)}{frame_sql})"
    window = Window(plan, tuple(c.pos for _, c in part), tuple(order), (func,))
    return sql, window, total


def _filtered(g: SqlGen, f: _From) -> tuple[str, list[str], Plan]:
    """``f`` with perhaps a drawn WHERE condition: the ``WITH`` prefix, the conditions (the
    FROM's own too), the plan."""
    plan = f.plan
    conds = list(f.conds)
    if chance(g.choices, 400):
        p = g.predicate(f)
        conds.append(p.sql)
        plan = Filter(plan, (p.expr,))
    return (f"WITH {', '.join(f.ctes)} " if f.ctes else ""), conds, plan


def _where_text(conds: Sequence[str]) -> str:
    return f" WHERE {' AND '.join(conds)}" if conds else ""


def _windowed(g: SqlGen, depth: int) -> Query:
    """``SELECT items, f(...) OVER (...) ... FROM ... [WHERE]``: window functions beside
    values, each over its own ``PARTITION BY``/``ORDER BY``. The reference is a ``Window``
    per function, stacked, each appending its column."""
    f = g.from_item(depth - 1)
    prefix, conds, plan = _filtered(g, f)
    texts: list[str] = []
    positions: list[int] = []
    positional = False
    for _ in range(g.choices.integer(1, 2)):
        text, plan, was = _window_func(g, f, plan, positional)
        positional = positional or was
        texts.append(text)
        positions.append(typecheck(plan).arity - 1)
    chosen = g.select_items(f, g.choices.integer(1, 2))
    width = typecheck(plan).arity
    names = tuple([n for _, n in chosen] + [f"w{i}" for i in range(len(texts))])
    plan = Project(
        Map(plan, tuple(e.expr for e, _ in chosen), tuple(n for _, n in chosen)),
        (*range(width, width + len(chosen)), *positions),
    )
    items = [f"{e.sql} AS {n}" for e, n in chosen]
    items += [f"{t} AS w{i}" for i, t in enumerate(texts)]
    sql = f"{prefix}SELECT {', '.join(items)} FROM {f.sql}{_where_text(conds)}"
    names, types = _typed_names(plan, names)
    return Query(sql, plan, names, types)


def _window_topk(g: SqlGen, depth: int) -> Query:
    """The Top-K idiom: ``SELECT ... FROM (SELECT cols, row_number() OVER (PARTITION BY p
    ORDER BY <every other column>) AS rn FROM t [WHERE]) AS s WHERE rn <= k`` (or ``<``,
    ``=``; sometimes ``rank``/``dense_rank`` over part of the order, which is no Top-K). The
    reference filters the window's numbers, as the text says; the lowering, for
    ``row_number``, keeps ``k`` rows per partition with a ``TopK`` before numbering them."""
    f = _table(g, 0)
    prefix, conds, plan = _filtered(g, f)
    star = f.star
    plan = Project(plan, tuple(c.pos for c in star))
    cols = [(f"{c.qual}.{c.name}", i) for i, c in enumerate(star)]
    part = [pick(g.choices, cols)] if chance(g.choices, 700) and len(cols) > 1 else []
    others = [c for c in cols if c not in part]
    kind = pick(g.choices, ("row_number", "row_number", "row_number", "rank", "dense_rank"))
    if kind != "row_number":
        others = others[:1]
    words, order = _order_words(g, others)
    over = ([f"PARTITION BY {part[0][0]}"] if part else []) + [f"ORDER BY {', '.join(words)}"]
    inner_items = ", ".join([f"{t} AS {c.name}" for (t, _), c in zip(cols, star, strict=True)])
    rn = "rn"  # the number's name: one the input does not have (a view of this shape has rn)
    while rn in {c.name for c in star}:
        rn += "_"
    alias = g._fresh()
    inner = (
        f"SELECT {inner_items}, {kind}() OVER ({' '.join(over)}) AS {rn} "
        f"FROM {f.sql}{_where_text(conds)}"
    )
    n = len(star)
    window: Plan = Window(
        plan, tuple(p for _, p in part), tuple(order), (WindowFunc(WindowFuncKind(kind)),)
    )
    op = pick(g.choices, ("<=", "<=", "<", "="))
    k = g._int(1, 3)
    outer_conds = [f"{rn} {op} {k.sql}"]
    window = Filter(window, (CallBinary(_COMPARE[op], ColumnRef(n), k.expr),))
    keep = [i for i in range(n + 1) if chance(g.choices, 500 if i == n else 750)]
    if not keep:
        keep = [0]
    names = tuple([*(c.name for c in star), rn][i] for i in keep)
    plan = Project(window, tuple(keep))
    g._used.append(f"topk_{kind}")
    sql = (
        f"{prefix}SELECT {', '.join(f'{alias}.{x}' for x in names)} FROM ({inner}) AS {alias} "
        f"WHERE {' AND '.join(outer_conds)}"
    )
    names, types = _typed_names(plan, names)
    return Query(sql, plan, names, types)


def _distinct_on(g: SqlGen, depth: int) -> Query:
    """``SELECT DISTINCT ON (keys) cols FROM t [WHERE] ORDER BY keys, <every other column>``:
    per key, the first row in that order, the answer in that order (perhaps with a
    ``LIMIT``). The reference numbers each key's rows in that order (a ``Window``) and keeps
    number 1, as PostgreSQL's documentation says; the lowering uses a ``TopK``."""
    f = _table(g, 0)
    prefix, conds, plan = _filtered(g, f)
    star = list(f.star)
    plan = Project(plan, tuple(c.pos for c in star))
    names = tuple(c.name for c in star)
    n = len(star)
    nkeys = g.choices.integer(1, min(2, n))
    keys = sorted({g.choices.integer(0, n - 1) for _ in range(nkeys)})
    key_words, key_order = _order_words(
        g, [(names[i] if chance(g.choices, 700) else str(i + 1), i) for i in keys]
    )
    rest_words, rest_order = _order_words(
        g,
        [
            (names[i] if chance(g.choices, 700) else str(i + 1), i)
            for i in range(n)
            if i not in keys
        ],
    )
    on = ", ".join(names[i] if chance(g.choices, 600) else str(i + 1) for i in keys)
    numbered = Window(
        plan, tuple(keys), tuple(rest_order), (WindowFunc(WindowFuncKind.ROW_NUMBER),)
    )
    firsts = Project(
        Filter(numbered, (CallBinary(BinaryFunc.EQ, ColumnRef(n), Literal(1, S.INT64)),)),
        tuple(range(n)),
    )
    items = ", ".join(f"{c.qual}.{c.name}" for c in star)
    sql = (
        f"{prefix}SELECT DISTINCT ON ({on}) {items} FROM {f.sql}{_where_text(conds)} "
        f"ORDER BY {', '.join(key_words + rest_words)}"
    )
    limit: int | None = None
    if chance(g.choices, 400):
        limit = g.choices.integer(0, 3)
        sql += f" LIMIT {limit}"
    names, types = _typed_names(firsts, names)
    return Query(sql, firsts, names, types, (*key_order, *rest_order), limit)


# -- subqueries in expressions ---------------------------------------------------------------
#
# References are the plain relational meaning, written by hand: a scalar subquery is its one
# row (a global aggregate's, the one-row-over-nothing rule included) joined to every row, or,
# correlated on an equality, a reduce per key left-joined back; EXISTS a join with the body's
# distinct keys (NOT EXISTS the rows that join subtracted); IN its three-valued truth from the
# body's row count, non-NULL count and the match. The lowering under test decorrelates in its
# own way (Let-bound distinct outer keys, NULL-safe joins back): the two meet only in the
# answer.


def _global(plan: Plan, aggs: Sequence[Aggregate]) -> Plan:
    """``aggs`` over ``plan``'s rows as one row, even over no rows (count 0, the others
    NULL), as SQL's aggregate without ``GROUP BY``."""
    reduced = Reduce(plan, (), tuple(aggs))
    schema = typecheck(reduced)
    default = tuple(0 if a.func is AggFunc.COUNT else None for a in aggs)
    nullable = Schema(
        tuple(Column(c.name, ColumnType(c.type.scalar, True)) for c in schema.columns)
    )
    row = Constant(((default, 1),), nullable)
    nonempty = Distinct(Project(reduced, ()))
    return Union((reduced, row, Negate(Join((row, nonempty), (), JoinKind.INNER))))


def _outer_cols(f: _From, scalar: ScalarType | None = None) -> list[tuple[str, _Col]]:
    """``f``'s columns as a subquery's body names them: qualified (an unqualified name there
    is the body's own first)."""
    return [(t, c) for t, c in _orderable(f) if scalar is None or c.type.scalar is scalar]


def _body(g: SqlGen) -> tuple[_From, list[str], Plan]:
    """A subquery's FROM (a table) with perhaps a condition of its own."""
    inner = _table(g, 0)
    conds: list[str] = []
    plan = inner.plan
    if chance(g.choices, 400):
        p = g.predicate(inner, 0)
        conds.append(p.sql)
        plan = Filter(plan, (p.expr,))
    return inner, conds, plan


def _finish(
    g: SqlGen,
    f: _From,
    prefix: str,
    conds: Sequence[str],
    plan: Plan,
    extra: Sequence[tuple[str, ScalarExpr, str]] = (),
) -> Query:
    """``SELECT items[, extra] FROM f WHERE conds``: ``plan`` holds ``f``'s columns first;
    ``extra`` are further items (text, reference over ``plan``, name)."""
    chosen = g.select_items(f, g.choices.integer(1, 2))
    width = typecheck(plan).arity
    exprs = [e.expr for e, _ in chosen] + [x for _, x, _ in extra]
    names = tuple([n for _, n in chosen] + [n for _, _, n in extra])
    plan = Project(Map(plan, tuple(exprs), names), tuple(range(width, width + len(exprs))))
    items = [f"{e.sql} AS {n}" for e, n in chosen] + [f"{t} AS {n}" for t, _, n in extra]
    sql = f"{prefix}SELECT {', '.join(items)} FROM {f.sql}{_where_text(conds)}"
    names, types = _typed_names(plan, names)
    return Query(sql, plan, names, types)


def _scalar_subquery(g: SqlGen, depth: int) -> Query:
    """``(SELECT agg FROM t AS i [WHERE i.a = o.b] [AND ...])`` in the select list or compared
    in ``WHERE``; uncorrelated, or correlated on an equality with an enclosing column. An
    aggregate without ``GROUP BY``: one row per evaluation (never the second-row error)."""
    f = g.from_item(depth - 1)
    prefix, conds, plan = _filtered(g, f)
    arity = typecheck(plan).arity
    inner, inner_conds, body = _body(g)
    pairs = [
        (o, i)
        for o in _outer_cols(f)
        for i in inner.cols
        if o[1].type.scalar is i.type.scalar and o[1].type.scalar in (S.INT64, S.STRING)
    ]
    correlated = bool(pairs) and chance(g.choices, 600)
    name, func, scalar = pick(g.choices, _WINDOW_AGGS)
    got = g.column(inner, scalar) if name != "count" or chance(g.choices, 500) else None
    if got is None or (got[1].type.scalar is S.BOOL and name != "count"):
        agg_sql, agg = "count(*)", Aggregate(AggFunc.COUNT)
    else:
        agg_sql, agg = f"{name}({got[0]})", Aggregate(func, got[1].pos)
    value: ScalarExpr
    if correlated:
        (otext, oc), ic = pick(g.choices, pairs)
        inner_conds = [f"{ic.qual}.{ic.name} = {otext}", *inner_conds]
        per_key = Reduce(body, (ic.pos,), (agg,))
        plan = Join((plan, per_key), ((oc.pos, arity),), JoinKind.LEFT)
        value = ColumnRef(arity + 1)
        g._used.append("correlated_scalar_subquery")
    else:
        plan = Join((plan, _global(body, (agg,))), (), JoinKind.INNER)
        value = ColumnRef(arity)
        g._used.append("scalar_subquery")
    if agg.func is AggFunc.COUNT:  # a key no body row has: no row, and count's 0
        value = CallVariadic(VariadicFunc.COALESCE, (value, Literal(0, S.INT64)))
    sub = f"(SELECT {agg_sql} FROM {inner.sql}{_where_text(inner_conds)})"
    vtype = scalar_type_of(plan, value)
    targets = _outer_cols(f, vtype)
    if targets and chance(g.choices, 400):  # compared in WHERE
        otext, oc = pick(g.choices, targets)
        op = pick(g.choices, tuple(_COMPARE))
        plan = Project(
            Filter(plan, (CallBinary(_COMPARE[op], ColumnRef(oc.pos), value),)), tuple(range(arity))
        )
        g._used.append("subquery_in_where")
        return _finish(g, f, prefix, [*conds, f"{otext} {op} {sub}"], plan)
    return _finish(g, f, prefix, conds, plan, [(sub, value, "sq")])


def scalar_type_of(plan: Plan, expr: ScalarExpr) -> ScalarType:
    """The scalar type of ``expr`` over ``plan``'s rows."""
    return typecheck(Map(plan, (expr,), ("v",))).columns[-1].type.scalar


def _exists(g: SqlGen, depth: int) -> Query:
    """``WHERE [NOT] EXISTS (SELECT ... FROM t AS i [WHERE i.a = o.b] [AND ...])``: the
    reference joins the rows with the body's distinct keys (or, uncorrelated, with one empty
    row if the body has any), and ``NOT`` subtracts those rows from all."""
    f = g.from_item(depth - 1)
    prefix, conds, plan = _filtered(g, f)
    arity = typecheck(plan).arity
    inner, inner_conds, body = _body(g)
    pairs = [
        (o, i) for o in _outer_cols(f) for i in inner.cols if o[1].type.scalar is i.type.scalar
    ]
    negated = chance(g.choices, 500)
    if pairs and chance(g.choices, 750):
        (otext, oc), ic = pick(g.choices, pairs)
        inner_conds = [f"{otext} = {ic.qual}.{ic.name}", *inner_conds]
        keys: Plan = Distinct(Project(body, (ic.pos,)))
        on: tuple[tuple[int, ...], ...] = ((oc.pos, arity),)
        g._used.append("correlated_exists")
    else:
        keys, on = Distinct(Project(body, ())), ()
        g._used.append("exists")
    if negated:
        g._used.append("not_exists")
    matched = Project(Join((plan, keys), on, JoinKind.INNER), tuple(range(arity)))
    plan = Union((plan, Negate(matched))) if negated else matched
    what = pick(g.choices, ("1", "*", f"{inner.cols[0].qual}.{inner.cols[0].name}"))
    cond = f"{'NOT ' if negated else ''}EXISTS (SELECT {what} FROM {inner.sql}{_where_text(inner_conds)})"
    return _finish(g, f, prefix, [*conds, cond], plan)


def _in_subquery(g: SqlGen, depth: int) -> Query:
    """``x [NOT] IN (SELECT i.a FROM t AS i [WHERE ...])`` in ``WHERE`` or as a value, over
    columns with NULLs. The reference is SQL's three-valued rule written out: true if some
    ``a = x``; else false if the body is empty; else NULL if ``x`` or some ``a`` is NULL; else
    false (so ``NOT IN`` a body with a NULL is never true) -- from the body's row count and
    non-NULL count (one row, even over nothing) and a left join with its distinct values."""
    f = g.from_item(depth - 1)
    prefix, conds, plan = _filtered(g, f)
    arity = typecheck(plan).arity
    inner, inner_conds, body = _body(g)
    options = [
        (o, i)
        for o in f.refs()
        for i in inner.cols
        if o[1].type.scalar is i.type.scalar and i.type.scalar in (S.INT64, S.STRING)
    ]
    if not options:
        return _exists(g, depth)
    (otext, oc), ic = pick(g.choices, options)
    negated = chance(g.choices, 500)
    values = Project(body, (ic.pos,))
    counts = _global(values, (Aggregate(AggFunc.COUNT), Aggregate(AggFunc.COUNT, 0)))
    plan = Join((plan, counts), (), JoinKind.INNER)
    plan = Join((plan, Distinct(values)), ((oc.pos, arity + 2),), JoinKind.LEFT)
    rows, non_null, match = ColumnRef(arity), ColumnRef(arity + 1), ColumnRef(arity + 2)
    t, fa = Literal(True, S.BOOL), Literal(False, S.BOOL)
    truth: ScalarExpr = If(
        CallUnary(UnaryFunc.NOT, CallUnary(UnaryFunc.IS_NULL, match)),
        t,
        If(
            CallBinary(BinaryFunc.EQ, rows, Literal(0, S.INT64)),
            fa,
            If(
                _or(
                    CallUnary(UnaryFunc.IS_NULL, ColumnRef(oc.pos)),
                    CallBinary(BinaryFunc.GT, rows, non_null),
                ),
                Literal(None, S.BOOL),
                fa,
            ),
        ),
    )
    if negated:
        truth = CallUnary(UnaryFunc.NOT, truth)
    g._used.append("not_in_subquery" if negated else "in_subquery")
    sub = f"{otext} {'NOT ' if negated else ''}IN (SELECT {ic.qual}.{ic.name} FROM {inner.sql}{_where_text(inner_conds)})"
    if chance(g.choices, 500):
        plan = Project(Filter(plan, (truth,)), tuple(range(arity)))
        return _finish(g, f, prefix, [*conds, sub], plan)
    g._used.append("in_subquery_value")
    return _finish(g, f, prefix, conds, plan, [(f"({sub})", truth, "isin")])


_SHAPES: list[tuple[str, int, Any]] = [
    ("select", 40, _select),
    ("group_by", 16, _grouped),
    ("global_aggregate", 5, _global_aggregate),
    ("set_operation", 10, _set_operation),
    ("window", 8, _windowed),
    ("window_topk", 4, _window_topk),
    ("distinct_on", 4, _distinct_on),
    ("subquery_scalar", 5, _scalar_subquery),
    ("subquery_exists", 4, _exists),
    ("subquery_in", 5, _in_subquery),
]

CONSTRUCTS: tuple[str, ...] = (
    *(n for table in (_FROMS, _EXPRS, _PREDICATES, _SHAPES) for n, _, _ in table),
    *(f"agg_{a[0]}" for a in _AGGS),
    "parenthesized_join",
    "parameter",
    *(f"window_{k}" for k in _WINDOW_KINDS),
    *(f"topk_{k}" for k in ("row_number", "rank", "dense_rank")),
    "scalar_subquery",
    "correlated_scalar_subquery",
    "subquery_in_where",
    "exists",
    "correlated_exists",
    "not_exists",
    "in_subquery",
    "not_in_subquery",
    "in_subquery_value",
    "ilike",
    "like_escape",
    "like_default_escape",
    "not_like",
    "like_empty_pattern",
    "temporal_filter",
)
"""Every construct the generator knows (enable a subset with ``SqlGen(enabled=...)``)."""

DISABLED: dict[str, str] = {
    "parenthesized_join": "a JOIN (b JOIN c ON ...) ON ...: the generator would put a comma "
    "join in the parentheses too ((b, c) is not SQL) and its equality in the outer WHERE "
    "(wrong under an outer join); joins nest to the left only",
}
"""Constructs left out of every draw, with the reason."""
