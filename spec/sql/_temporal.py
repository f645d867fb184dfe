"""Temporal filters: ``mz_now()`` in ``WHERE`` and ``HAVING``, lowered to a ``TemporalFilter``.

Materialize accepts ``mz_now()`` in a condition only compared directly (``=``, ``<``,
``<=``, ``>``, ``>=``, or ``BETWEEN``, which is two of them) with an expression that does
not call it, numeric or timestamp, and only in conjuncts (``AND``) of the condition:
the comparisons give each row the interval of times at which it is in the result. Each
such conjunct becomes a predicate of one :class:`~tidegate.spec.plan.TemporalFilter`
after the ordinary conjuncts' ``Filter``; any other use of ``mz_now()`` in a condition
(``<>``, ``OR``, ``NOT``, arithmetic on ``mz_now()`` itself) is refused as an unsupported
temporal predicate, and ``mz_now()`` anywhere else as a call that cannot be materialized
(see :mod:`._functions`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlglot import exp

from ..errors import SqlTypeError, UnsupportedSql
from ..plan import Cast, Literal, ScalarExpr, TemporalOp
from ._common import S, _err, pg_type
from ._functions import call_of
from ._texpr import TExpr, _coerce

__all__ = ["calls_mz_now", "filters_by_mz_now", "split_temporal"]

_OPS: dict[type, TemporalOp] = {
    exp.EQ: TemporalOp.EQ,
    exp.LT: TemporalOp.LT,
    exp.LTE: TemporalOp.LE,
    exp.GT: TemporalOp.GT,
    exp.GTE: TemporalOp.GE,
}
# ``a <op> mz_now()`` is ``mz_now() <flipped op> a``
_FLIPPED = {
    TemporalOp.EQ: TemporalOp.EQ,
    TemporalOp.LT: TemporalOp.GT,
    TemporalOp.LE: TemporalOp.GE,
    TemporalOp.GT: TemporalOp.LT,
    TemporalOp.GE: TemporalOp.LE,
}


def _is_mz_now(node: Any) -> bool:
    while isinstance(node, exp.Paren):
        node = node.this
    call = call_of(node)
    return call is not None and call[0] == "mz_now"


def calls_mz_now(node: Any) -> bool:
    """Whether the expression ``node`` calls ``mz_now()`` anywhere."""
    if not isinstance(node, exp.Expression):
        return False
    return any(_is_mz_now(n) for n in node.walk())


def split_temporal(
    conjuncts: list[Any],
    bind: Callable[[Any], TExpr],
    fold: Callable[[ScalarExpr, Any], ScalarExpr],
) -> tuple[list[Any], list[tuple[TemporalOp, ScalarExpr]]]:
    """The conjuncts that do not call ``mz_now()``, and the temporal predicates
    ``mz_now() <op> bound`` of those that do, each bound bound by ``bind`` and folded by
    ``fold``.

    Raises :class:`UnsupportedSql` for a use of ``mz_now()`` that is not such a
    comparison and :class:`SqlTypeError` for a bound that is not an integer, a timestamp
    or a date.
    """
    plain: list[Any] = []
    temporal: list[tuple[TemporalOp, ScalarExpr]] = []
    for c in conjuncts:
        if not calls_mz_now(c):
            plain.append(c)
            continue
        for op, other in _comparisons(c):
            temporal.append((op, fold(_bound(bind(other), other), other)))
    return plain, temporal


def _comparisons(node: Any) -> list[tuple[TemporalOp, Any]]:
    """``node`` as ``mz_now() <op> other`` comparisons [UnsupportedSql]."""
    inner = node
    while isinstance(inner, exp.Paren):
        inner = inner.this
    if isinstance(inner, exp.And):
        return _comparisons(inner.this) + _comparisons(inner.expression)
    if isinstance(inner, exp.Between):
        value, low, high = inner.this, inner.args["low"], inner.args["high"]
        return _comparison(exp.GTE, value, low, node) + _comparison(exp.LTE, value, high, node)
    op = _OPS.get(type(inner))
    if op is not None:
        return _comparison(type(inner), inner.this, inner.expression, node)
    raise _unsupported_predicate(node)


def _comparison(kind: type, left: Any, right: Any, node: Any) -> list[tuple[TemporalOp, Any]]:
    op = _OPS[kind]
    if _is_mz_now(left) and not calls_mz_now(right):
        return [(op, right)]
    if _is_mz_now(right) and not calls_mz_now(left):
        return [(_FLIPPED[op], left)]
    raise _unsupported_predicate(node)


def _unsupported_predicate(node: Any) -> UnsupportedSql:
    text = node.sql(dialect="postgres") if isinstance(node, exp.Expression) else str(node)
    text = text.replace("MZ_NOW()", "mz_now()")  # as it was most likely written
    return _err(
        UnsupportedSql,
        "temporal predicate "
        f"{text} (mz_now() must be compared directly, with =, <, <=, >, >= or BETWEEN, to a "
        "numeric or timestamp expression that does not call mz_now(), in a conjunct of WHERE "
        "or HAVING) is",
        node,
    )  # type: ignore[return-value]


def _bound(te: TExpr, node: Any) -> ScalarExpr:
    """A bound as an int64 (milliseconds), timestamp or date expression [SqlTypeError]."""
    if te.expr is None or te.type is None:
        return Literal(None, S.INT64)
    if te.literal is not None:
        return _coerce(te, S.TIMESTAMP, node)  # '2024-01-01 00:00' reads as a timestamp
    if te.scalar in (S.INT64, S.TIMESTAMP, S.DATE):
        return te.expr
    if te.scalar in (S.INT16, S.INT32):
        return Cast(te.expr, S.INT64)
    assert te.scalar is not None
    raise _err(
        SqlTypeError,
        f"mz_now() cannot be compared with {pg_type(te.scalar)}: only with an integer "
        "(milliseconds since 1970), a timestamp or a date",
        node,
    )


def filters_by_mz_now(query: Any, maintained: bool) -> bool:
    """Whether a statement's ``mz_now()`` calls are to be lowered as temporal filters rather
    than read as the time the statement runs (as a session reads ``now()``).

    A maintained statement's (``maintained``: a view, an index, a subscribe) always are:
    lowering refuses those that are not a temporal filter's. A query read once keeps
    them only when every call is a temporal filter's comparison (``SELECT mz_now()``
    answers the time it ran, as in Materialize).
    """
    if maintained:
        return True
    if not isinstance(query, exp.Expression):
        return False
    total = sum(1 for n in query.walk() if _is_mz_now(n))
    filtering = 0
    for select in query.find_all(exp.Select):
        for clause in ("where", "having"):
            cond = select.args.get(clause)
            if cond is None:
                continue
            for c in _top_conjuncts(cond.this):
                if not calls_mz_now(c):
                    continue
                try:
                    _comparisons(c)
                except UnsupportedSql:
                    continue
                filtering += sum(1 for n in c.walk() if _is_mz_now(n))
    return total > 0 and filtering == total


def _top_conjuncts(node: Any) -> list[Any]:
    if isinstance(node, exp.And):
        return _top_conjuncts(node.this) + _top_conjuncts(node.expression)
    if isinstance(node, exp.Paren) and isinstance(node.this, exp.And):
        return _top_conjuncts(node.this)
    return [node]
