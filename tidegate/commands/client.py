"""The clients of a running ``tidegate up``: ``status``, ``peek``, ``append`` and the DDL commands.

DDL: ``create-table``, ``create-index``, ``create-view``, ``drop`` and
``read-policy`` (their JSON is described in :mod:`.ddl`). They find the
controller through ``DATA_DIR/controller.json`` (see :mod:`.control`) and
print what it answers; ``--json`` prints the raw answer. Exit status: 0 on
success, 1 when the controller refuses (the error's type and message are
printed), 2 for usage errors, 3 when no controller runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from tidegate.runtime.defaults import default_data_dir

from .control import ControlClient, ControlError, NoController

__all__ = ["add_parsers"]


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--data-dir",
        default=default_data_dir(),
        help="default: $TIDEGATE_DATA_DIR, else ./tidegate-data",
    )
    p.add_argument("--json", action="store_true", help="print the controller's answer as JSON")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for an answer")


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    st = sub.add_parser(
        "status",
        help="collections (since, upper, lag, read policy), replicas and the metrics address",
    )
    _common(st)
    st.set_defaults(func=run_status)

    pk = sub.add_parser("peek", help="read a table, index or materialized view at a time")
    pk.add_argument("name", help="the collection's name (or id, like u3)")
    pk.add_argument("--at", type=int, help="timestamp (default: the freshest complete one)")
    pk.add_argument(
        "--key",
        nargs="+",
        metavar="VALUE",
        help="an index's key values, each as JSON (strings may be bare: --key ann)",
    )
    _common(pk)
    pk.set_defaults(func=run_peek)

    cp = sub.add_parser(
        "copy-to", help="write a collection's contents at a time as Parquet files under a URL"
    )
    cp.add_argument("name", help="the collection's name (or id, like u3)")
    cp.add_argument("url", help="file:///absolute/dir or s3://bucket/prefix?endpoint=...")
    cp.add_argument("--at", type=int, help="timestamp (default: the freshest complete one)")
    _common(cp)
    cp.set_defaults(func=run_copy_to)

    ap = sub.add_parser("append", help="append rows to a table (returns once durable)")
    ap.add_argument("table")
    rows = ap.add_mutually_exclusive_group(required=True)
    rows.add_argument(
        "--rows",
        help='JSON: [[v, ...], ...] to insert, or [[[v, ...], diff], ...]; "-" reads stdin',
    )
    for fmt, what in (("csv", "a CSV file with a header line"), ("parquet", "a Parquet file")):
        rows.add_argument(
            f"--{fmt}",
            metavar="FILE",
            help=f"{what}: the table's columns by name, and an optional integer diff column "
            "(else each row is inserted once)",
        )
    _common(ap)
    ap.set_defaults(func=run_append)
    _add_ddl_parsers(sub)


def _column(text: str) -> dict[str, Any]:
    from .ddl import DdlError, parse_column_spec

    try:
        return parse_column_spec(text)
    except DdlError as e:
        raise argparse.ArgumentTypeError(e.message) from None


def _int_at_least(minimum: int) -> Any:
    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            n = minimum - 1
        if n < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text!r}")
        return n

    return parse


def _add_ddl_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ct = sub.add_parser(
        "create-table",
        help="create a table",
        description="Create a table. Columns are NAME:TYPE (NOT NULL) or NAME:TYPE:null "
        "(nullable); types: int64, float64, string, bool, date, timestamp.",
    )
    ct.add_argument("name")
    ct.add_argument("columns", nargs="+", type=_column, metavar="COL:TYPE[:null]")
    _common(ct)
    ct.set_defaults(func=run_create_table)

    ci = sub.add_parser("create-index", help="index a table or view by key columns")
    ci.add_argument("on", help="the collection to index (name or id)")
    ci.add_argument(
        "--key",
        dest="keys",
        nargs="+",
        action="extend",
        required=True,
        metavar="COL",
        help="key column names (or positions: 0, 1, ...)",
    )
    ci.add_argument("--name", help="the index's name (default: index_<id>)")
    _common(ci)
    ci.set_defaults(func=run_create_index)

    cv = sub.add_parser(
        "create-view",
        help="create a materialized view from a plan's JSON",
        description="Create a materialized view. --plan takes the JSON of a plan "
        "(tidegate.spec.plan.plan_to_dict; a get may name a catalog object: "
        '{"op": "get", "name": "orders"}); --from copies a collection, or --columns of it.',
    )
    cv.add_argument("name")
    what = cv.add_mutually_exclusive_group(required=True)
    what.add_argument("--plan", metavar="FILE", help='a plan\'s JSON file; "-" reads stdin')
    what.add_argument("--from", dest="source", metavar="NAME", help="a collection to copy")
    cv.add_argument("--columns", nargs="+", metavar="COL", help="with --from: only these")
    _common(cv)
    cv.set_defaults(func=run_create_view)

    dr = sub.add_parser("drop", help="drop a table, index or materialized view")
    dr.add_argument("name")
    dr.add_argument("--cascade", action="store_true", help="drop what reads it too")
    _common(dr)
    dr.set_defaults(func=run_drop)

    rp = sub.add_parser(
        "read-policy",
        help="how far a collection may be compacted",
        description="Set a collection's read policy: how far behind its upper it stays readable.",
    )
    rp.add_argument("name")
    policy = rp.add_mutually_exclusive_group(required=True)
    policy.add_argument(
        "--lag-ms", type=_int_at_least(0), metavar="N", help="stay N ms behind the upper"
    )
    policy.add_argument(
        "--valid-from", type=_int_at_least(0), metavar="T", help="readable from time T on"
    )
    policy.add_argument("--step-back", action="store_true", help="one tick behind the upper")
    policy.add_argument("--none", action="store_true", help="hold the since where it is now")
    rp.add_argument(
        "--granularity-ms",
        type=_int_at_least(1),
        metavar="G",
        help="with --lag-ms: round the since down to multiples of G (default 1000)",
    )
    _common(rp)
    rp.set_defaults(func=run_read_policy)


def _key_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text  # a bare string


def _call(args: argparse.Namespace, method: str, path: str, body: dict[str, Any] | None) -> Any:
    with ControlClient.for_data_dir(args.data_dir, timeout=args.timeout) as client:
        return client.call(method, path, body)


def _run(args: argparse.Namespace, method: str, path: str, body: dict[str, Any] | None) -> Any:
    try:
        return _call(args, method, path, body)
    except NoController as e:
        print(f"tidegate {args.command}: {e.message}", file=sys.stderr)
        raise SystemExit(3) from None
    except ControlError as e:
        print(f"tidegate {args.command}: {e.type}: {e.message}", file=sys.stderr)
        raise SystemExit(1) from None


def run_status(args: argparse.Namespace) -> int:
    status = _run(args, "GET", "/status", None)
    from .render import status_table

    print(json.dumps(status, indent=2) if args.json else status_table(status))
    return 0


def run_peek(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"name": args.name, "at": args.at}
    if args.key is not None:
        body["key"] = [_key_value(k) for k in args.key]
    result = _run(args, "POST", "/peek", body)
    from .render import format_table

    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{result['name']} ({result['id']}) at {result['time']}: {len(result['rows'])} row(s)")
    print(format_table([*result["columns"], "DIFF"], [[*row, n] for row, n in result["rows"]]))
    return 0


def run_copy_to(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"name": args.name, "url": args.url, "at": args.at}
    result = _run(args, "POST", "/copy-to", body)
    text = f"{result['name']} ({result['id']}): {result['rows']} row(s) written to {result['url']}"
    return _print(args, result, text)


def _rows_from_file(args: argparse.Namespace) -> list[Any] | None:
    """``--csv``/``--parquet``: the file checked against the table's schema, as JSON rows."""
    from tidegate.runtime.frames import frame_updates, read_frame, schema_from_columns
    from tidegate.spec.errors import TidegateError

    from .values import row_to_json

    fmt, path = ("csv", args.csv) if args.csv is not None else ("parquet", args.parquet)
    quoted = '"' + args.table.replace('"', '""') + '"'
    shown = _run(args, "POST", "/sql", {"sql": f"SHOW COLUMNS FROM {quoted}"})
    try:
        schema = schema_from_columns(shown["rows"])
        updates = frame_updates(schema, read_frame(path, fmt, schema), args.table)
    except (OSError, TidegateError) as e:
        print(f"tidegate append: {path}: {type(e).__name__}: {e}", file=sys.stderr)
        return None
    return [[row_to_json(row), diff] for row, diff in updates]


