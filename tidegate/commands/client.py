"""The clients of a running ``tidegate up``: ``status``, ``describe``, ``peek``, ``subscribe``,
``append`` and the DDL commands.

DDL: ``create-table``, ``create-index``, ``create-view``, ``create-source``,
``create-sink``, ``drop`` and ``read-policy`` (their JSON is described in :mod:`.ddl`). They find the
controller through ``DATA_DIR/controller.json`` (see :mod:`.control`) and
print what it answers; ``--json`` prints the raw answer. While the controller
is still starting they wait for it (up to ``--timeout``), saying so once on
stderr. Times are shown as epoch milliseconds with their ISO 8601 form beside
(:mod:`.times`). Exit status: 0 on success, 1 when the controller refuses (the
error's type and message are printed), 2 for usage errors, 3 when no controller
runs.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tidegate.runtime.defaults import default_data_dir

from .control import ControlClient, ControlError, NoController

__all__ = ["add_parsers", "common_options", "run"]


def common_options(p: argparse.ArgumentParser) -> None:
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
        help="the controller's state, collections (frontiers, lag, read policy, hydration), "
        "replicas (status, process, memory limit, last error) and the metrics address",
        description="Show the controller's state (starting, running, stopping), each collection "
        "(since, upper, lag, read policy, hydration per replica, last error) and each replica "
        "(connected, starting, restarting or failed; epoch, address, pid, restarts, memory "
        "limit, objects hydrated, last error). --json adds each collection's description "
        "(columns, keys, plan, dependencies; see tidegate describe).",
    )
    st.add_argument(
        "--wait",
        action="store_true",
        help="wait (up to --timeout) until a controller runs and its replicas are connected; "
        "exit 1 if they are not by then",
    )
    common_options(st)
    st.set_defaults(func=run_status)

    de = sub.add_parser(
        "describe",
        help="what an object is: columns, keys, plan, dependencies, read policy, frontiers",
    )
    de.add_argument("name", help="a table, index, view or materialized view (name or id)")
    common_options(de)
    de.set_defaults(func=run_describe)

    su = sub.add_parser(
        "subscribe",
        help="stream a collection's changes as they happen (Ctrl-C to stop)",
        description="Print the changes of a table, index or materialized view as they happen: "
        "first its contents at the as-of time (each row with diff +1), then every change, one "
        "line each: TIME (ISO time) DIFF and the row. Ctrl-C ends it (and drops the subscribe).",
    )
    su.add_argument("name", help="the collection's name (or id, like u3)")
    su.add_argument(
        "--as-of", type=int, metavar="T", help="start at time T (default: the freshest time)"
    )
    su.add_argument(
        "--up-to",
        type=int,
        metavar="T",
        help="leave out changes at or after time T, and end once the frontier reaches T",
    )
    su.add_argument(
        "--no-snapshot",
        action="store_true",
        help="leave out the contents at the as-of time: only the changes after it",
    )
    su.add_argument(
        "--progress",
        action="store_true",
        help="also print a line each time the collection's frontier moves (PROGRESS T)",
    )
    common_options(su)
    su.set_defaults(func=run_subscribe)

    pk = sub.add_parser("peek", help="read a table, index or materialized view at a time")
    pk.add_argument("name", help="the collection's name (or id, like u3)")
    pk.add_argument("--at", type=int, help="timestamp (default: the freshest complete one)")
    pk.add_argument(
        "--key",
        nargs="+",
        metavar="VALUE",
        help="an index's key values, each as JSON (strings may be bare: --key ann)",
    )
    common_options(pk)
    pk.set_defaults(func=run_peek)

    cp = sub.add_parser(
        "copy-to", help="write a collection's contents at a time as Parquet files under a URL"
    )
    cp.add_argument("name", help="the collection's name (or id, like u3)")
    cp.add_argument("url", help="file:///absolute/dir or s3://bucket/prefix?endpoint=...")
    cp.add_argument("--at", type=int, help="timestamp (default: the freshest complete one)")
    common_options(cp)
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
    ap.add_argument(
        "--request-id",
        metavar="ID",
        help="make the append idempotent: run again with the same ID (after a timeout or an "
        "unknown outcome), it answers the first one's time and is never applied twice",
    )
    common_options(ap)
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
    common_options(ct)
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
    common_options(ci)
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
    common_options(cv)
    cv.set_defaults(func=run_create_view)

    cs = sub.add_parser(
        "create-source",
        help="create a source: a load generator, or a PostgreSQL table replicated into tidegate",
        description="Create a source, ingested by the storage replica (started when the first "
        "source or sink is created): a load generator (--load-generator counter|auction), or a "
        "PostgreSQL table replicated through a publication and a replication slot of its own "
        "(--postgres URL --table T --publication P --slot S; the table needs REPLICA IDENTITY "
        "FULL and the server wal_level=logical). Its columns come from the upstream. The source "
        "is read like a table; NAME_progress says up to which upstream offset it is complete.",
    )
    cs.add_argument("name")
    upstream = cs.add_mutually_exclusive_group(required=True)
    upstream.add_argument("--load-generator", choices=["counter", "auction"], metavar="KIND")
    upstream.add_argument("--postgres", metavar="URL", help="a libpq URL of the upstream server")
    cs.add_argument(
        "--tick-ms", type=_int_at_least(1), metavar="N", help="load generator: ms per tick"
    )
    cs.add_argument("--seed", type=_int_at_least(0), metavar="N", help="load generator: its seed")
    cs.add_argument(
        "--max-cardinality",
        type=_int_at_least(1),
        metavar="N",
        help="load generator: retract the oldest rows past N",
    )
    cs.add_argument("--table", metavar="T", help="postgres: the table (schema-qualified or not)")
    cs.add_argument("--publication", metavar="P", help="postgres: a publication of the table")
    cs.add_argument("--slot", metavar="S", help="postgres: the replication slot the source owns")
    common_options(cs)
    cs.set_defaults(func=run_create_source)

    ck = sub.add_parser(
        "create-sink",
        help="create a sink: a collection's changes committed to an Iceberg table, exactly once",
        description="Create a sink writing out a table, materialized view or source: its changes "
        "(each row with _tidegate_time and _tidegate_diff) are committed to an Apache Iceberg "
        "table of a SQL catalog, exactly once across restarts.",
    )
    ck.add_argument("name")
    ck.add_argument("--from", dest="source", required=True, metavar="OBJ", help="what to write out")
    ck.add_argument(
        "--iceberg-catalog",
        required=True,
        metavar="URL",
        help="the SQL catalog's SQLAlchemy URL, e.g. sqlite:////abs/path/catalog.db",
    )
    ck.add_argument(
        "--warehouse", required=True, metavar="W", help="where data files go: file:///dir or s3://"
    )
    ck.add_argument("--table", required=True, metavar="NS.T", help="the Iceberg table")
    ck.add_argument(
        "--commit-interval",
        metavar="INTERVAL",
        help="commit at most once per INTERVAL, e.g. 5s (default 1s, at least 1s); an interval "
        "with no change makes no commit",
    )
    common_options(ck)
    ck.set_defaults(func=run_create_sink)

    dr = sub.add_parser("drop", help="drop a table, index, view, source or sink")
    dr.add_argument("name")
    dr.add_argument("--cascade", action="store_true", help="drop what reads it too")
    common_options(dr)
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
    common_options(rp)
    rp.set_defaults(func=run_read_policy)


def _key_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text  # a bare string


_RETRY_S = 0.25


def _waiting(args: argparse.Namespace) -> Callable[[], None]:
    def say() -> None:
        print(f"tidegate {args.command}: waiting for the controller to start...", file=sys.stderr)

    return say


def _call(args: argparse.Namespace, method: str, path: str, body: dict[str, Any] | None) -> Any:
    """One request; while the controller is starting, retried until ``--timeout`` passes."""
    with ControlClient.for_data_dir(
        args.data_dir, timeout=args.timeout, on_starting=_waiting(args)
    ) as client:
        return client.call(method, path, body)


def run(args: argparse.Namespace, method: str, path: str, body: dict[str, Any] | None) -> Any:
    """Call the controller for command ``args.command``; exits 3 if none runs, 1 if it refuses."""
    return _run(args, method, path, body)


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
    body = {"describe": True} if args.json else None
    if args.wait:
        status, ready = _wait_ready(args, body)
    else:
        status, ready = _run(args, "GET", "/status", body), True
    from .render import status_table  # rich: only once there is something to show

    print(json.dumps(status, indent=2) if args.json else status_table(status))
    if not ready:
        print(
            f"tidegate status: not ready after {args.timeout:g} s (see the replicas' status "
            "and last error above)",
            file=sys.stderr,
        )
        return 1
    return 0


def _ready(status: dict[str, Any]) -> bool:
    return status.get("state") == "running" and all(
        r.get("status") == "connected" for r in status.get("replicas", [])
    )


def _wait_ready(args: argparse.Namespace, body: dict[str, Any] | None) -> tuple[Any, bool]:
    """``status --wait``: poll until a controller runs with every replica connected."""
    deadline = time.monotonic() + args.timeout
    while True:
        try:
            status = _call(args, "GET", "/status", body)
        except NoController as e:
            if time.monotonic() >= deadline:
                print(f"tidegate status: {e.message}", file=sys.stderr)
                raise SystemExit(3) from None
        except ControlError as e:
            print(f"tidegate status: {e.type}: {e.message}", file=sys.stderr)
            raise SystemExit(1) from None
        else:
            if _ready(status) or time.monotonic() >= deadline:
                return status, _ready(status)
        time.sleep(_RETRY_S)


def run_describe(args: argparse.Namespace) -> int:
    result = _run(args, "POST", "/describe", {"name": args.name})
    from .render import describe_text

    print(json.dumps(result, indent=2) if args.json else describe_text(result))
    return 0


def run_subscribe(args: argparse.Namespace) -> int:
    """Stream a subscribe's lines until it ends, fails or Ctrl-C (which ends it cleanly)."""
    from .times import format_time

    body: dict[str, Any] = {"name": args.name}
    if args.as_of is not None:
        body["as_of"] = args.as_of
    if args.up_to is not None:
        body["up_to"] = args.up_to
    if args.no_snapshot:
        body["snapshot"] = False
    batches = changes = 0
    try:
        with ControlClient.for_data_dir(
            args.data_dir, timeout=args.timeout, on_starting=_waiting(args)
        ) as client:
            client.call("POST", "/describe", {"name": args.name})  # waits while it starts
            lines = client.stream("POST", "/subscribe", body)  # a generator: closed below
            try:
                for line in lines:
                    if "updates" in line:  # counted before it is shown: Ctrl-C may follow
                        batches += 1
                        changes += len(line["updates"])
                    if args.json:
                        print(json.dumps(line), flush=True)
                    if "error" in line:
                        err = line["error"]
                        print(
                            f"tidegate subscribe: {err['type']}: {err['message']}", file=sys.stderr
                        )
                        return 1
                    if "subscribe" in line:
                        if not args.json:
                            print(
                                f"subscribe {line['subscribe']} ({line['id']}) as of "
                                f"{format_time(line['as_of'])}; Ctrl-C to stop",
                                file=sys.stderr,
                            )
                            print("  ".join(["TIME", "DIFF", *line["columns"]]), flush=True)
                        continue
                    if not args.json:
                        _print_batch(line, args.progress)
                    if not line["upper"]:
                        return 0  # complete: its UP TO reached, or its input is
            finally:
                lines.close()
    except KeyboardInterrupt:
        print(
            f"tidegate subscribe: stopped after {batches} batch(es), {changes} change(s)",
            file=sys.stderr,
        )
        return 0
    except NoController as e:
        print(f"tidegate subscribe: {e.message}", file=sys.stderr)
        return 3
    except ControlError as e:
        print(f"tidegate subscribe: {e.type}: {e.message}", file=sys.stderr)
        return 1
    return 0


