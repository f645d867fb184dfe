"""``tidegate replica add|drop|list``: a running controller's replicas, through its control endpoint.

Materialize's ``CREATE CLUSTER REPLICA`` / ``DROP CLUSTER REPLICA`` and
``SHOW CLUSTER REPLICAS``: ``add NAME`` starts a managed replica process (the
environment's executor and Spark master unless ``--executor`` /
``--spark-master`` say otherwise) or, with ``--address HOST:PORT``, connects
to a replica that runs already; either way it is recorded in the catalog (a
restarted ``tidegate up`` runs it too) and hydrated with everything the
controller maintains. ``drop NAME`` stops and forgets it. ``list`` shows each
replica's status, process, memory limit, hydration and last error.

``tidegate replica`` followed by anything else runs a replica process
(:mod:`tidegate.replica.main`); ``tidegate replica --help`` describes both.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

__all__ = ["ACTIONS", "build_parser", "help_text", "main"]

ACTIONS = ("add", "drop", "list")
"""The first words of ``tidegate replica`` that manage replicas (anything else runs one)."""


def build_parser() -> argparse.ArgumentParser:
    from .client import common_options
    from .help_text import Parser

    p = Parser(
        prog="tidegate replica",
        description="Manage the replicas of a running `tidegate up` (add, drop, list).",
    )
    sub = p.add_subparsers(dest="action", required=True, metavar="{add,drop,list}")
    ls = sub.add_parser("list", help="the replicas: status, process, memory limit, hydration")
    common_options(ls)
    add = sub.add_parser(
        "add",
        help="add a replica (recorded in the catalog): a managed process, or one at --address",
        description="Add a replica while the controller runs (Materialize's CREATE CLUSTER "
        "REPLICA): without --address the controller starts a managed replica process; with "
        "it, the controller connects to a replica that runs there already. It is recorded in "
        "the catalog and hydrated with every index and materialized view.",
    )
    add.add_argument("name", help="the replica's name ([A-Za-z0-9._-]+ for a managed one)")
    add.add_argument("--address", metavar="HOST:PORT", help="a replica that runs already")
    add.add_argument(
        "--executor",
        choices=("spark", "python"),
        help="a managed replica's executor (default: the environment's)",
    )
    add.add_argument(
        "--spark-master", help="a managed replica's Spark master (default: the environment's)"
    )
    add.add_argument(
        "--wait",
        action="store_true",
        help="return once the controller is connected to it (up to --timeout)",
    )
    common_options(add)
    drop = sub.add_parser("drop", help="drop a replica (a managed one is stopped)")
    drop.add_argument("name")
    common_options(drop)
    return p


def help_text() -> str:
    """``tidegate replica --help``: managing replicas, then running one."""
    from tidegate.replica.main import build_parser as process_parser

    return (
        "usage: tidegate replica {list,add,drop} ...      manage a running controller's replicas\n"
        "       tidegate replica --listen HOST:PORT ...   run a replica process\n\n"
        "Managing the replicas of a running tidegate up (through its control endpoint):\n"
        "  tidegate replica list                 status, process, memory limit, hydration, "
        "last error\n"
        "  tidegate replica add NAME             start a managed replica (recorded in the "
        "catalog)\n"
        "      [--executor {spark,python}] [--spark-master URL] [--wait]\n"
        "  tidegate replica add NAME --address HOST:PORT   connect to one that runs already\n"
        "  tidegate replica drop NAME            stop it and forget it\n"
        "  Each takes --data-dir, --json and --timeout: tidegate replica ACTION --help.\n\n"
        "Running a replica process (any other arguments):\n\n"
        f"{process_parser().format_help()}"
    )


def main(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(list(argv))
    args.command = f"replica {args.action}"
    if args.action == "list":
        return _list(args)
    if args.action == "add":
        return _add(args)
    return _drop(args)


def _list(args: argparse.Namespace) -> int:
    from .client import run

    result = run(args, "GET", "/replicas", None)
    from .render import replicas_table  # rich: only once there is something to show

    print(
        json.dumps(result, indent=2)
        if args.json
        else replicas_table(result["replicas"], detail=True)
    )
    return 0


def _add(args: argparse.Namespace) -> int:
    from .client import run

    body: dict[str, Any] = {"name": args.name}
    if args.address is not None:
        if args.executor is not None or args.spark_master is not None:
            print(
                "tidegate replica add: --executor and --spark-master are for managed replicas, "
                "not one at --address",
                file=sys.stderr,
            )
            return 2
        body["address"] = args.address
    if args.executor is not None:
        body["executor"] = args.executor
    if args.spark_master is not None:
        body["spark_master"] = args.spark_master
    started = time.monotonic()
    r = run(args, "POST", "/replica-add", body)
    if args.wait:
        r = _wait_connected(args, r, started)
    if args.json:
        print(json.dumps(r, indent=2))
    else:
        print(_added_text(r))
    return 0 if not args.wait or r["status"] == "connected" else 1


def _added_text(r: dict[str, Any]) -> str:
    if r.get("managed"):
        runs = f"managed, {r.get('executor')} executor"
        if r.get("executor") == "spark":
            runs += f" on {r.get('spark_master')}"
        process = f"; process pid {r.get('pid')} on {r.get('address')}" if r.get("pid") else ""
    else:
        runs, process = f"at {r.get('address')}", ""
    text = f"added replica {r['name']} ({runs}){process}: {r['status']}"
    if r.get("last_error"):
        text += f" ({r['last_error']})"
    if r["status"] != "connected":
        text += " (see tidegate replica list)"
    return text


def _wait_connected(args: argparse.Namespace, r: dict[str, Any], started: float) -> dict[str, Any]:
    from .client import run

    while r["status"] != "connected" and time.monotonic() - started < args.timeout:
        time.sleep(0.25)
        for x in run(args, "GET", "/replicas", None)["replicas"]:
            if x["name"] == r["name"]:
                r = x
    return r


def _drop(args: argparse.Namespace) -> int:
    from .client import run

    r = run(args, "POST", "/replica-drop", {"name": args.name})
    if args.json:
        print(json.dumps(r, indent=2))
    else:
        stopped = " (its process stopped)" if r.get("managed") else ""
        print(f"dropped replica {r['name']}{stopped}")
    return 0
