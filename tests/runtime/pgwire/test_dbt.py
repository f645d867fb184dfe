"""dbt-core with dbt-materialize, end to end, on a project of tidegate's own (``dbt_project/``).

dbt runs from its own virtualenv (``build/dbt-venv``, made by ``make setup``
from ``requirements/dbt.txt``: its adapters need an older protobuf than
tidegate's). It reaches the served environment over the wire protocol as it
reaches Materialize: psycopg2, the ``mz_version`` parameter, ``mz_objects`` /
``mz_schemas`` / ``mz_databases`` to list relations, ``pg_namespace`` for
schemas, ``CREATE [MATERIALIZED] VIEW ... IN CLUSTER``, ``CREATE [DEFAULT]
INDEX``, ``DROP ... CASCADE`` on the second run, tests as queries, and
``mz_columns``/``mz_roles``/``mz_internal.mz_comments`` for ``docs generate``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import psycopg
import pytest

from .conftest import Server

pytestmark = [pytest.mark.processes, pytest.mark.slow, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[3]
DBT = ROOT / "build" / "dbt-venv" / "bin" / "dbt"
PROJECT = Path(__file__).parent / "dbt_project"


def _dbt(project: Path, profiles: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert DBT.exists(), f"{DBT} is missing: make setup installs it (requirements/dbt.txt)"
    env = {**os.environ, "DBT_SEND_ANONYMOUS_USAGE_STATS": "false", "NO_COLOR": "1"}
    return subprocess.run(
        [str(DBT), *args, "--profiles-dir", str(profiles), "--project-dir", str(project)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=project,
    )


def test_run_test_and_docs_generate(pg_server: Server, tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(PROJECT, project)
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "profiles.yml").write_text(
        "tidegate:\n"
        "  target: dev\n"
        "  outputs:\n"
        "    dev:\n"
        "      type: materialize\n"
        f"      host: {pg_server.host}\n"
        f"      port: {pg_server.port}\n"
        "      user: materialize\n"
        f"      password: {pg_server.password}\n"
        "      dbname: materialize\n"
        "      schema: public\n"
        "      cluster: default\n"
        "      sslmode: disable\n"
        "      threads: 2\n"
    )
    with psycopg.connect(pg_server.url, autocommit=True) as c:
        c.execute(
            "CREATE TABLE raw_orders (id bigint NOT NULL, customer text NOT NULL, "
            "amount double precision, status text NOT NULL)"
        )
        c.execute(
            "INSERT INTO raw_orders VALUES (1, 'Ann', 10, 'open'), (2, 'bob', 150, 'shipped'), "
            "(3, 'ann', 5, 'cancelled'), (4, 'cy', 120, 'open')"
        )
        for attempt in range(2):  # the second run drops and recreates every model
            run = _dbt(project, profiles, "run")
            assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
            assert "PASS=3" in run.stdout, (attempt, run.stdout[-3000:])
        tested = _dbt(project, profiles, "test")
        assert tested.returncode == 0, tested.stdout[-4000:]
        assert "PASS=9" in tested.stdout
        totals = c.execute("SELECT * FROM customer_totals ORDER BY customer").fetchall()
        assert totals == [("ann", 1, 10.0), ("bob", 1, 150.0), ("cy", 1, 120.0)]
        indexes = c.execute("SHOW INDEXES").fetchall()
        assert ("customer_totals_customer_idx", "customer_totals", "customer") in indexes
        assert any(i[0] == "big_orders_primary_idx" for i in indexes)
        # the models stay maintained: a new order shows in the materialized view
        c.execute("INSERT INTO raw_orders VALUES (5, 'ANN', 1, 'open')")
        assert c.execute(
            "SELECT orders, total FROM customer_totals WHERE customer = 'ann'"
        ).fetchone() == (2, 11.0)
        # a failing test fails: a duplicate id
        c.execute("INSERT INTO raw_orders VALUES (5, 'dup', 1, 'open')")
        failing = _dbt(project, profiles, "test", "--select", "stg_orders")
        assert failing.returncode == 1 and "unique_stg_orders_id" in failing.stdout
    docs = _dbt(project, profiles, "docs", "generate")
    assert docs.returncode == 0, docs.stdout[-4000:]
    catalog = json.loads((project / "target" / "catalog.json").read_text())
    node = catalog["nodes"]["model.tidegate_shop.customer_totals"]
    assert node["metadata"]["type"] == "materialized_view"
    assert list(node["columns"]) == ["customer", "orders", "total"]
    assert node["columns"]["orders"]["type"] == "bigint"
    assert catalog["nodes"]["model.tidegate_shop.stg_orders"]["metadata"]["type"] == "view"
