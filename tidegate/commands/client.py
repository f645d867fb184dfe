"""``tidegate status``, ``tidegate peek`` and ``tidegate append``: clients of a running ``tidegate up``.

They find the controller through ``DATA_DIR/controller.json`` (see
:mod:`.control`) and print what it answers; ``--json`` prints the raw answer.
Exit status: 0 on success, 1 when the controller refuses (the error's type and
message are printed), 2 for usage errors, 3 when no controller runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .control import ControlClient, ControlError, NoController
from .render import format_table, status_table

__all__ = ["add_parsers"]


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-dir", default="./tidegate-data", help="default: ./tidegate-data")
    p.add_argument("--json", action="store_true", help="print the controller's answer as JSON")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for an answer")


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    st = sub.add_parser("status", help="collections (since, upper, lag) and replicas")
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

    ap = sub.add_parser("append", help="append rows to a table (returns once durable)")
    ap.add_argument("table")
    ap.add_argument(
        "--rows",
        required=True,
        help='JSON: [[v, ...], ...] to insert, or [[[v, ...], diff], ...]; "-" reads stdin',
    )
    _common(ap)
    ap.set_defaults(func=run_append)


def _key_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text  # a bare string


def _call(args: argparse.Namespace, method: str, path: str, body: dict[str, Any] | None) -> Any:
    client = ControlClient.for_data_dir(args.data_dir, timeout=args.timeout)
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
    print(json.dumps(status, indent=2) if args.json else status_table(status))
    return 0


def run_peek(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"name": args.name, "at": args.at}
    if args.key is not None:
        body["key"] = [_key_value(k) for k in args.key]
    result = _run(args, "POST", "/peek", body)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{result['name']} ({result['id']}) at {result['time']}: {len(result['rows'])} row(s)")
    print(format_table([*result["columns"], "DIFF"], [[*row, n] for row, n in result["rows"]]))
    return 0


def run_append(args: argparse.Namespace) -> int:
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
