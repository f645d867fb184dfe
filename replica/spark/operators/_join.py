"""The binary equi-join, both inputs arranged in Spark by their key columns."""

from __future__ import annotations

from pyspark.sql import SparkSession

from tidegate.spec.executor.operators import equivalence_check, join_key_casts, key_function
from tidegate.spec.frontier import Row
from tidegate.spec.plan.schema import ScalarType, Schema

from ..arrangement import SparkArrangement
from ._base import Changes, Node, StatefulNode, by_key_time

__all__ = ["JoinNode"]


def _always(row: Row) -> bool:
    return True


def _implied(
    classes: list[tuple[int, ...]],
    schemas: tuple[Schema, Schema],
    keys: tuple[tuple[int, ...], tuple[int, ...]],
) -> bool:
    """Whether the equivalence check holds for every pair of rows the key lookup matches:
    each class is exactly one key pair, of one type that is not float64 (Python's equality of
    the non-NULL keys is then the check's; float64 keys keep it: NaN, -0.0)."""
    arity = schemas[0].arity
    pairs = {(lk, rk + arity) for lk, rk in zip(keys[0], keys[1], strict=True)}
    for lk, rk in zip(keys[0], keys[1], strict=True):
        lt, rt = schemas[0].columns[lk].type.scalar, schemas[1].columns[rk].type.scalar
        if lt is not rt or lt is ScalarType.FLOAT64:
            return False
    return len(classes) == len(pairs) and {tuple(sorted(c)) for c in classes} == pairs


class JoinNode(StatefulNode):
    """A binary equi-join; both inputs arranged in Spark by their key columns.

    A step's output is ``dL x R + L x dR + dL x dR`` (old arrangements ``L``,
    ``R``; a pair of changes at ``t1``, ``t2`` lands at ``max(t1, t2)``). Rows
    with a NULL key never join and are not stored. An int64 key column paired
    with a float64 one is keyed (and looked up) as float64, as SQL compares them.
    """

    def __init__(
        self,
        spark: SparkSession,
        left: Node,
        right: Node,
        schemas: tuple[Schema, Schema],
        keys: tuple[tuple[int, ...], tuple[int, ...]],
        classes: list[tuple[int, ...]],
    ) -> None:
        super().__init__([left, right])
        casts = join_key_casts(schemas, keys)
        self.keyfns = (key_function(keys[0], casts[0]), key_function(keys[1], casts[1]))
        self.arrs = (
            SparkArrangement(spark, schemas[0], keys[0], as_float=casts[0]),
            SparkArrangement(spark, schemas[1], keys[1], as_float=casts[1]),
        )
        self.arrangements = self.arrs
        check = equivalence_check(classes, schemas[0].concat(schemas[1]))
        self.check = _always if _implied(classes, schemas, keys) else check

    def _delta(self, side: int) -> tuple[dict[Row, dict[int, dict[Row, int]]], dict[Row, int]]:
        """The side's change by key and time (NULL keys dropped), and its net ``row -> diff``
        over all times (what its arrangement appends)."""
        keyfn = self.keyfns[side]
        changes = [u for u in self.inputs[side].out if None not in keyfn(u[0])]
        net: dict[Row, int] = {}
        get = net.get
        for r, _, d in changes:
            net[r] = get(r, 0) + d
        return by_key_time(changes, keyfn), net

    def run(self, first_time: int | None) -> None:
        self.errs = self._input_errs()
        (dl, net_l), (dr, net_r) = self._delta(0), self._delta(1)
        out: Changes = []
        check = self.check
        if dl or dr:
            old_r = self.arrs[1].lookup(dl)
            old_l = self.arrs[0].lookup(dr)
            for k, times in dl.items():
                rrows = old_r.get(k, {})
                for t, lrows in times.items():
                    for lrow, ld in lrows.items():
                        for rrow, rc in rrows.items():
                            row = lrow + rrow
                            if check(row):
                                out.append((row, t, ld * rc))
                rtimes = dr.get(k, {})
                for t, lrows in times.items():
                    for t2, rrows2 in rtimes.items():
                        tt = max(t, t2)
                        for lrow, ld in lrows.items():
                            for rrow, rd in rrows2.items():
                                row = lrow + rrow
                                if check(row):
                                    out.append((row, tt, ld * rd))
            for k, times in dr.items():
                lrows_old = old_l.get(k, {})
                for t, rrows in times.items():
                    for rrow, rd in rrows.items():
                        for lrow, lc in lrows_old.items():
                            row = lrow + rrow
                            if check(row):
                                out.append((row, t, lc * rd))
            self.arrs[0].append(net_l)  # zero diffs are skipped there
            self.arrs[1].append(net_r)
        self.out = out
