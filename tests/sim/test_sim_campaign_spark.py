"""Campaigns on Spark: seeds run as Spark tasks give exactly what they give in processes.

The local test runs on the test session's SparkSession (``local[2]``, the ``spark``
fixture of ``tests/spark_cluster.py``); the standalone test runs ``tidegate sim campaign
--spark-master spark://...`` in a process of its own (Spark allows one context per
process) against a master and worker started on loopback.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sim_quick import MUTANT, QUICK
from spark_cluster import LOOPBACK_ENV

from tidegate.sim.campaign import CampaignReport, SeedOutcome, run_campaign
from tidegate.sim.replay import load_replayable, replay
from tidegate.sim.run import RunOptions, run_simulation

pytestmark = [pytest.mark.processes, pytest.mark.spark]


def _seeds() -> range:
    """The first seed of 1-40 the mutant breaks and the three before it (which it need not:
    about one seed in five subscribes while the clients retract rows, and which ones moves
    with every change of the runs)."""
    for seed in range(1, 41):
        if not run_simulation(RunOptions(seed, QUICK, mutant=MUTANT)).ok:
            return range(max(1, seed - 3), seed + 1)
    raise AssertionError(f"no seed in 1..40 of {QUICK.name} fails with {MUTANT}")


@pytest.fixture(scope="module")
def seeds() -> range:
    return _seeds()


def _key(outcomes: list[SeedOutcome]) -> list[tuple[Any, ...]]:
    return [(o.seed, o.ok, o.property, o.message, o.at_ms, o.digest) for o in outcomes]


@pytest.fixture(scope="module")
def in_processes(seeds: range) -> CampaignReport:
    report = run_campaign(seeds, QUICK, mutant=MUTANT, jobs=2)
    assert report.failures and report.passes, (
        f"seeds {seeds} of {QUICK.name} with {MUTANT} should both pass and fail: {report.table()}"
    )
    return report


def test_a_campaign_on_local_spark_gives_what_it_gives_in_processes(
    spark: Any, seeds: range, in_processes: CampaignReport, tmp_path: Path
) -> None:
    assert spark.sparkContext.master == "local[2]"
    seen: list[int] = []
    on_spark = run_campaign(
        seeds,
        QUICK,
        mutant=MUTANT,
        spark_master="local[2]",
        on_outcome=lambda o: seen.append(o.seed),
    )
    assert sorted(seen) == list(seeds)
    assert _key(on_spark.outcomes) == _key(in_processes.outcomes)
    assert f"seeds      {len(seeds)} on Spark (local[2])" in on_spark.table()
    assert all(o.trace is None for o in on_spark.outcomes if o.ok)
    # A failing seed's trace comes back from its task, and replays to the same failure.
    saved = on_spark.save_failures(tmp_path)
    assert [p.name for p in saved] == [f"seed-{o.seed}.json" for o in on_spark.failures]
    for outcome, path in zip(on_spark.failures, saved, strict=True):
        assert outcome.trace is not None and outcome.trace["trace_digest"] == outcome.digest
        again = replay(load_replayable(path))
        assert again.matches is True
        v = again.result.violation
        assert (v.property, v.message, v.at_ms) == (
            outcome.property,
            outcome.message,
            outcome.at_ms,
        )


def test_a_campaign_refuses_a_master_other_than_the_running_contexts(spark: Any) -> None:
    """Spark has one context per process: a campaign for another master must not quietly run
    on this one."""
    with pytest.raises(ValueError, match=r"already has a SparkContext on local\[2\]"):
        run_campaign([1], QUICK, spark_master="local[1]")


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_a_campaign_on_a_standalone_spark_cluster(
    standalone_cluster: str, seeds: range, in_processes: CampaignReport, tmp_path: Path
) -> None:
    scenario = tmp_path / "quick.json"
    scenario.write_text(QUICK.dumps())
    # Loopback, but no PYSPARK_PYTHON: the campaign runs its tasks on its own interpreter.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
    env.update(SPARK_HOME=LOOPBACK_ENV["SPARK_HOME"], SPARK_LOCAL_IP="127.0.0.1")
    span = f"{seeds.start}..{seeds.stop - 1}"
    command = [sys.executable, "-m", "tidegate.cli", "sim", "campaign", "--seeds", span]
    command += ["--scenario", str(scenario), "--mutant", MUTANT]
    command += ["--spark-master", standalone_cluster, "--save-failures", str(tmp_path / "fails")]
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=360,
    )
    assert done.returncode == 1, done.stdout + done.stderr[-3000:]
    assert f"seeds      {len(seeds)} on Spark ({standalone_cluster})" in done.stdout
    assert f"passed     {in_processes.passes}" in done.stdout
    for o in in_processes.failures:
        assert f"  seed {o.seed}: {o.property} at {o.at_ms}ms: {o.message}" in done.stdout
        trace = load_replayable(tmp_path / "fails" / f"seed-{o.seed}.json")
        assert trace.expected_digest == o.digest
    # The tasks ran on the cluster's executors (each application gets a work directory).
    work = tmp_path / "spark" / "work"
    assert [p.name for p in work.iterdir() if re.fullmatch(r"app-[\d-]+", p.name)]
