"""DDL from the command line: the JSON of :mod:`tidegate.commands.ddl`, the ``ControlService``
routes against a real ``Environment`` (an in-process python-executor replica over gRPC), and
the ``create-table/create-index/create-view/drop/read-policy`` commands over loopback HTTP.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidegate.cli import main
from tidegate.commands import client
from tidegate.commands.control import ControllerInfo, Refusal, serve_control
from tidegate.commands.ddl import (
    DdlError,
    columns_to_json,
    index_keys,
    parse_column_spec,
    plan_from_json,
    policy_from_json,
    policy_to_json,
    schema_from_json,
)
from tidegate.commands.service import ControlService
from tidegate.dsl import Schema, col, count, sum_, table
from tidegate.replica.testing import in_process_replica as replica
from tidegate.runtime import Environment
from tidegate.spec.errors import TidegateError
from tidegate.spec.frontier import Antichain
from tidegate.spec.frontier.read_policy import (
    LagWriteFrontier,
    Multiple,
    NoPolicy,
    StepBack,
    ValidFrom,
)
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import plan_to_dict, typecheck
from tidegate.spec.plan.schema import ScalarType

ORDERS = Schema.of(("id", "int64", False), ("customer", "string", False), ("amount", "int64"))
ORDERS_JSON: list[dict[str, Any]] = [
    {"name": "id", "type": "int64", "nullable": False},
    {"name": "customer", "type": "string", "nullable": False},
    {"name": "amount", "type": "int64"},
]


def _ddl_error(fn: Callable[[], object]) -> str:
    with pytest.raises(DdlError) as e:
        fn()
    return e.value.type


# -- column specs and schemas ----------------------------------------------------------------------


def test_column_specs_are_not_null_unless_marked_and_names_may_hold_colons() -> None:
    assert parse_column_spec("id:int64") == {"name": "id", "type": "int64", "nullable": False}
    assert parse_column_spec("note:string:null")["nullable"] is True
    assert parse_column_spec("a:b:date") == {"name": "a:b", "type": "date", "nullable": False}
    for bad in ("id", ":int64", "id:uint32", "id:int64:nullable", "id:null"):
        assert _ddl_error(lambda bad=bad: parse_column_spec(bad)) == "BadColumns"


@given(
    st.lists(
        st.tuples(
            st.text(min_size=1, max_size=8),
            st.sampled_from([t.value for t in ScalarType]),
            st.booleans(),
        ),
        min_size=1,
        max_size=5,
        unique_by=lambda c: c[0],
    )
)
def test_column_specs_and_column_json_round_trip(cols: list[tuple[str, str, bool]]) -> None:
    """``NAME:TYPE[:null]`` reads back as written (names may hold colons); JSON columns too."""
    specs = [f"{n}:{t}{':null' if null else ''}" for n, t, null in cols]
    columns = [parse_column_spec(spec) for spec in specs]
    assert [(c["name"], c["type"], c["nullable"]) for c in columns] == cols
    unpadded = [c for c in columns if c["name"].strip() == c["name"]]
    if unpadded:
        schema = schema_from_json(unpadded)
        assert columns_to_json(schema) == unpadded
        assert schema_from_json(columns_to_json(schema)) == schema


def test_schemas_from_json_default_to_nullable_and_refuse_what_a_table_cannot_have() -> None:
    assert schema_from_json(ORDERS_JSON) == ORDERS
    for bad in (
        [],
        {"name": "x"},
        [{"name": "x", "type": "uint32"}],
        [{"name": "x", "type": "int64"}, {"name": "x", "type": "string"}],
        [{"name": " x", "type": "int64"}],
        [{"name": "x", "type": "int64", "nullable": "yes"}],
        [{"name": "x", "type": "int64", "default": 0}],
        ["x:int64"],
    ):
        assert _ddl_error(lambda bad=bad: schema_from_json(bad)) == "BadColumns"


def test_index_keys_are_names_or_positions_names_first() -> None:
    digits = Schema.of(("2", "int64"), ("b", "string"))
    assert index_keys(["customer", 0], ORDERS) == (1, 0)
    assert index_keys(["2"], ORDERS) == (2,)  # no column "2": a position
    assert index_keys(["2"], digits) == (0,)  # a column called "2" wins
    for bad in ([], "id", ["nope"], [3], [-1], [True], [1.0], ["id", 0]):
        assert _ddl_error(lambda bad=bad: index_keys(bad, ORDERS)) == "BadKeys"


# -- read policies ---------------------------------------------------------------------------------

POLICIES = [
    ({"kind": "lag", "ms": 60_000}, LagWriteFrontier(60_000, 1000)),
    ({"kind": "lag", "ms": 500, "granularity_ms": 50}, LagWriteFrontier(500, 50)),
    ({"kind": "valid-from", "time": 7}, ValidFrom(Antichain([7]))),
    ({"kind": "step-back"}, StepBack()),
    ({"kind": "none"}, NoPolicy(Antichain([3]))),
    (
        {
            "kind": "multiple",
            "policies": [{"kind": "step-back"}, {"kind": "valid-from", "time": 1}],
        },
        Multiple([StepBack(), ValidFrom(Antichain([1]))]),
    ),
]


@pytest.mark.parametrize(("data", "policy"), POLICIES)
def test_policies_map_onto_the_specs_read_policies(data: Any, policy: Any) -> None:
    assert policy_from_json(data, Antichain([3])) == policy


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        ({"kind": "forever"}, "UnknownPolicyKind"),
        ({"ms": 5}, "UnknownPolicyKind"),
        ({"kind": "lag_write_frontier", "lag": 5, "max_granularity": 1}, "UnknownPolicyKind"),
        ("lag", "BadPolicy"),
        ({"kind": "lag"}, "BadPolicy"),
        ({"kind": "lag", "ms": -1}, "BadPolicy"),
        ({"kind": "lag", "ms": 1.5}, "BadPolicy"),
        ({"kind": "lag", "ms": 5, "granularity_ms": 0}, "BadPolicy"),
        ({"kind": "valid-from", "time": "now"}, "BadPolicy"),
        ({"kind": "step-back", "ms": 1}, "BadPolicy"),
        ({"kind": "multiple", "policies": []}, "BadPolicy"),
        ({"kind": "multiple", "policies": [{"kind": "never"}]}, "UnknownPolicyKind"),
    ],
)
def test_bad_policies_are_refused_with_a_type(data: Any, kind: str) -> None:
    assert _ddl_error(lambda: policy_from_json(data, Antichain([0]))) == kind


policy_json = st.recursive(
    st.one_of(
        st.builds(
            lambda ms, g: {"kind": "lag", "ms": ms, "granularity_ms": g},
            st.integers(0, 10**9),
            st.integers(1, 10**6),
        ),
        st.builds(lambda t: {"kind": "valid-from", "time": t}, st.integers(0, 10**12)),
        st.just({"kind": "step-back"}),
        st.just({"kind": "none"}),
    ),
    lambda inner: st.builds(
        lambda ps: {"kind": "multiple", "policies": ps}, st.lists(inner, min_size=1, max_size=3)
    ),
    max_leaves=6,
)


@given(policy_json, st.integers(0, 10**6))
def test_policy_json_round_trips(data: dict[str, Any], since: int) -> None:
    """Every policy the JSON describes reads back from its own description."""
    policy = policy_from_json(data, Antichain([since]))
    echoed = policy_to_json(policy)
    assert policy_from_json(_without_since(echoed), Antichain([since])) == policy


def _without_since(d: Any) -> Any:
    if d["kind"] == "none":
        return {"kind": "none"}
    if d["kind"] == "multiple":
        return {**d, "policies": [_without_since(p) for p in d["policies"]]}
    return d


# -- plans -------------------------------------------------------------------------------------------

U1 = GlobalId.user(1)
TOTALS = table(U1, ORDERS).group_by("customer").agg(count(), sum_("amount"))


def _lookup(ref: str) -> tuple[GlobalId, Schema]:
    if ref in ("orders", "u1"):
        return U1, ORDERS
    raise Refusal(404, "UnknownCollection", ref)


def test_plan_json_round_trips_and_gets_may_name_catalog_objects() -> None:
    data = json.loads(json.dumps(plan_to_dict(TOTALS.plan)))
    assert plan_from_json(data, _lookup) == TOTALS.plan
    named = json.loads(json.dumps(data).replace('"id": "u1"', '"name": "orders"'))
    named = _drop_schemas(named)
    assert plan_from_json(named, _lookup) == TOTALS.plan
    by_id = {"op": "get", "id": "u1"}  # an id without a schema takes the catalog's
    assert plan_from_json(by_id, _lookup) == table(U1, ORDERS).plan


def _drop_schemas(d: Any) -> Any:
    if isinstance(d, list):
        return [_drop_schemas(x) for x in d]
    if isinstance(d, dict):
        if d.get("op") == "get":
            return {k: v for k, v in d.items() if k != "schema"}
        return {k: _drop_schemas(v) for k, v in d.items()}
    return d


@pytest.mark.parametrize(
    "data",
    [
        "get",
        [],
        {"op": "frobnicate"},
        {"op": "filter"},
        {"op": "project", "input": {"op": "get", "name": "orders"}, "columns": "ab"},
        {"op": "get", "name": 7},
        {"op": "constant", "schema": {"columns": []}, "rows": [[[1], 1]]},
        {"input": None},
    ],
)
def test_malformed_plans_are_bad_plans(data: Any) -> None:
    assert _ddl_error(lambda: plan_from_json(data, _lookup)) == "BadPlan"


def test_a_deeply_nested_plan_is_a_bad_plan_not_a_crash() -> None:
    deep: dict[str, Any] = {"op": "get", "name": "orders"}
    for _ in range(5000):
        deep = {"op": "distinct", "input": deep}
    assert _ddl_error(lambda: plan_from_json(deep, _lookup)) == "BadPlan"


def _mutations(d: Any) -> st.SearchStrategy[Any]:
    """``d`` with one node replaced by an arbitrary JSON value (or a key removed)."""
    scalars = st.one_of(
        st.none(), st.booleans(), st.integers(-3, 10**20), st.text(max_size=5), st.floats()
    )
    json_values = st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
        max_leaves=5,
    )
    paths: list[tuple[Any, ...]] = []

    def walk(node: Any, path: tuple[Any, ...]) -> None:
        paths.append(path)
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, (*path, k))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, (*path, i))

    walk(d, ())

    def replace(path: tuple[Any, ...], value: Any, delete: bool) -> Any:
        out = json.loads(json.dumps(d))
        if not path:
            return value
        parent = out
        for p in path[:-1]:
            parent = parent[p]
        if delete and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = value
        return out

    return st.builds(replace, st.sampled_from(paths), json_values, st.booleans())


VIEW = table(U1, ORDERS).filter(col("amount") > 20).select("customer", "amount")


@given(
    st.one_of(
        _mutations(plan_to_dict(TOTALS.plan)),
        _mutations(plan_to_dict(VIEW.plan)),
    )
)
def test_any_corruption_of_a_plan_is_refused_typed_or_typechecks(data: Any) -> None:
    """Decoding then typechecking a corrupted plan raises only typed errors (never a crash)."""
    try:
        plan = plan_from_json(data, _lookup)
        typecheck(plan, {U1: ORDERS})
    except (DdlError, TidegateError, Refusal):
        pass


# -- the command line: parsing and what each command sends -----------------------------------------


def _cli(*argv: str) -> int:
    try:
        return main(list(argv))
    except SystemExit as e:
        return int(e.code or 0)


def test_the_ddl_commands_are_registered(capsys: pytest.CaptureFixture[str]) -> None:
    assert _cli("--help") == 0
    out = capsys.readouterr().out
    for name in ("create-table", "create-index", "create-view", "drop", "read-policy"):
        assert name in out


@pytest.mark.parametrize(
    "argv",
    [
        ["create-table", "t"],
        ["create-table", "t", "x:uint32"],
        ["create-table", "t", "x"],
        ["create-index", "t"],
        ["create-index", "t", "--key"],
        ["create-view", "v"],
        ["create-view", "v", "--plan", "p.json", "--from", "t"],
        ["drop"],
        ["read-policy", "t"],
        ["read-policy", "t", "--lag-ms", "-1"],
        ["read-policy", "t", "--lag-ms", "soon"],
        ["read-policy", "t", "--lag-ms", "5", "--granularity-ms", "0"],
        ["read-policy", "t", "--lag-ms", "5", "--none"],
        ["read-policy", "t", "--valid-from", "3", "--step-back"],
    ],
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert _cli(*argv) == 2
    assert "usage:" in capsys.readouterr().err


def test_usage_errors_found_before_calling_exit_2_and_name_the_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = ["--data-dir", str(tmp_path)]  # no controller: a call would exit 3
    assert _cli("create-view", "v", "--plan", str(tmp_path / "missing.json"), *d) == 2
    assert "cannot read --plan" in capsys.readouterr().err
    (tmp_path / "bad.json").write_text("{")
    assert _cli("create-view", "v", "--plan", str(tmp_path / "bad.json"), *d) == 2
    assert "not valid JSON" in capsys.readouterr().err
    (tmp_path / "ok.json").write_text("{}")
    assert _cli("create-view", "v", "--plan", str(tmp_path / "ok.json"), "--columns", "a", *d) == 2
    assert _cli("read-policy", "t", "--valid-from", "3", "--granularity-ms", "5", *d) == 2
    assert "goes with --lag-ms" in capsys.readouterr().err
    assert _cli("create-table", "t", "x:int64", *d) == 3


def test_each_command_sends_its_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    sent: list[tuple[str, str, Any]] = []
    answers = {
        "/create-table": {"name": "t", "id": "u1", "kind": "table", "columns": ORDERS_JSON},
        "/create-index": {
            "name": "i",
            "id": "u2",
            "kind": "index",
            "on": "t",
            "keys": [1, 0],
            "columns": ORDERS_JSON,
        },
        "/create-view": {"name": "v", "id": "u3", "kind": "materialized-view", "columns": []},
        "/drop": {"dropped": [{"name": "i", "id": "u2", "kind": "index"}]},
        "/read-policy": {
            "name": "t",
            "id": "u1",
            "policy": {"kind": "lag", "ms": 5, "granularity_ms": 1000},
            "since": [4],
        },
    }

    def fake_call(args: Any, method: str, path: str, body: Any) -> Any:
        sent.append((method, path, body))
        return answers[path]

    monkeypatch.setattr(client, "_call", fake_call)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"op": "get", "name": "t"}))
    assert _cli("create-table", "t", "id:int64", "customer:string", "amount:int64:null") == 0
    assert "created table t (u1): id int64 not null, customer string not null" in (
        capsys.readouterr().out
    )
    assert _cli("create-index", "t", "--key", "customer", "--key", "0", "--name", "i") == 0
    assert "created index i (u2) on t (customer, id)" in capsys.readouterr().out
    assert _cli("create-view", "v", "--plan", str(plan)) == 0
    monkeypatch.setattr("sys.stdin", io.StringIO('{"op": "get", "name": "t"}'))
    assert _cli("create-view", "v", "--plan", "-") == 0
    assert _cli("create-view", "v", "--from", "t", "--columns", "id", "amount") == 0
    assert "created materialized view v (u3)" in capsys.readouterr().out
    assert _cli("drop", "i", "--cascade", "--json") == 0
    assert json.loads(capsys.readouterr().out) == answers["/drop"]
    for flags in (["--lag-ms", "5"], ["--lag-ms", "5", "--granularity-ms", "2"]):
        assert _cli("read-policy", "t", *flags) == 0
    assert "lag 5 ms (granularity 1000 ms); since now 4 (1970-01-01T00:00:00.004Z)" in (
        capsys.readouterr().out
    )
    for flags in (["--valid-from", "9"], ["--step-back"], ["--none"]):
        assert _cli("read-policy", "t", *flags) == 0
    assert [body for _, _, body in sent] == [
        {
            "name": "t",
            "columns": [ORDERS_JSON[0], ORDERS_JSON[1], {**ORDERS_JSON[2], "nullable": True}],
        },
        {"on": "t", "keys": ["customer", "0"], "name": "i"},
        {"name": "v", "plan": {"op": "get", "name": "t"}},
        {"name": "v", "plan": {"op": "get", "name": "t"}},
        {"name": "v", "from": "t", "columns": ["id", "amount"]},
        {"name": "i", "cascade": True},
        {"name": "t", "policy": {"kind": "lag", "ms": 5}},
        {"name": "t", "policy": {"kind": "lag", "ms": 5, "granularity_ms": 2}},
        {"name": "t", "policy": {"kind": "valid-from", "time": 9}},
        {"name": "t", "policy": {"kind": "step-back"}},
        {"name": "t", "policy": {"kind": "none"}},
    ]
    assert all(m == "POST" for m, _, _ in sent)


# -- the service against a real environment ------------------------------------------------------


def with_service(
    data_dir: Path, body: Callable[[ControlService, Any], Awaitable[None]], *, timeout: float = 90
) -> None:
    async def main() -> None:
        with replica(data_dir) as address, anyio.fail_after(timeout):
            async with Environment.open(data_dir, replicas={"r1": address}, tick_ms=None) as env:
                await body(ControlService(env, wait_s=30), env)

    anyio.run(main)


async def post(service: ControlService, path: str, body: dict[str, Any]) -> Any:
    return await service.handle("POST", path, body)


def _rows(result: dict[str, Any]) -> list[tuple[Any, ...]]:
    return sorted((*r, n) for r, n in result["rows"])


pytestmark_env = pytest.mark.timeout(180)


@pytestmark_env
def test_ddl_routes_create_use_set_policies_and_drop(tmp_path: Path) -> None:
    async def body(service: ControlService, env: Any) -> None:
        t = await post(service, "/create-table", {"name": "orders", "columns": ORDERS_JSON})
        assert t == {"name": "orders", "id": "u1", "kind": "table", "columns": _norm(ORDERS_JSON)}
        assert env.schema("orders") == ORDERS
        a = await service.append("orders", [[1, "ann", 10], [2, "bob", 25], [3, "ann", 40]])
        ts = a["time"]

        i = await post(
            service, "/create-index", {"on": "orders", "keys": ["customer"], "name": "by_customer"}
        )
        assert (i["name"], i["id"], i["kind"], i["on"], i["keys"]) == (
            "by_customer",
            "u2",
            "index",
            "orders",
            [1],
        )
        anon = await post(service, "/create-index", {"on": "u1", "keys": [0]})
        assert anon["id"] == "u3" and anon["keys"] == [0]

        totals = env.table("orders").group_by("customer").agg(count(), sum_("amount"))
        plan = _drop_schemas(
            json.loads(
                json.dumps(plan_to_dict(totals.plan)).replace('"id": "u1"', '"name": "orders"')
            )
        )
        v = await post(service, "/create-view", {"name": "totals", "plan": plan})
        assert v["kind"] == "materialized-view" and [c["name"] for c in v["columns"]] == [
            "customer",
            "count",
            "sum_amount",
        ]
        assert env.state.get(GlobalId.parse(v["id"])).plan == totals.plan
        small = await post(
            service,
            "/create-view",
            {"name": "small", "from": "orders", "columns": ["amount", "id"]},
        )
        assert [c["name"] for c in small["columns"]] == ["amount", "id"]

        assert _rows(await service.peek("by_customer", ts, ["ann"])) == [
            (1, "ann", 10, 1),
            (3, "ann", 40, 1),
        ]
        assert _rows(await service.peek("totals", ts, None)) == [
            ("ann", 2, 50, 1),
            ("bob", 1, 25, 1),
        ]
        assert _rows(await service.peek("small", ts, None)) == [(10, 1, 1), (25, 2, 1), (40, 3, 1)]

        lag = await post(
            service, "/read-policy", {"name": "orders", "policy": {"kind": "lag", "ms": 10**12}}
        )
        assert lag["policy"] == {"kind": "lag", "ms": 10**12, "granularity_ms": 1000}
        assert env.state.read_policy(GlobalId.user(1)) == LagWriteFrontier(10**12, 1000)
        vf = await post(
            service,
            "/read-policy",
            {"name": "by_customer", "policy": {"kind": "valid-from", "time": ts}},
        )
        assert vf["since"] == [ts] and env.frontiers("by_customer")[0] == Antichain([ts])
        for policy in ({"kind": "step-back"}, {"kind": "none"}):
            await post(service, "/read-policy", {"name": "totals", "policy": policy})
        since = env.frontiers("totals")[0]
        assert env.state.read_policy(GlobalId.parse(v["id"])) == NoPolicy(since)
        status = await service.status()
        policies = {c["name"]: c["read_policy"] for c in status["collections"]}
        assert policies["orders"]["kind"] == "lag" and policies["small"] is None

        assert await post(service, "/drop", {"name": "u3"}) == {
            "dropped": [{"name": "index_u3", "id": "u3", "kind": "index"}]
        }
        gone = await post(service, "/drop", {"name": "orders", "cascade": True})
        assert sorted(d["name"] for d in gone["dropped"]) == [
            "by_customer",
            "orders",
            "small",
            "totals",
        ]
        assert env.state.entries() == [] and env.state.read_policies == ()

    with_service(tmp_path, body)


def _norm(columns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"nullable": True, **c} for c in columns]


BAD_REQUESTS: list[tuple[str, dict[str, Any], int, str]] = [
    # create-table
    (
        "/create-table",
        {"name": "other", "columns": [{"name": "x", "type": "uint32"}]},
        400,
        "BadColumns",
    ),
    ("/create-table", {"name": "other", "columns": []}, 400, "BadColumns"),
    (
        "/create-table",
        {"name": "t", "columns": [{"name": "x", "type": "int64"}]},
        409,
        "DuplicateCatalogName",
    ),
    (
        "/create-table",
        {"name": "idx", "columns": [{"name": "x", "type": "int64"}]},
        409,
        "DuplicateCatalogName",
    ),
    ("/create-table", {"name": "u9", "columns": [{"name": "x", "type": "int64"}]}, 400, "BadName"),
    (
        "/create-table",
        {"name": " other", "columns": [{"name": "x", "type": "int64"}]},
        400,
        "InvalidCatalogOp",
    ),
    ("/create-table", {"name": 5, "columns": [{"name": "x", "type": "int64"}]}, 400, "BadName"),
    ("/create-table", {"name": "other"}, 400, "BadRequest"),
    ("/create-table", {"name": "other", "columns": [], "colums": []}, 400, "BadRequest"),
    # create-index
    ("/create-index", {"on": "nope", "keys": ["x"]}, 404, "UnknownCollection"),
    ("/create-index", {"on": "t", "keys": ["nope"]}, 400, "BadKeys"),
    ("/create-index", {"on": "t", "keys": [2]}, 400, "BadKeys"),
    ("/create-index", {"on": "t", "keys": []}, 400, "BadKeys"),
    ("/create-index", {"on": "t", "keys": "x"}, 400, "BadKeys"),
    ("/create-index", {"on": "t", "keys": ["x"], "name": "v"}, 409, "DuplicateCatalogName"),
    ("/create-index", {"on": ["t"], "keys": ["x"]}, 400, "BadRequest"),
    # create-view
    ("/create-view", {"name": "w", "plan": {"op": "frobnicate"}}, 400, "BadPlan"),
    ("/create-view", {"name": "w", "plan": "select 1"}, 400, "BadPlan"),
    (
        "/create-view",
        {"name": "w", "plan": {"op": "filter", "input": {"op": "get", "name": "t"}}},
        400,
        "BadPlan",
    ),
    (
        "/create-view",
        {"name": "w", "plan": {"op": "get", "name": "nope"}},
        404,
        "UnknownCollection",
    ),
    ("/create-view", {"name": "w", "plan": {"op": "get", "id": "u77"}}, 404, "UnknownCollection"),
    (
        "/create-view",
        {
            "name": "w",
            "plan": {"op": "project", "input": {"op": "get", "name": "t"}, "columns": [4]},
        },
        400,
        "UnknownColumn",
    ),
    (
        "/create-view",
        {
            "name": "w",
            "plan": {
                "op": "filter",
                "input": {"op": "get", "name": "t"},
                "predicates": [{"kind": "column", "index": 1}],
            },
        },
        400,
        "TypeMismatch",
    ),
    (
        "/create-view",
        {
            "name": "w",
            "plan": {
                "op": "get",
                "id": "u1",
                "schema": {"columns": [{"name": "x", "type": "string", "nullable": True}]},
            },
        },
        400,
        "TypeMismatch",
    ),
    ("/create-view", {"name": "w"}, 400, "BadRequest"),
    (
        "/create-view",
        {"name": "w", "plan": {"op": "get", "name": "t"}, "from": "t"},
        400,
        "BadRequest",
    ),
    ("/create-view", {"name": "w", "from": "t", "columns": ["nope"]}, 400, "BadColumns"),
    ("/create-view", {"name": "v", "from": "t"}, 409, "DuplicateCatalogName"),
    # read-policy
    ("/read-policy", {"name": "t", "policy": {"kind": "forever"}}, 400, "UnknownPolicyKind"),
    ("/read-policy", {"name": "t", "policy": {"kind": "lag", "ms": -5}}, 400, "BadPolicy"),
    ("/read-policy", {"name": "nope", "policy": {"kind": "step-back"}}, 404, "UnknownCollection"),
    ("/read-policy", {"name": "t"}, 400, "BadRequest"),
    # drop
    ("/drop", {"name": "t"}, 409, "HasDependents"),
    ("/drop", {"name": "t", "cascade": False}, 409, "HasDependents"),
    ("/drop", {"name": "nope"}, 404, "UnknownCollection"),
    ("/drop", {"name": "idx", "cascade": "yes"}, 400, "BadRequest"),
    ("/drop", {"name": "idx", "force": True}, 400, "BadRequest"),
]


@pytestmark_env
def test_bad_ddl_is_refused_with_its_type_and_changes_nothing(tmp_path: Path) -> None:
    async def body(service: ControlService, env: Any) -> None:
        await post(
            service,
            "/create-table",
            {
                "name": "t",
                "columns": [{"name": "x", "type": "int64"}, {"name": "s", "type": "string"}],
            },
        )
        ts = (await service.append("t", [[1, "a"]]))["time"]
        await post(service, "/create-index", {"on": "t", "keys": ["x"], "name": "idx"})
        await post(service, "/create-view", {"name": "v", "from": "t"})
        for name in ("idx", "v"):
            await env.wait_for(name, ts)
        state = env.state
        sinces = {c.name: env.frontiers(c.id)[0] for c in service.collections()}
        for path, request, status, kind in BAD_REQUESTS:
            with pytest.raises(Refusal) as e:
                await post(service, path, request)
            assert (e.value.status, e.value.type) == (status, kind), (
                path,
                request,
                e.value.message,
            )
            assert env.state == state, (path, request)
        assert {c.name: env.frontiers(c.id)[0] for c in service.collections()} == sinces
        # The refusal named the dependents and how to drop anyway.
        with pytest.raises(Refusal, match=r"idx \(u2\), v \(u3\) read\(s\) it.*cascade"):
            await post(service, "/drop", {"name": "t"})

    with_service(tmp_path, body)


# -- the commands over loopback HTTP against a real environment ---------------------------------------


@pytestmark_env
def test_ddl_commands_against_a_served_environment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    plan = tmp_path / "plan.json"
    d = ["--data-dir", str(tmp_path)]

    async def body(service: ControlService, env: Any) -> None:
        async with anyio.create_task_group() as tg:
            address = await tg.start(serve_control, service.handle, "t0ken")
            ControllerInfo(address, "t0ken", os.getpid(), str(tmp_path)).write()
            cli = anyio.to_thread.run_sync

            assert (
                await cli(_cli, "create-table", "orders", "id:int64", "note:string:null", *d) == 0
            )
            assert "created table orders (u1): id int64 not null, note string" in (
                capsys.readouterr().out
            )
            assert await cli(_cli, "create-table", "orders", "id:int64", *d) == 1
            assert "DuplicateCatalogName" in capsys.readouterr().err
            await service.append("orders", [[1, "x"], [2, None]])
            assert await cli(_cli, "create-index", "orders", "--key", "id", *d) == 0
            assert "created index index_u2 (u2) on orders (id)" in capsys.readouterr().out
            view = env.table("orders").filter(col("note").is_null()).select("id")
            plan.write_text(json.dumps(plan_to_dict(view.plan)))
            assert await cli(_cli, "create-view", "nulls", "--plan", str(plan), *d) == 0
            assert "created materialized view nulls (u3): id int64 not null" in (
                capsys.readouterr().out
            )
            assert await cli(_cli, "read-policy", "nulls", "--lag-ms", "1000", *d) == 0
            assert "read policy of nulls (u3): lag 1000 ms" in capsys.readouterr().out
            assert await cli(_cli, "read-policy", "nulls", "--valid-from", "0", "--json", *d) == 0
            assert json.loads(capsys.readouterr().out)["policy"] == {
                "kind": "valid-from",
                "time": 0,
            }
            assert await cli(_cli, "drop", "orders", *d) == 1
            assert "HasDependents" in capsys.readouterr().err
            assert await cli(_cli, "drop", "orders", "--cascade", *d) == 0
            out = capsys.readouterr().out
            for line in ("dropped table orders (u1)", "dropped index index_u2", "nulls (u3)"):
                assert line in out
            tg.cancel_scope.cancel()

    data.mkdir()
    with_service(data, body)
