"""The reach report (``sim/reach.py``): line coverage by package, with what is left out named."""

from __future__ import annotations

from pathlib import Path

import tidegate.runtime
from tidegate.sim.reach import LEFT_OUT, PACKAGES, measure_reach, reach_report

ROOT = Path(tidegate.runtime.__file__).parent.parent
"""Where the packages ``runtime``, ``replica`` and ``spec`` lie (``tidegate.*`` maps onto them)."""


def test_what_is_left_out_exists_and_says_why() -> None:
    """Each path left out names a file or folder of the product (a rename must not hide a
    module from the report) and gives a reason."""
    for path, why in LEFT_OUT.items():
        assert path.split("/", 1)[0] in PACKAGES
        target = ROOT / path
        assert target.is_dir() if path.endswith("/") else target.is_file(), path
        assert len(why) > 20


def test_the_report_counts_statements_by_package_and_keeps_what_is_left_out_apart() -> None:
    oracle = str(ROOT / "runtime" / "oracle.py")
    grpc = str(ROOT / "runtime" / "transport" / "grpc_client.py")
    plan = str(ROOT / "spec" / "plan" / "schema.py")
    lines = {oracle: {1, 2, 3}, grpc: set(range(1, 400)), plan: set()}
    reach = {r.path: r for r in measure_reach(lines)}
    assert set(reach) == {
        "runtime/oracle.py",
        "runtime/transport/grpc_client.py",
        "spec/plan/schema.py",
    }
    assert reach["spec/plan/schema.py"].run == 0 < reach["spec/plan/schema.py"].statements
    assert reach["runtime/transport/grpc_client.py"].left_out() is not None
    assert reach["runtime/oracle.py"].left_out() is None
    report = reach_report(lines)
    rows = {line.split()[0]: line.split() for line in report.splitlines()[1:4]}
    assert int(rows["runtime"][1]) == reach["runtime/oracle.py"].statements  # gRPC apart
    assert int(rows["replica"][1]) == 0
    assert "spec/plan/schema.py 0%" in report
