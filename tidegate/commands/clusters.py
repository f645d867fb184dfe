"""``tidegate cluster list|sizes|create|alter|drop|add-replica|drop-replica``: a running
controller's clusters, through its control endpoint.

Materialize's ``SHOW CLUSTERS`` / ``SHOW CLUSTER REPLICAS``, ``CREATE CLUSTER c
(SIZE = ..., REPLICATION FACTOR = ...)``, ``ALTER CLUSTER ... SET``, ``DROP CLUSTER
[CASCADE]`` and ``CREATE`` / ``DROP CLUSTER REPLICA``: ``create NAME --size S
--replication-factor N`` makes a managed cluster whose replicas (processes named
``NAME.r1`` ...) the controller keeps; ``alter`` resizes it or changes how many
replicas it has; ``add-replica`` / ``drop-replica`` change an unmanaged
cluster's replicas (a managed one refuses, as Materialize's does); ``drop``
stops its replicas and, with ``--cascade``, drops what it maintains; ``list``
shows each cluster's replicas (size, status) and objects; ``sizes`` what each
size allocates. Each takes ``--data-dir``, ``--json`` and ``--timeout``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

__all__ = ["add_parser", "clusters_text"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from .client import common_options

    p = sub.add_parser(
        "cluster",
        help="the clusters of a running `tidegate up`: list, sizes, create, alter, drop, "
        "add-replica, drop-replica",
        description="Manage the clusters (compute instances with replicas of their own) of a "
        "running `tidegate up`, as Materialize's CREATE/ALTER/DROP CLUSTER and CREATE/DROP "
        "CLUSTER REPLICA.",
    )
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    ls = actions.add_parser("list", help="every cluster: its replicas (size, status), objects")
    common_options(ls)
    sz = actions.add_parser("sizes", help="the replica sizes and what each allocates")
    common_options(sz)
    cr = actions.add_parser("create", help="create a managed cluster of a size")
    cr.add_argument("name")
    cr.add_argument("--size", help="its replicas' size (default: the environment's)")
    cr.add_argument(
        "--replication-factor", type=int, default=1, help="how many replicas (default 1)"
    )
    common_options(cr)
    al = actions.add_parser("alter", help="resize a managed cluster or change its replicas' count")
    al.add_argument("name")
    al.add_argument("--size")
    al.add_argument("--replication-factor", type=int)
    common_options(al)
    dr = actions.add_parser("drop", help="drop a cluster (its replicas are stopped)")
    dr.add_argument("name")
    dr.add_argument(
        "--cascade", action="store_true", help="also drop what it maintains (and dependents)"
    )
    common_options(dr)
    ad = actions.add_parser("add-replica", help="add a replica to an unmanaged cluster")
    ad.add_argument("cluster")
    ad.add_argument("name")
    ad.add_argument("--size")
    ad.add_argument("--address", metavar="HOST:PORT", help="a replica that runs already")
    common_options(ad)
    rm = actions.add_parser("drop-replica", help="drop a replica of an unmanaged cluster")
    rm.add_argument("cluster")
    rm.add_argument("name")
    common_options(rm)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from .client import run

    args.command = f"cluster {args.action}"
    body: dict[str, Any]
    if args.action in ("list", "sizes"):
        result = run(args, "GET", "/clusters", None)
    elif args.action == "create":
        body = {"name": args.name, "replication_factor": args.replication_factor}
        if args.size is not None:
            body["size"] = args.size
        result = run(args, "POST", "/cluster-create", body)
    elif args.action == "alter":
        body = {"name": args.name}
        if args.size is not None:
            body["size"] = args.size
        if args.replication_factor is not None:
            body["replication_factor"] = args.replication_factor
        result = run(args, "POST", "/cluster-alter", body)
    elif args.action == "drop":
        result = run(args, "POST", "/cluster-drop", {"name": args.name, "cascade": args.cascade})
    elif args.action == "add-replica":
        body = {"cluster": args.cluster, "name": args.name}
        if args.size is not None:
            body["size"] = args.size
        if args.address is not None:
            body["address"] = args.address
        result = run(args, "POST", "/cluster-replica-add", body)
    else:
        result = run(
            args, "POST", "/cluster-replica-drop", {"cluster": args.cluster, "name": args.name}
        )
    if args.json:
        print(json.dumps(result if args.action != "sizes" else result["sizes"], indent=2))
    elif args.action == "sizes":
        print(sizes_text(result["sizes"]))
    else:
        print(clusters_text(result["clusters"]))
    return 0


def clusters_text(clusters: Sequence[dict[str, Any]]) -> str:
    """Clusters and their replicas, one line per replica (a cluster without any: one line)."""
    from .render import format_table

    rows = []
    for c in clusters:
        kind = (
            f"managed {c['size'] or '-'} x{c['replication_factor']}"
            if c["managed"]
            else "unmanaged"
        )
        objects = ", ".join(c["objects"]) or "-"
        reps = c["replicas"] or [None]
        for i, r in enumerate(reps):
            rows.append(
                [
                    c["name"] if i == 0 else "",
                    kind if i == 0 else "",
                    "-" if r is None else r["name"],
                    "-" if r is None or r["size"] is None else r["size"],
                    "-" if r is None else r["status"],
                    objects if i == 0 else "",
                ]
            )
    return format_table(["CLUSTER", "KIND", "REPLICA", "SIZE", "STATUS", "OBJECTS"], rows)


def sizes_text(sizes: dict[str, dict[str, Any]]) -> str:
    from .render import format_bytes, format_table

    return format_table(
        ["SIZE", "SPARK MASTER", "EXECUTOR MEMORY", "DRIVER MEMORY", "STATE ROWS", "MEMORY LIMIT"],
        [
            [
                name,
                z["spark_master"],
                z["executor_memory"] or "-",
                z["driver_memory"] or "-",
                z["state_memory_rows"] or "-",
                format_bytes(z["memory_limit"]),
            ]
            for name, z in sizes.items()
        ],
    )
