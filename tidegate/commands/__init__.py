"""The product's subcommands: ``tidegate up``, its clients (``status``, ``describe``, ``peek``,
``subscribe``, ``append``, the DDL commands, ``replica add/drop/list``) and ``demo``.

* :mod:`.up` -- the controller with managed replicas, serving the control endpoint;
  :mod:`.gate` -- the endpoint while it starts, runs and stops; :mod:`.events` -- what
  it prints for people (start-up, replica events);
* :mod:`.client` -- ``status``/``describe``/``peek``/``subscribe``/``append``/
  ``create-table``/``create-index``/``create-view``/``drop``/``read-policy``, clients of that
  endpoint; :mod:`.replicas` -- ``replica add/drop/list``; :mod:`.clusters` --
  ``cluster list/sizes/create/alter/drop/add-replica/drop-replica``;
* :mod:`.overview` -- what ``status``, ``describe`` and ``replica list`` report;
  :mod:`.times` -- times as ISO 8601 beside epoch milliseconds;
* :mod:`.ddl` -- DDL requests as JSON (columns, keys, read policies, plans), checked;
* :mod:`.control` -- the endpoint's client, its file and its contract (JSON over HTTP on
  loopback, bearer token); :mod:`.control_server` -- the server (Starlette on uvicorn);
* :mod:`.service` -- what the endpoint does with an ``Environment``;
* :mod:`.sql` -- ``tidegate sql``, a SQL shell and script runner (``POST /sql``);
* :mod:`.spark` -- ``tidegate spark start-master/start-worker/stop/status``, a local Spark
  standalone cluster for ``--spark-master``;
* :mod:`.demo` -- ``tidegate demo``, what ``make run`` runs;
* :mod:`.recording` -- a real run's client history, for the simulator's offline checker;
* :mod:`.values`, :mod:`.render` -- rows as JSON, and text output (``rich``).

Building the parser imports only the modules' ``add_parser`` functions and
what they need (no runtime, simulator, SQL front end or server): each command
imports its implementation when it runs, so every command starts in well under
0.3 s (``bench/cli.py``; ``tests/test_cli.py`` checks what the parser imports).
"""

from __future__ import annotations

import argparse

__all__ = ["register"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``up`` and its client commands (``status``, ``peek``, ``append``, DDL) to the parser.

    ``demo`` is added by :func:`.demo.add_parser`.
    """
    from . import client, clusters, spark, sql, up

    up.add_parser(sub)
    client.add_parsers(sub)
    clusters.add_parser(sub)
    sql.add_parser(sub)
    spark.add_parser(sub)