def run_append(args: argparse.Namespace) -> int:
    if args.rows is None:
        from_file = _rows_from_file(args)
        if from_file is None:
            return 1
        args.rows = json.dumps(from_file)
    text = sys.stdin.read() if args.rows == "-" else args.rows
    try:
        rows = json.loads(text)
    except json.JSONDecodeError as e:
        print(f"tidegate append: --rows is not valid JSON: {e}", file=sys.stderr)
        return 2
    result = _run(args, "POST", "/append", {"table": args.table, "rows": rows})
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"appended {result['rows']} row(s) to {result['table']} at {result['time']} (durable)"
        )
    return 0


def _print(args: argparse.Namespace, result: Any, text: str) -> int:
    print(json.dumps(result, indent=2) if args.json else text)
    return 0


def _columns_text(columns: list[dict[str, Any]]) -> str:
    return ", ".join(
        f"{c['name']} {c['type']}{'' if c.get('nullable', True) else ' not null'}" for c in columns
    )


def run_create_table(args: argparse.Namespace) -> int:
    result = _run(args, "POST", "/create-table", {"name": args.name, "columns": args.columns})
    text = f"created table {result['name']} ({result['id']}): {_columns_text(result['columns'])}"
    return _print(args, result, text)


def run_create_index(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"on": args.on, "keys": args.keys}
    if args.name is not None:
        body["name"] = args.name
    result = _run(args, "POST", "/create-index", body)
    keys = ", ".join(result["columns"][k]["name"] for k in result["keys"])
    text = f"created index {result['name']} ({result['id']}) on {result['on']} ({keys})"
    return _print(args, result, text)


