"""The accumulating Reduce: count/sum/avg kept as per-key vectors, its step vectorised.

See :class:`AccumulatingReduceNode`. It is the one operator whose state is
not its input rows, and the one whose step is vectorised; both make its work
per step follow the keys the change touches, not the rows accumulated.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence
from itertools import repeat
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession

from tidegate.runtime.arrow_values import arrow_values, column_values
from tidegate.spec.errors import EvaluationError
from tidegate.spec.executor.operators import key_function
from tidegate.spec.frontier import Row
from tidegate.spec.plan.aggregates import exact_mean, exact_to_value
from tidegate.spec.plan.relation import AggFunc, Aggregate
from tidegate.spec.plan.schema import ScalarType, Schema

from .._arrow import arrow_schema
from .._fingerprint import PRIME, Fingerprinter
from ..arrangement import Acc, SparkAccumulators, sum_fits
from ..phases import PHASES
from ._base import Changes, Node, StatefulNode, by_key_time
from ._vectors import Bools, Grouping, Ints, Layout, Segments, column_matrix, halves

__all__ = ["AccumulatingReduceNode"]

_ARROW_REFUSALS: tuple[type[Exception], ...] = (
    pa.ArrowInvalid,
    pa.ArrowNotImplementedError,
    pa.ArrowTypeError,
)
"""What Arrow raises for a type it refuses: the step falls back to the Python replay."""


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

    The step is vectorised: the change becomes one int64 matrix (per row only
    the fingerprints are Python work), is grouped by key and time, and the
    replay is a per-key cumulative sum of every slot at once added to the old
    vectors (:meth:`_replay_vectorised`, numpy: :mod:`._vectors`), with checked
    int64 arithmetic. Float keys, NULL keys, values or sums beyond int64 and
    averages beyond 2**53 fall back, for that step, to the per-key Python
    replay (:meth:`_replay`), which uses Python integers. A group whose sum
    leaves int64 outputs the error "integer out of range" (once) instead of a
    row, as in the reference; the vectorised replay's checked arithmetic never
    holds such a sum (it falls back instead).
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
        self._layout = Layout(kinds)
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

        The change is grouped by key and time in numpy when its keys and values fit exact
        int64 arithmetic (checked); otherwise, and for float keys (whose equality Arrow and
        Python do not share), in Python."""
        self.errs = self._input_errs()
        changes = self.inputs[0].out
        if not changes:
            self.out = []
            return
        cols = self._arrow_columns(changes) if self._arrow_keys else None
        if cols is None:
            self._run_rows(changes)
        else:
            self._run_arrow(changes, cols)

    def _arrow_columns(self, changes: Changes) -> _Columns | None:
        """The change as columns (:class:`_Columns`), or ``None`` if a value or time does not
        fit int64 or a sum of values might not."""
        try:
            ds = pa.array([u[2] for u in changes], pa.int64())
            keys = [
                pa.array(arrow_values([u[0][i] for u in changes]), self._key_types[j])
                for j, i in enumerate(self.key)
            ]
            prods = {
                c: pc.multiply_checked(pa.array([u[0][c] for u in changes], pa.int64()), ds)
                for c in self.columns
            }
            times = np.array([u[1] for u in changes], np.int64)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError, ValueError):
            return None
        n = len(changes)
        if not sum_fits(ds, n) or not all(sum_fits(p, n) for p in prods.values()):
            return None
        return _Columns(keys, ds, prods, times)

    def _run_arrow(self, changes: Changes, cols: _Columns) -> None:
        layout = self._layout
        keys = cols.keys
        with PHASES("reduce.lookup_start"):
            groups = Grouping([_codes(k) for k in keys], cols.times)
            key_rows = pa.array(groups.key_rows)
            tkeys = [k.take(key_rows) for k in keys]  # the distinct keys, in key order
            pending = self.acc.fetch_start(
                pa.Table.from_arrays(tkeys, names=self.acc.key_cols) if keys else None
            )
        with PHASES("reduce.columns"):
            x = self._change_matrix(changes, cols)
        with PHASES("reduce.group"):
            gx = groups.sums(x)  # per key and time, in key then time order
            segments = groups.segments
            totals = layout.vectors(segments.totals(gx))
            run = self.acc.run_table(tkeys, [pa.array(totals[:, j]) for j in range(layout.width)])
            rows = pa.array(groups.rows)
            gkeys = [k.take(rows) for k in keys]
        with PHASES("reduce.wait"):
            tables = pending()
        out: Changes | None = None
        with PHASES("reduce.replay"):
            if keys and not any(k.null_count for k in keys):
                fetched = [t for t in tables if t.num_rows]
                base = self.acc.sum_arrow(fetched) if fetched else None
                if base is not None or not fetched:
                    with contextlib.suppress(*_ARROW_REFUSALS):  # then the Python replay
                        out = self._replay_vectorised(gkeys, groups.times, gx, segments, base)
            if out is None:
                old = self.acc.sum_dict(tables)
                key_lists = [column_values(k) for k in gkeys]
                n = len(gx)
                group_keys = list(zip(*key_lists, strict=True)) if key_lists else [()] * n
                deltas = layout.vectors(gx).tolist()
                groups_ = zip(group_keys, groups.times.tolist(), deltas, strict=True)
                out = self._replay(old, groups_, self.errs)
            self.out = out
        with PHASES("reduce.push"):
            if run.num_rows:
                self.acc.push(run)

    def _change_matrix(self, changes: Changes, cols: _Columns) -> Ints:
        """Each change's vector change as a row of a :class:`Layout` matrix (fingerprints
        in halves; a nullable column's slots zero where its value is NULL)."""
        fp = self.fp
        f1: list[int] = []
        f2: list[int] = []
        for row, _, d in changes:
            a, b = fp(row)
            if d != 1:
                a, b = a * d % PRIME, b * d % PRIME
            f1.append(a)
            f2.append(b)
        fps = (np.array(f1, np.int64), np.array(f2, np.int64))
        ds = cols.ds.to_numpy()
        at = self._layout.columns
        x = np.empty((len(changes), self._layout.matrix_width), np.int64)

        def put_fp(j: int, f: Ints, valid: Bools | None) -> None:
            x[:, at[j]], x[:, at[j] + 1] = halves(f)
            if valid is not None:
                x[~valid, at[j] : at[j] + 2] = 0

        x[:, 0] = ds
        put_fp(1, fps[0], None)
        put_fp(2, fps[1], None)
        for c, s in self._sums:
            x[:, at[s]] = _filled(cols.prods[c])
        for c, s in self._cols:
            p = cols.prods[c]
            valid = p.is_valid().to_numpy(zero_copy_only=False) if p.null_count else None
            x[:, at[s]] = ds if valid is None else np.where(valid, ds, 0)
            x[:, at[s + 1]] = _filled(p)
            put_fp(s + 2, fps[0], valid)
            put_fp(s + 3, fps[1], valid)
        return x

    def _replay_vectorised(
        self,
        keys: list[Any],
        times: Ints,
        x: Ints,
        segments: Segments,
        base: pa.Table | None,
    ) -> Changes | None:
        """:meth:`_replay` vectorised: ``keys`` (Arrow key columns, no NULLs) and ``times``
        name the change's groups (one per key and time, by key then time), ``x`` their
        change matrix (:class:`Layout`), ``segments`` their keys' runs; ``base`` the keys'
        old vectors (``v{j}``; ``None``: all zero). Every slot's running value is a per-key
        cumulative sum, all slots at once (:meth:`Layout.replay`). ``None`` when a count or
        sum leaves int64 or an average's operands are beyond 2**53 (its float division would
        not be exact); a type Arrow refuses raises, and the caller falls back likewise."""
        old = self._old_vectors(keys, base)
        vectors = self._layout.replay(old, x, segments)
        if vectors is None:
            return None
        cur = self._outputs_vectorised(vectors[1])
        prev = self._outputs_vectorised(vectors[0])
        if cur is None or prev is None:
            return None
        (p_cur, v_cur), (p_prev, v_prev) = cur, prev
        differ = p_cur != p_prev
        both = p_cur & p_prev
        for (a, na), (b, nb) in zip(v_cur, v_prev, strict=True):
            ne = a != b
            if na is not None and nb is not None:  # NULL equals NULL only
                ne = np.where(na | nb, na != nb, ne)
            differ |= both & ne
        out: Changes = []
        for present, values, sign in ((p_prev, v_prev, -1), (p_cur, v_cur, 1)):
            at = np.flatnonzero(differ & present)
            if not len(at):
                continue
            cols = [_pylist(k, at) for k in keys]
            for v, nulls in values:
                col = v[at].tolist()
                if nulls is not None:
                    for i in np.flatnonzero(nulls[at]).tolist():
                        col[i] = None
                cols.append(col)
            ts = times[at].tolist()
            out.extend(zip(zip(*cols, strict=True), ts, repeat(sign, len(ts)), strict=True))
        return out

    def _old_vectors(self, keys: list[Any], base: pa.Table | None) -> Ints:
        """The old vector of each group's key (a row each, one column per slot; zeros for
        a key not in ``base``)."""
        n, width = len(keys[0]), self._layout.width
        if base is None:
            return np.zeros((n, width), np.int64)
        # one zero row past the fetched vectors, for the keys that have none
        vs = np.zeros((base.num_rows + 1, width), np.int64)
        vs[:-1] = column_matrix([base.column(f"v{j}") for j in range(width)], base.num_rows)
        if len(keys) == 1:
            # one key column: align the old vectors by a hash lookup of each group's key
            # (an Acero join's fixed cost was most of a small step's replay)
            bkeys = base.column(0).cast(keys[0].type).combine_chunks()
            at = pc.index_in(keys[0], value_set=bkeys)
        else:
            names = [f"k{j}" for j in range(len(keys))]
            b = base.select(list(range(len(keys)))).rename_columns(names)
            b = b.cast(pa.schema([pa.field(k, c.type) for k, c in zip(names, keys, strict=True)]))
            b = b.append_column("_b", pa.array(np.arange(base.num_rows, dtype=np.int64)))
            g = pa.Table.from_arrays(
                [*keys, pa.array(np.arange(n, dtype=np.int64))], [*names, "_i"]
            )
            g = g.join(b, keys=names, join_type="left outer", use_threads=False).sort_by("_i")
            at = g.column("_b")
        rows: Ints = pc.fill_null(at, base.num_rows).to_numpy()
        return vs[rows]

    def _outputs_vectorised(self, v: Ints) -> tuple[Bools, list[tuple[Any, Bools | None]]] | None:
        """Per group of vectors ``v`` (a row each): whether the output row exists, and its
        aggregate columns (as :meth:`_output`) as values with a NULL mask (``None``: no
        NULLs); ``None`` if an average cannot be computed exactly in float64."""
        present = (v[:, 0] != 0) | (v[:, 1] != 0) | (v[:, 2] != 0)
        vals: list[tuple[Any, Bools | None]] = []
        for a in self.aggs:
            if a.column is None:
                vals.append((v[:, 0], None))
                continue
            s = self.slot[a.column]
            has: Bools | None
            if a.column in self._nullable:
                count, total = v[:, s], v[:, s + 1]
                has = (count != 0) | (v[:, s + 2] != 0) | (v[:, s + 3] != 0)
            else:
                count, total, has = v[:, 0], v[:, s], None
            if a.func is AggFunc.COUNT:
                vals.append((count, None))
            elif a.func is AggFunc.SUM:
                vals.append((total, None if has is None else ~has))
            else:
                for col in (count, total):
                    if len(col) and (col.max() > 2**53 or col.min() < -(2**53)):
                        return None
                # both exact in float64, so IEEE division rounds the exact quotient; + 0.0
                # turns -0.0 into 0.0 as Fraction does
                ok = count != 0
                q = (
                    np.divide(
                        total.astype(np.float64),
                        count.astype(np.float64),
                        out=np.zeros(len(count)),
                        where=ok,
                    )
                    + 0.0
                )
                if has is not None:
                    ok = ok & has
                vals.append((q, ~ok))
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