def _print_batch(line: dict[str, Any], progress: bool) -> None:
    from .times import format_time
    from .values import format_value

    for u in line["updates"]:
        cells = [format_time(u["time"]), f"{u['diff']:+d}", *(format_value(v) for v in u["row"])]
        print("  ".join(cells))
    if progress and line["upper"]:
        print(f"PROGRESS {format_time(line['upper'][0])}")
    sys.stdout.flush()


def run_peek(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"name": args.name, "at": args.at}
    if args.key is not None:
        body["key"] = [_key_value(k) for k in args.key]
    result = _run(args, "POST", "/peek", body)
    from .render import format_table

    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    from .times import format_time

    fresh = " (the freshest time)" if result.get("freshest") else ""
    print(
        f"{result['name']} ({result['id']}) at {format_time(result['time'])}{fresh}: "
        f"{len(result['rows'])} row(s)"
    )
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
    body: dict[str, Any] = {"table": args.table, "rows": rows}
    if args.request_id is not None:
        body["request_id"] = args.request_id
    result = _run(args, "POST", "/append", body)
    if args.json:
        print(json.dumps(result))
    else:
        from .times import format_time

        print(
            f"appended {result['rows']} row(s) to {result['table']} at "
            f"{format_time(result['time'])} (durable)"
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


def run_create_source(args: argparse.Namespace) -> int:
    connection: dict[str, Any]
    if args.load_generator is not None:
        if any(x is not None for x in (args.table, args.publication, args.slot)):
            print(
                "tidegate create-source: --table, --publication and --slot go with --postgres",
                file=sys.stderr,
            )
            return 2
        connection = {"type": "load_generator", "kind": args.load_generator}
        for field in ("tick_ms", "seed", "max_cardinality"):
            value = getattr(args, field)
            if value is not None:
                connection[field] = value
    else:
        if any(x is not None for x in (args.tick_ms, args.seed, args.max_cardinality)):
            print(
                "tidegate create-source: --tick-ms, --seed and --max-cardinality go with "
                "--load-generator",
                file=sys.stderr,
            )
            return 2
        missing = [f"--{f}" for f in ("table", "publication", "slot") if getattr(args, f) is None]
        if missing:
            print(f"tidegate create-source: --postgres needs {', '.join(missing)}", file=sys.stderr)
            return 2
        connection = {
            "type": "postgres",
            "url": args.postgres,
            "table": args.table,
            "publication": args.publication,
            "slot": args.slot,
        }
    result = _run(args, "POST", "/create-source", {"name": args.name, "connection": connection})
    text = (
        f"created source {result['name']} ({result['id']}): {result['connection']}; "
        f"columns {_columns_text(result['columns'])}"
    )
    return _print(args, result, text)


def run_create_sink(args: argparse.Namespace) -> int:
    connection = {
        "type": "iceberg",
        "catalog_url": args.iceberg_catalog,
        "warehouse": args.warehouse,
        "table": args.table,
    }
    if args.commit_interval is not None:
        from tidegate.spec.sql.interval import parse_interval_ms

        try:
            connection["commit_interval_ms"] = parse_interval_ms(args.commit_interval)
        except ValueError as e:
            print(f"tidegate create-sink: --commit-interval: {e}", file=sys.stderr)
            raise SystemExit(2) from None
    body = {"name": args.name, "from": args.source, "connection": connection}
    result = _run(args, "POST", "/create-sink", body)
    reads = result.get("reads") or {}
    text = (
        f"created sink {result['name']} ({result['id']}) of {reads.get('name')}: "
        f"{result['connection']}"
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
    from .render import format_frontier

    text = (
        f"read policy of {result['name']} ({result['id']}): {_policy_text(result['policy'])}; "
        f"since now {format_frontier(result['since'])}"
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