def run_create_view(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"name": args.name}
    if args.plan is not None:
        if args.columns is not None:
            print("tidegate create-view: --columns goes with --from", file=sys.stderr)
            return 2
        try:
            text = sys.stdin.read() if args.plan == "-" else Path(args.plan).read_text()
            body["plan"] = json.loads(text)
        except OSError as e:
            print(f"tidegate create-view: cannot read --plan: {e}", file=sys.stderr)
            return 2
        except json.JSONDecodeError as e:
            print(f"tidegate create-view: --plan is not valid JSON: {e}", file=sys.stderr)
            return 2
    else:
        body["from"] = args.source
        if args.columns is not None:
            body["columns"] = args.columns
    result = _run(args, "POST", "/create-view", body)
    text = (
        f"created materialized view {result['name']} ({result['id']}): "
        f"{_columns_text(result['columns'])}"
    )
    return _print(args, result, text)


def run_drop(args: argparse.Namespace) -> int:
    result = _run(args, "POST", "/drop", {"name": args.name, "cascade": args.cascade})
    text = "\n".join(f"dropped {d['kind']} {d['name']} ({d['id']})" for d in result["dropped"])
    return _print(args, result, text)


def run_read_policy(args: argparse.Namespace) -> int:
    policy: dict[str, Any]
    if args.granularity_ms is not None and args.lag_ms is None:
        print("tidegate read-policy: --granularity-ms goes with --lag-ms", file=sys.stderr)
        return 2
    if args.lag_ms is not None:
        policy = {"kind": "lag", "ms": args.lag_ms}
        if args.granularity_ms is not None:
            policy["granularity_ms"] = args.granularity_ms
    elif args.valid_from is not None:
        policy = {"kind": "valid-from", "time": args.valid_from}
    elif args.step_back:
        policy = {"kind": "step-back"}
    else:
        policy = {"kind": "none"}
    result = _run(args, "POST", "/read-policy", {"name": args.name, "policy": policy})
    text = (
        f"read policy of {result['name']} ({result['id']}): {_policy_text(result['policy'])}; "
        f"since now {result['since']}"
    )
    return _print(args, result, text)


def _policy_text(p: dict[str, Any]) -> str:
    kind = p["kind"]
    if kind == "lag":
        return f"lag {p['ms']} ms (granularity {p['granularity_ms']} ms)"
    if kind == "valid-from":
        return f"valid from {p.get('time', p.get('frontier'))}"
    if kind == "none":
        return f"none (since held at {p['since']})"
    return str(kind)
