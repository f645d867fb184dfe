"""The DataFrame-like builder (tidegate.dsl) produces the plans it says, and points at mistakes."""

from __future__ import annotations

import pytest

from tidegate.dsl import (
    DataflowBuilder,
    Schema,
    avg,
    coalesce,
    col,
    concat,
    constant,
    count,
    desc,
    lit,
    max_,
    sum_,
    table,
    when,
)
from tidegate.spec.errors import ArityMismatch, InvalidPlan, TypeMismatch, UnknownColumn
from tidegate.spec.executor import PythonExecutor
from tidegate.spec.frontier import Antichain
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import evaluate, validate_dataflow
from tidegate.spec.protocol.responses import PeekRows
from tidegate.spec.protocol.types import MaterializedViewConnection

ORDERS = Schema.of(("customer", "string"), ("amount", "int64", False), ("price", "float64"))
CUSTOMERS = Schema.of(("name", "string"), ("city", "string"))
U1, U2 = GlobalId.user(1), GlobalId.user(2)
DATA = {
    U1: [
        (("ann", 5, 1.0), 0, 1),
        (("ann", 20, 2.5), 0, 1),
        (("bob", 30, None), 0, 1),
        ((None, 40, 0.5), 0, 1),
    ],
    U2: [(("ann", "paris"), 0, 1), (("bob", "rome"), 0, 1)],
}


def test_filter_group_by_agg() -> None:
    orders = table("u1", ORDERS)
    big = (
        orders.filter(col("amount") > 10)
        .group_by("customer")
        .agg(count(), sum_("amount"), max_("price"))
    )
    assert big.columns == ("customer", "count", "sum_amount", "max_price")
    out = evaluate(big.plan, DATA, 0)
    assert out.rows == {("ann", 1, 20, 2.5): 1, ("bob", 1, 30, None): 1, (None, 1, 40, 0.5): 1}


def test_aliases_select_and_expressions() -> None:
    orders = table("u1", ORDERS)
    f = orders.with_columns(
        total=col("amount") * col("price"), label=concat(col("customer"), "!")
    ).select("customer", col("total").alias("t"), (col("amount") % 7).alias("m"))
    assert f.columns == ("customer", "t", "m")
    rows = evaluate(f.plan, DATA, 0).rows
    assert ("ann", 50.0, 6) in rows and ("bob", None, 2) in rows
    g = orders.group_by("customer").agg(avg("amount").alias("mean"))
    assert g.columns == ("customer", "mean")


def test_null_literals_take_the_other_sides_type_and_ints_widen_to_floats() -> None:
    orders = table("u1", ORDERS)
    f = orders.select(
        coalesce(col("price"), 0).alias("p"),
        when(col("amount") > 10, lit(None)).otherwise(col("customer")).alias("c"),
    )
    rows = evaluate(f.plan, DATA, 0).rows
    assert (0.0, None) in rows and (1.0, "ann") in rows


def test_join_union_distinct_top_k() -> None:
    orders, customers = table("u1", ORDERS), table("u2", CUSTOMERS)
    j = orders.join(customers, on=[("customer", "name")])
    assert j.columns == ("customer", "amount", "price", "name", "city")
    assert len(evaluate(j.plan, DATA, 0).rows) == 3
    left = orders.join(customers, on=[("customer", "name")], how="left")
    assert ((None, 40, 0.5, None, None), 1) in evaluate(left.plan, DATA, 0).rows.items()
    names = (
        orders.select("customer").union(customers.select(col("name").alias("customer"))).distinct()
    )
    assert evaluate(names.plan, DATA, 0).rows == {("ann",): 1, ("bob",): 1, (None,): 1}
    top = orders.top_k(by=[desc("amount")], limit=2)
    assert {r[1] for r in evaluate(top.plan, DATA, 0).rows} == {40, 30}


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (lambda o: o.filter(col("amout") > 1), UnknownColumn, "filter().*'amout'"),
        (lambda o: o.filter(col("customer") + 1 > 1), TypeMismatch, "filter()"),
        (lambda o: o.group_by("nope").agg(count()), UnknownColumn, "group_by().*'nope'"),
        (lambda o: o.group_by("customer").agg(sum_("customer")), TypeMismatch, "agg()"),
        (
            lambda o: o.join(o, on="customer").filter(col("customer") == "a"),
            UnknownColumn,
            "ambiguous",
        ),
        (lambda o: o.join(o, on="x"), UnknownColumn, "join\\(\\) left column 'x'"),
        (lambda o: o.join(o, on="customer", how="outer"), InvalidPlan, "how='outer'"),
        (lambda o: o.union(o.select("customer")), ArityMismatch, "union()"),
        (lambda o: o.select(lit(None)), TypeMismatch, "lit\\(None\\)"),
    ],
)
def test_mistakes_name_the_operation_and_column(make, error, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error, match=message):
        make(table("u1", ORDERS))


def test_expressions_have_no_truth_value() -> None:
    with pytest.raises(TypeError):
        bool(col("a") > 1)


def test_dataflow_builder_makes_a_runnable_description() -> None:
    df = DataflowBuilder("big")
    orders = table("u1", ORDERS)
    per_customer = df.build("u10", orders.group_by("customer").agg(count(), sum_("amount")))
    top = df.build("u11", per_customer.top_k(by=[desc("sum_amount")], limit=1))
    df.index("u20", per_customer, key=["customer"])
    df.index("u21", top)
    df.materialize("u30", top)
    df.subscribe("t1", per_customer)
    desc_ = df.finish(as_of=Antichain([0]))
    assert [s.id for s in desc_.source_imports] == [U1]
    assert isinstance(desc_.sink_exports[0].connection, MaterializedViewConnection)
    validate_dataflow(desc_)
    ex = PythonExecutor()
    h = ex.install(desc_)
    ex.feed(h, U1, DATA[U1], Antichain([1]))
    ex.step()
    assert ex.peek(GlobalId.user(21), 0) == PeekRows((((None, 1, 40), 1),))
    assert ex.peek(GlobalId.user(20), 0, key_lookup=(("ann",),)) == PeekRows(((("ann", 2, 25), 1),))
    with pytest.raises(InvalidPlan, match="build"):
        df.index("u22", orders)


def test_constant_frames() -> None:
    c = constant([("a", 1, None), (("b", 2, 0.5), 3)], ORDERS)
    assert evaluate(c.plan, {}, 0).rows == {("a", 1, None): 1, ("b", 2, 0.5): 3}


def test_case_branches_widen_int_literals() -> None:
    f = table("u1", ORDERS).select(when(col("amount") > 10, 2).otherwise(col("price")).alias("x"))
    assert f.schema.columns[0].type.scalar.value == "float64"
    assert evaluate(f.plan, DATA, 0).rows == {(1.0,): 1, (2.0,): 3}