class _Columns(NamedTuple):
    """A change as columns: its key columns and diffs (Arrow), per aggregated column
    ``value * diff`` (Arrow, NULL where the value is), and its times (numpy)."""

    keys: list[Any]
    ds: Any
    prods: dict[int, Any]
    times: Ints


def _codes(col: Any) -> npt.NDArray[Any]:
    """Integers equal exactly where the values of Arrow column ``col`` are (NULLs too):
    an integer column's own values, else dictionary codes."""
    if pa.types.is_integer(col.type) and not col.null_count:
        values: npt.NDArray[Any] = col.to_numpy()
        return values
    codes: npt.NDArray[Any] = pc.dictionary_encode(col, null_encoding="encode").indices.to_numpy()
    return codes


def _filled(col: Any) -> Ints:
    """Int64 Arrow column ``col`` as numpy, NULLs as 0."""
    values: Ints = (pc.fill_null(col, 0) if col.null_count else col).to_numpy()
    return values


def _pylist(col: Any, at: Ints) -> list[Any]:
    """The Python values of Arrow column ``col`` at positions ``at``."""
    if pa.types.is_integer(col.type) and not col.null_count:
        values: list[Any] = col.to_numpy()[at].tolist()
        return values
    return column_values(col.take(pa.array(at)))
