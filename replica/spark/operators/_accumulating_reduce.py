"""The accumulating Reduce: count/sum/avg kept as per-key vectors, its step in Arrow kernels.

See :class:`AccumulatingReduceNode`. It is the one operator whose state is
not its input rows, and the one whose step is vectorised; both make its work
per step follow the keys the change touches, not the rows accumulated.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from itertools import repeat
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession

from tidegate.spec.errors import EvaluationError
from tidegate.spec.executor.operators import key_function
from tidegate.spec.frontier import Row
from tidegate.spec.plan.aggregates import exact_mean, exact_to_value
from tidegate.spec.plan.relation import AggFunc, Aggregate
from tidegate.spec.plan.schema import ScalarType, Schema

from .._arrow import arrow_schema
from .._fingerprint import PRIME, Fingerprinter
from ..arrangement import Acc, SparkAccumulators, fold_mod_prime, mod_prime, sum_fits
from ..phases import PHASES
from ._base import Changes, Node, StatefulNode, by_key_time

__all__ = ["AccumulatingReduceNode"]


class AccumulatingReduceNode(StatefulNode):
    """A Reduce whose aggregates are all count/sum/avg (not distinct) over int64 or ``*``.

    Its state is per-key accumulators only (:class:`SparkAccumulators`), not
    the input rows: ``count(*)`` and two row fingerprints (the group is present
    iff its rows are non-empty, see :mod:`.._fingerprint`), then per aggregated
    nullable column the count of non-NULL values, their exact sum and two
    fingerprints of the rows with a non-NULL value (``sum`` is NULL iff there
    are none); per non-nullable column only the exact sum, since its count and
    presence are the group's. Fewer columns make every Spark read cheaper. A
    step looks up the touched keys' vectors (one Spark job) and appends the
    vectors' changes, so state and work are per key, independent of how many
    distinct rows the input has accumulated. Its output is consolidated (per
    key and time, one retraction and one insertion of different rows).

    The step is vectorised: the change becomes Arrow columns (per row only the
    fingerprints are Python work), is grouped by key and time with checked
    int64 arithmetic, and the replay is a per-key cumulative sum joined with
    the old vectors (:meth:`_replay_arrow`). Float keys, NULL keys, values or
    sums beyond int64 and averages beyond 2**53 fall back, for that step, to
    the per-key Python replay (:meth:`_replay`), which uses Python integers.
    A group whose sum leaves int64 outputs the error "integer out of range"
    (once) instead of a row, as in the reference; the Arrow replay's checked
    arithmetic never holds such a sum (it falls back instead).
    """

    def __init__(
        self,
        spark: SparkSession,
        inp: Node,
        schema: Schema,
        key: tuple[int, ...],
        aggs: tuple[Aggregate, ...],
        fingerprint: Fingerprinter,
    ) -> None:
        super().__init__([inp])
        self.consolidated = True
        self.key = key
        self.keyfn = key_function(key)
        self.aggs = aggs
        self.fp = fingerprint
        self.columns = sorted({a.column for a in aggs if a.column is not None})
        kinds = [Acc.COUNT, Acc.FINGERPRINT, Acc.FINGERPRINT]
        self.slot: dict[int, int] = {}
        self._cols: list[tuple[int, int]] = []  # nullable columns: count, sum, 2 fingerprints
        self._sums: list[tuple[int, int]] = []  # non-nullable ones: the sum only
        for c in self.columns:
            self.slot[c] = len(kinds)
            if schema.columns[c].type.nullable:
                self._cols.append((c, len(kinds)))
                kinds += [Acc.COUNT, Acc.SUM, Acc.FINGERPRINT, Acc.FINGERPRINT]
            else:
                self._sums.append((c, len(kinds)))
                kinds.append(Acc.SUM)
        self._nullable = {c for c, _ in self._cols}
        self.acc = SparkAccumulators(spark, schema.project(key), kinds)
        self.arrangements = (self.acc,)
        self._fps = [j for j, kind in enumerate(kinds) if kind is Acc.FINGERPRINT]
        key_schema = schema.project(key)
        self._key_types = [f.type for f in arrow_schema(key_schema)]
        # Arrow groups -0.0 apart from 0.0 (and NaNs by bits): float keys are grouped in Python
        self._arrow_keys = all(c.type.scalar is not ScalarType.FLOAT64 for c in key_schema.columns)

    @staticmethod
    def supports(schema: Schema, aggs: tuple[Aggregate, ...]) -> bool:
        """Whether every aggregate is accumulable exactly in integers."""
        return all(
            not a.distinct
            and a.func in (AggFunc.COUNT, AggFunc.SUM, AggFunc.AVG)
            and (a.column is None or schema.columns[a.column].type.scalar is ScalarType.INT64)
            for a in aggs
        )

    def _output(self, key: Row, v: list[int]) -> Row | str | None:
        """The key's output for vector ``v``: its row, none (an empty group), or the error
        message of a sum beyond int64 (the group is then that error, as in the reference)."""
        if v[0] == 0 and v[1] == 0 and v[2] == 0:
            return None
        vals: list[Any] = []
        try:
            for a in self.aggs:
                if a.column is None:
                    vals.append(v[0])
                    continue
                s = self.slot[a.column]
                if a.column in self._nullable:
                    count, total, present = v[s], v[s + 1], v[s] or v[s + 2] or v[s + 3]
                else:  # no NULLs: its values are the group's rows (present, as the group is)
                    count, total, present = v[0], v[s], True
                if a.func is AggFunc.COUNT:
                    vals.append(count)
                elif not present:
                    vals.append(None)
                elif a.func is AggFunc.SUM:
                    vals.append(exact_to_value(total, False))
                else:
                    vals.append(None if count == 0 else exact_mean(total, count))
        except EvaluationError as e:  # a sum beyond int64
            return str(e)
        return key + tuple(vals)

    def _deltas(self, rows: dict[Row, int]) -> list[int]:
        """The change of a key's vector for ``row -> diff`` changes (fingerprints mod PRIME)."""
        dv = [0] * self.acc.width
        fp = self.fp
        cols, sums = self._cols, self._sums
        for row, d in rows.items():
            f1, f2 = fp(row)
            dv[0] += d
            dv[1] += d * f1
            dv[2] += d * f2
            for c, s in sums:
                x = row[c]
                if x is not None:  # NULL only in a row that broke the schema (check_rows=False)
                    dv[s] += x * d
            for c, s in cols:
                x = row[c]
                if x is None:
                    continue
                dv[s] += d
                dv[s + 1] += x * d
                dv[s + 2] += d * f1
                dv[s + 3] += d * f2
        for j in self._fps:
            dv[j] %= PRIME
        return dv

    def run(self, first_time: int | None) -> None:
        """Look up the touched keys' vectors in Spark while the changes' own vectors are
        computed in the driver (they do not depend on the state), then replay per key.

        The change is grouped by key and time in Arrow when its keys and values fit Arrow's
        exact int64 arithmetic (checked); otherwise, and for float keys (whose equality
        Arrow and Python do not share), in Python."""
        self.errs = self._input_errs()
        changes = self.inputs[0].out
        if not changes:
            self.out = []
            return
        cols = self._arrow_columns(changes) if self._arrow_keys else None
        if cols is None:
            self._run_rows(changes)
        else:
            self._run_arrow(changes, *cols)

    def _arrow_columns(self, changes: Changes) -> tuple[list[Any], Any, dict[int, Any]] | None:
        """Key columns, diffs and per aggregated column ``value * diff`` as Arrow arrays, or
        ``None`` if a value does not fit int64 or a sum of them might not."""
        try:
            ds = pa.array([u[2] for u in changes], pa.int64())
            keys = [
                pa.array([u[0][i] for u in changes], self._key_types[j])
                for j, i in enumerate(self.key)
            ]
            prods = {
                c: pc.multiply_checked(pa.array([u[0][c] for u in changes], pa.int64()), ds)
                for c in self.columns
            }
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError, ValueError):
            return None
        n = len(changes)
        if not sum_fits(ds, n) or not all(sum_fits(p, n) for p in prods.values()):
            return None
        return keys, ds, prods

    def _run_arrow(self, changes: Changes, keys: list[Any], ds: Any, prods: dict[int, Any]) -> None:
        names = [f"k{j}" for j in range(len(keys))]
        with PHASES("reduce.lookup_start"):
            distinct = pa.table(dict(zip(names, keys, strict=True)))
            if names:
                distinct = distinct.group_by(names, use_threads=False).aggregate([])
            pending = self.acc.fetch_start(
                distinct.rename_columns(self.acc.key_cols) if names else None
            )
        with PHASES("reduce.columns"):
            fp = self.fp
            f1: list[int] = []
            f2: list[int] = []
            for row, _, d in changes:
                a, b = fp(row)
                if d != 1:
                    a, b = a * d % PRIME, b * d % PRIME
                f1.append(a)
                f2.append(b)
            fps = (pa.array(f1, pa.int64()), pa.array(f2, pa.int64()))
            cols: dict[str, Any] = dict(zip(names, keys, strict=True))
            cols["t"] = pa.array([u[1] for u in changes], pa.int64())
            sums: list[str] = []  # per slot: its column, or its two halves for a fingerprint

            def add_fp(j: int, f: Any, valid: Any) -> None:
                hi, lo = pc.shift_right(f, 30), pc.bit_wise_and(f, 2**30 - 1)
                if valid is not None:
                    hi, lo = pc.if_else(valid, hi, 0), pc.if_else(valid, lo, 0)
                cols[f"s{j}a"], cols[f"s{j}b"] = hi, lo
                sums.extend((f"s{j}a", f"s{j}b"))

            cols["s0"] = ds
            sums.append("s0")
            add_fp(1, fps[0], None)
            add_fp(2, fps[1], None)
            for c, s in self._sums:
                cols[f"s{s}"] = pc.fill_null(prods[c], 0)
                sums.append(f"s{s}")
            for c, s in self._cols:
                valid = pc.is_valid(prods[c])
                cols[f"s{s}"] = pc.if_else(valid, ds, 0)
                cols[f"s{s + 1}"] = pc.fill_null(prods[c], 0)
                sums.extend((f"s{s}", f"s{s + 1}"))
                add_fp(s + 2, fps[0], valid)
                add_fp(s + 3, fps[1], valid)
        with PHASES("reduce.group"):
            by_time = pa.table(cols).group_by([*names, "t"], use_threads=False)
            grouped = by_time.aggregate([(c, "sum") for c in sums])
            grouped = grouped.sort_by([(n, "ascending") for n in [*names, "t"]])
            per_key = grouped.group_by(names, use_threads=False) if names else None
            if per_key is not None:
                totals = per_key.aggregate([(f"{c}_sum", "sum") for c in sums])
                tcol: Callable[[str], Any] = lambda c: totals.column(f"{c}_sum_sum")  # noqa: E731
                tkeys = [totals.column(n) for n in names]
            else:
                tcol = lambda c: pa.array([pc.sum(grouped.column(f"{c}_sum")).as_py()], pa.int64())  # noqa: E731
                tkeys = []
            run_values = []
            dvs: list[Any] = []  # per slot: the group's change (fingerprints folded)
            for j, kind in enumerate(self.acc.kinds):
                if kind is Acc.FINGERPRINT:
                    run_values.append(fold_mod_prime(tcol(f"s{j}a"), tcol(f"s{j}b")))
                    g = fold_mod_prime(grouped.column(f"s{j}a_sum"), grouped.column(f"s{j}b_sum"))
                    dvs.append(g)
                else:
                    run_values.append(tcol(f"s{j}"))
                    dvs.append(grouped.column(f"s{j}_sum"))
            run = self.acc.run_table(tkeys, run_values)
        with PHASES("reduce.wait"):
            tables = pending()
        out: Changes | None = None
        with PHASES("reduce.replay"):
            if names and not any(grouped.column(n).null_count for n in names):
                fetched = [t for t in tables if t.num_rows]
                base = self.acc.sum_arrow(fetched) if fetched else None
                if base is not None or not fetched:
                    out = self._replay_arrow(grouped, names, dvs, base)
            if out is None:
                old = self.acc.sum_dict(tables)
                key_lists = [grouped.column(n).to_pylist() for n in names]
                group_keys = (
                    list(zip(*key_lists, strict=True)) if key_lists else [()] * grouped.num_rows
                )
                times = grouped.column("t").to_pylist()
                deltas = list(zip(*(d.to_pylist() for d in dvs), strict=True))
                out = self._replay(old, zip(group_keys, times, deltas, strict=True), self.errs)
            self.out = out
        with PHASES("reduce.push"):
            if run.num_rows:
                self.acc.push(run)

    def _replay_arrow(
        self, grouped: pa.Table, names: list[str], dvs: list[Any], base: pa.Table | None
    ) -> Changes | None:
        """:meth:`_replay` in Arrow kernels: ``grouped`` holds the change per key (columns
        ``names``, no NULLs) and time, sorted by both; ``dvs`` its vector changes per slot;
        ``base`` the keys' old vectors (``v{j}``; ``None``: all zero). Each slot's running
        value is a per-key (segmented) cumulative sum. ``None`` when an average's operands
        are beyond 2**53 (its float division would not be exact) or Arrow refuses a type."""
        try:
            return self._replay_arrow_unchecked(grouped, names, dvs, base)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            return None

    def _replay_arrow_unchecked(
        self, grouped: pa.Table, names: list[str], dvs: list[Any], base: pa.Table | None
    ) -> Changes | None:
        n = grouped.num_rows
        kinds = self.acc.kinds
        g = grouped.append_column("_i", pa.array(range(n), pa.int64()))
        for j, dv in enumerate(dvs):
            g = g.append_column(f"d{j}", dv)
        if base is not None and len(names) == 1:
            # one key column: align the old vectors by a hash lookup of each group's key
            # (an Acero join's fixed cost was most of a small step's replay)
            col = g.column(names[0])
            bkeys = base.column(0).cast(col.type)
            at = pc.index_in(col, value_set=bkeys.combine_chunks())
            for j in range(len(kinds)):
                g = g.append_column(f"b{j}", pc.take(base.column(1 + j), at))
        elif base is not None:
            bnames = [*names, *(f"b{j}" for j in range(len(kinds)))]
            b = base.rename_columns(bnames)
            b = b.cast(pa.schema([g.schema.field(x) for x in names] + list(b.schema)[len(names) :]))
            g = g.join(b, keys=names, join_type="left outer", use_threads=False).sort_by("_i")
        flags: Any = pa.array([True])
        if n > 1:
            neq: Any = None
            for x in names:
                col = g.column(x)
                ne = pc.not_equal(col.slice(1), col.slice(0, n - 1))
                neq = ne if neq is None else pc.or_(neq, ne)
            flags = pa.concat_arrays([flags, neq.combine_chunks()])
        seg = pc.subtract(pc.cumulative_sum(pc.cast(flags, pa.int64())), 1)
        starts = pc.indices_nonzero(flags)

        def running(x: Any) -> Any:  # the per-key cumulative sum of int64 column x
            cs = pc.cumulative_sum_checked(x)
            return pc.subtract(cs, pc.take(pc.take(pc.subtract(cs, x), starts), seg))

        after: list[Any] = []
        before: list[Any] = []
        for j, kind in enumerate(kinds):
            dv = g.column(f"d{j}")
            old = (
                pc.fill_null(g.column(f"b{j}"), 0)
                if base is not None
                else pa.nulls(n, pa.int64()).fill_null(0)
            )
            if kind is Acc.FINGERPRINT:
                cum = fold_mod_prime(
                    running(g.column(f"s{j}a_sum")), running(g.column(f"s{j}b_sum"))
                )
                a = mod_prime(pc.add(old, cum))
                after.append(a)
                before.append(mod_prime(pc.add(pc.subtract(a, dv), PRIME)))
            else:
                a = pc.add_checked(old, running(dv))
                after.append(a)
                before.append(pc.subtract_checked(a, dv))
        cur = self._outputs_arrow(after)
        prev = self._outputs_arrow(before)
        if cur is None or prev is None:
            return None
        (p_cur, v_cur), (p_prev, v_prev) = cur, prev
        differ: Any = pc.not_equal(p_cur, p_prev)
        both = pc.and_(p_cur, p_prev)
        for x, y in zip(v_cur, v_prev, strict=True):
            ne = pc.fill_null(pc.not_equal(x, y), True)
            ne = pc.and_not(ne, pc.and_(pc.is_null(x), pc.is_null(y)))
            differ = pc.or_(differ, pc.and_(both, ne))
        out: Changes = []
        keys = [g.column(x) for x in names]
        times = g.column("t")
        for present, values, sign in ((p_prev, v_prev, -1), (p_cur, v_cur, 1)):
            mask = pc.and_(differ, present)
            cols = [c.filter(mask).to_pylist() for c in [*keys, *values]]
            ts = times.filter(mask).to_pylist()
            out.extend(zip(zip(*cols, strict=True), ts, repeat(sign, len(ts)), strict=True))
        return out

    def _outputs_arrow(self, v: list[Any]) -> tuple[Any, list[Any]] | None:
        """Per group: whether the output row exists, and its aggregate columns (as
        :meth:`_output`); ``None`` if an average cannot be computed exactly in float64."""
        present = pc.or_(
            pc.or_(pc.not_equal(v[0], 0), pc.not_equal(v[1], 0)), pc.not_equal(v[2], 0)
        )
        vals: list[Any] = []
        for a in self.aggs:
            if a.column is None:
                vals.append(v[0])
                continue
            s = self.slot[a.column]
            if a.column in self._nullable:
                count, total = v[s], v[s + 1]
                has = pc.or_(
                    pc.or_(pc.not_equal(count, 0), pc.not_equal(v[s + 2], 0)),
                    pc.not_equal(v[s + 3], 0),
                )
            else:
                count, total, has = v[0], v[s], None
            if a.func is AggFunc.COUNT:
                vals.append(count)
            elif a.func is AggFunc.SUM:
                vals.append(
                    total if has is None else pc.if_else(has, total, pa.scalar(None, pa.int64()))
                )
            else:
                for col in (count, total):
                    mm = pc.min_max(col)
                    lo, hi = mm["min"].as_py(), mm["max"].as_py()
                    if lo is not None and max(abs(lo), abs(hi)) > 2**53:
                        return None
                # both exact in float64, so IEEE division rounds the exact quotient; + 0.0
                # turns -0.0 into 0.0 as Fraction does
                q = pc.add(
                    pc.divide(pc.cast(total, pa.float64()), pc.cast(count, pa.float64())), 0.0
                )
                ok = pc.not_equal(count, 0)
                if has is not None:
                    ok = pc.and_(ok, has)
                vals.append(pc.if_else(ok, q, pa.scalar(None, pa.float64())))
        return present, vals

    def _replay(
        self,
        old: dict[Row, list[int]],
        groups: Iterable[tuple[Row, int, Sequence[int]]],
        errs: Changes,
    ) -> Changes:
        """The output changes of ``(key, time, vector change)`` groups, ordered by key then
        time, starting from each key's ``old`` vector; the changes of groups' errors (sums
        beyond int64) are appended to ``errs``."""
        out: Changes = []
        width = self.acc.width
        fps = self._fps
        output = self._output
        key: Row | None = None
        v: list[int] = []
        prev: Row | str | None = None
        for k, t, dv in groups:
            if k != key:
                key = k
                base = old.get(k)
                v = [0] * width if base is None else base
                prev = output(k, v)
            v = [a + b for a, b in zip(v, dv, strict=True)]
            for j in fps:
                v[j] %= PRIME
            cur = output(k, v)
            if cur != prev:
                if prev is not None:
                    (errs if type(prev) is str else out).append((prev, t, -1))
                if cur is not None:
                    (errs if type(cur) is str else out).append((cur, t, 1))
                prev = cur
        return out

    def _run_rows(self, changes: Changes) -> None:
        """:meth:`run` with the change grouped in Python (any values)."""
        by_key = by_key_time(changes, self.keyfn)
        if not by_key:
            self.out = []
            return
        pending = self.acc.lookup_start(self.acc.keys_table(by_key))
        width = self.acc.width
        fps = self._fps
        groups: list[tuple[Row, int, Sequence[int]]] = []
        total: dict[Row, list[int]] = {}
        for k, times in by_key.items():
            acc = [0] * width
            for t in sorted(times):
                dv = self._deltas(times[t])
                groups.append((k, t, dv))
                for j, x in enumerate(dv):
                    acc[j] += x
            for j in fps:
                acc[j] %= PRIME
            total[k] = acc
        run = self.acc.prepare(total)
        self.out = self._replay(pending(), groups, self.errs)
        if run is not None:
            self.acc.push(run)
