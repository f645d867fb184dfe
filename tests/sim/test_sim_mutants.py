"""Bug-finding power: the default campaign finds every deliberately broken variant, and shrinks it.

For each mutant in :mod:`tidegate.sim.mutants` -- bugs planted in the spec and in
the production runtime -- the default campaign (seeds 1, 2, ... of the scenario
the mutant names, ``small`` for most, ``sources`` for the storage replica's, run in order,
in-process) must find a seed
that fails with the mutant switched on and passes without it, within the
mutant's stated budget.
Found reproducers shrink to a few steps and replay. Run pytest with ``-s`` to
see where each mutant was caught.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Mapping
from typing import Any

import pytest

from tidegate.sim.mutants import MUTANTS, mutant_names
from tidegate.sim.run import RunOptions, run_simulation
from tidegate.sim.scenario import SCENARIOS, Scenario
from tidegate.sim.shrink import describe, shrink
from tidegate.sim.sql_clients import SQL_ACTIONS

SEED_BUDGET = 20
"""The stated number of seeds within which the default campaign finds a mutant."""

SEED_BUDGETS = {
    "history_drops_live_peek": 30,  # caught at seed 18: a pending peek across a reconnect
    # standard, seed 35 (controller_survives): the controller crashes on the CatalogConflict
    # of its retry of a write whose answer was lost (seed 9 before dead processes' storage
    # calls raised ProcessKilled, which moved the interleavings)
    "catalog_unknown_outcome_lost": 40,
    # sources, seed 9: a storage replica restarted between a binding's write and its data's
    # (a crash point in the data write) resumes upstream past the data it still has to write
    "resume_from_remap_upper": 10,
    # sources, seed 11: a zombie storage replica commits a range the new incarnation already
    # committed to the sink's Iceberg table
    "iceberg_commit_unchecked": 15,
    # small, seed 25 (no_phantom_writes): a compare-and-append whose answer a storage outage
    # lost, retried without its token, while the SQL clients' actions move the interleavings
    "write_retry_without_token": 30,
}
"""Mutants that need a lucky coincidence of faults, with their measured first catch."""

STORAGE_MUTANTS: dict[str, str | tuple[str, ...]] = {
    # mutant: the property the sources campaign catches it by (at seed 1, unless in SEED_BUDGETS)
    "source_ack_on_delivery": "upstream_acked_only_durable",
    "data_before_binding": "binding_before_data",
    "resume_from_remap_upper": "source_exactly_once",
    # the shard refuses the write; the source stalls, and a fresh read of it never ends (which
    # of the two end-of-run checks speaks first depends on the seed's workload)
    "reclock_off_by_one": ("sources_catch_up", "operations_complete"),
    # seed 11: with the production Iceberg writer, a commit whose lower is not its updates'
    # is refused, and the sink stalls behind its input
    "sink_commit_unconditional": ("sink_commits_chain", "sinks_catch_up"),
    # the production Iceberg writer's commit logic (sim/iceberg.py runs it over a simulated
    # catalog): a table whose commits drop earlier files (pyiceberg's scan at the end), another
    # sink's progress taken for the sink's own (seed 3: a sink dropped and created again writes
    # the same table), a zombie's commit that lands twice
    "iceberg_stage_drops_parent": "sink_table_matches_commits",
    "iceberg_covered_of_any_sink": "sink_exactly_once",
    "iceberg_commit_unchecked": "sink_commits_chain",
    "ceased_read_waits": "operations_complete",  # a fresh read of a ceased source never ends
    # the PostgreSQL reader's protocol core, driven over the simulated upstream's pgoutput bytes:
    # an UPDATE's old row of the wrong width is a protocol violation, the source never catches
    # up and the dataflows over it never hydrate
    "pg_update_drops_old_column": ("hydration_completes", "sources_catch_up"),
    "pg_ack_off_by_one": "upstream_acked_only_durable",  # the slot confirms one offset too far
    # a batch whose upper passed a transaction still open: its changes come below that upper
    "pg_keepalive_inside_transaction": "storage_replica_works",
}

SECOND_ROUND_MUTANTS: dict[str, str | tuple[str, ...]] = {
    # mutant: the property its scenario's campaign (split_brain, damaged) catches it by
    "fenced_write_refused": "no_phantom_writes",  # a deposed controller's landed write "refused"
    # seed 10: the zombie predecessor changes a catalog its successor does not read again: a
    # read of what the zombie created is "unknown", or the successor finds itself fenced
    "open_leaves_catalog": ("valid_reads_answered", "controller_survives"),
    "hello_without_epoch": "read_below_since",  # a deposed controller's dataflows on replicas
    "records_unsealed": "rot_detected",  # a rotten catalog or oracle record read as data
    # an empty start: its tables vanish (the shards are kept: only what a catalog recorded as
    # dropped is ever finalized, so nothing_deleted_undropped needs both defences broken)
    "catalog_missing_ignored": "valid_reads_answered",
    "full_disk_not_waited_out": "drops_clean_up",  # seed 2: a dropped shard left on a full disk
}


SQL_MUTANTS: dict[str, str | tuple[str, ...]] = {
    # mutant: the property small's campaign catches it by (the first seed, where noted)
    "sql_subquery_drops_offset": "peek_matches_reference",
    "pgwire_portal_skips_row": "peek_matches_reference",
    # NOT IN over a NULL keeps rows (or an answer that is an earlier time's contents)
    "sql_in_subquery_ignores_nulls": ("peek_matches_reference", "strict_serializable"),
    # a script's good INSERT lands though a later statement of it was refused (seed 1)
    "sql_script_not_atomic": "no_phantom_writes",
    # a COPY FROM STDIN the client ended with CopyFail is answered "COPY n" (seed 5)
    "copy_fail_ignored": "sql_refused_as_postgresql",
    # seed 1: a read-only transaction's storage holds outlive it
    "read_transaction_keeps_holds": "holds_have_owners",
    # seed 2: a write lands while the client thinks between its two reads of one query
    "read_transaction_reads_fresh": "read_transaction_repeatable",
    # seed 12: rows of a UNION's side WHERE mz_now() >= n + a AND mz_now() < n + b read before
    # n + a (the offline check names it when an online read's window was open above)
    "sql_temporal_ignores_lower_bound": (
        "peek_matches_reference",
        "history:peek_matches_reference",
    ),
    # clusters, seed 1: CREATE INDEX ... IN CLUSTER c lands on the session's cluster (a drop of
    # c without CASCADE then succeeds, or the index runs on the wrong cluster at the end)
    "sql_ignores_in_cluster": ("clusters_not_empty_refused", "dataflows_on_their_cluster"),
    # clusters, seed 9: a query after SET cluster = c, c dropped, answered from default
    "sql_unknown_cluster_runs_in_default": "sql_cluster_refusals",
}
"""Bugs of the SQL front end and the wire protocol, seen by the SQL clients' judged reads."""

CHECK_MUTANTS = {
    # mutant: the independent check that catches it (docs/simulator.md, "What is checked"), at
    # seed 1 of small unless noted
    "policy_rounds_up": "compaction_within_policy",
    "restore_forgets_policies": "restore_keeps_promised_history",  # seed 2
    "catalog_swaps_policy_fields": "compaction_progresses",
    "hydrated_at_as_of": "hydration_matches_trace",
    "hydrated_when_complete": "hydration_matches_trace",  # the converse, at rest
    "cancelled_peek_keeps_hold": "holds_have_owners",
    "driver_keeps_answered_peeks": "no_pending_peeks",
    "complete_subscribe_kept": "subscribes_finish",
    "subscribe_end_swallowed": "subscribes_complete",  # seed 2
    "copy_to_ignores_counts": "copy_to_matches_reference",
    "reused_dataflows_go_quiet": "replicas_agree",  # seed 4: a reconnect that reuses dataflows
    "peek_ignores_named_cluster": "peeks_answered_in_their_cluster",  # clusters, seed 1
    "drop_cluster_keeps_dataflows": "drops_clean_up",  # clusters, seed 8
    "alter_cluster_leaves_surplus_running": "managed_replicas_match",  # clusters, seed 11
}
"""Mutants that only a check of their own sees: each check that shares no code with what it
judges has one, and the test above requires that check to be the one that catches it."""

TIMING_MUTANTS = {
    # mutant: the seed of small without the SQL clients that catches it (their reads move the
    # interleaving where a compaction passes a pending peek's time)
    "peek_without_hold": 13,
    "release_hold_before_cancel": 13,
}
"""Mutants of the controller's read holds on peeks, seen when a compaction meets a peek in
flight: caught by the protocol checks (controller_survives) without the SQL clients."""

_CRASHED_ITSELF = re.compile(r"\b(TypeError|AttributeError|NameError)\b|positional argument")
"""What a violation says when the mutant's replacement code itself failed to run."""


@functools.cache
def _baseline_ok(scenario: Scenario, seed: int) -> bool:
    return run_simulation(RunOptions(seed, scenario)).ok


def _first_catch(name: str) -> tuple[int, Any] | None:
    """The first seed (in campaign order) failing with the mutant and passing without it.

    A mutant that proves a check of its own, a fault's, or a timing's runs without the SQL
    clients: their reads see many bugs first (``subscribe_end_swallowed`` fails a SQL query before a
    subscribe's end is judged) and their actions move the interleavings a fault needs, and what
    is shown is that this check, on its own, catches it."""
    scenario = SCENARIOS[MUTANTS[name].scenario]()
    if name in CHECK_MUTANTS or name in SECOND_ROUND_MUTANTS or name in TIMING_MUTANTS:
        quiet = dict.fromkeys(SQL_ACTIONS, 0)
        scenario = dataclasses.replace(
            scenario, workload=dataclasses.replace(scenario.workload, **quiet)
        )
    for seed in range(1, SEED_BUDGETS.get(name, SEED_BUDGET) + 1):
        result = run_simulation(RunOptions(seed, scenario, mutant=name, trace_tail=20))
        if result.violation is not None and _baseline_ok(scenario, seed):
            return seed, result.violation
    return None


def _slow(name: str) -> Any:
    """Mutants that need a lucky coincidence take minutes to find: ``make soak`` runs them."""
    if name in SEED_BUDGETS:
        return pytest.param(name, marks=[pytest.mark.slow, pytest.mark.soak])
    return name


@pytest.mark.slow
@pytest.mark.parametrize("name", [_slow(n) for n in mutant_names(detectable=True)])
def test_the_default_campaign_finds_the_mutant(name: str) -> None:
    found = _first_catch(name)
    budget = SEED_BUDGETS.get(name, SEED_BUDGET)
    assert found is not None, f"mutant {name} ({MUTANTS[name].description}) survived {budget} seeds"
    seed, violation = found
    print(f"\n{name}: caught at seed {seed}: {violation}")
    # A mutant whose own code crashes is not caught by the checkers (five of them did, for a
    # while, after the outbox refactor changed the signatures they replace).
    assert not _CRASHED_ITSELF.search(violation.message), violation
    by_property: tuple[Mapping[str, str | tuple[str, ...]], ...] = (
        STORAGE_MUTANTS,
        SECOND_ROUND_MUTANTS,
        SQL_MUTANTS,
        CHECK_MUTANTS,
    )
    for known in by_property:
        if name in known:  # by the property it breaks
            expected = known[name]
            wanted = (expected,) if isinstance(expected, str) else expected
            assert violation.property in wanted, violation


def test_the_only_undetectable_mutant_is_masked_by_a_second_defence() -> None:
    """A mutant the simulator cannot observe is marked with the reason; the one left is a
    controller check that the production driver makes unreachable (defence in depth)."""
    assert mutant_names(detectable=False) == ["accepts_stale_epoch"]
    assert "second line of defence" in str(MUTANTS["accepts_stale_epoch"].undetectable)


def test_there_are_mutants_of_the_runtime_as_well_as_of_the_spec() -> None:
    assert len(mutant_names(detectable=True)) >= 18
    for name in ("fresh_reads_from_uppers", "ack_before_durable", "blob_after_commit"):
        assert name in MUTANTS


def test_the_storage_world_has_mutants_of_ingestion_reclocking_and_sinks() -> None:
    """Bugs of the storage replica (the spec core and the service), found by the ``sources``
    campaign; which property catches each is recorded here and checked by the test above."""
    assert {n for n in mutant_names(detectable=True) if MUTANTS[n].scenario == "sources"} == set(
        STORAGE_MUTANTS
    )


def test_the_faults_real_systems_meet_have_mutants_of_the_bugs_they_found() -> None:
    """Each bug a fault of the second round found (a zombie controller, a damaged disk) is a
    mutant of its scenario, found by the property recorded above."""
    assert {
        n
        for n in mutant_names(detectable=True)
        if MUTANTS[n].scenario in ("split_brain", "damaged")
    } == set(SECOND_ROUND_MUTANTS)


@pytest.mark.slow
@pytest.mark.soak
@pytest.mark.parametrize("name", ["fresh_reads_from_uppers", "subscribe_loses_retractions"])
def test_a_mutant_reproducer_shrinks_to_a_few_steps_and_replays(name: str) -> None:
    """A generated plan of ~150 steps (every fault kind and client action a seed's swarm
    draws) shrinks to a few within a budget of runs, not of seconds: a busy machine gets as
    far as a quiet one (fresh_reads_from_uppers: 3 steps, after about 250 s of CPU)."""
    found = _first_catch(name)
    assert found is not None
    seed, violation = found
    options = RunOptions(seed, SCENARIOS[MUTANTS[name].scenario](), mutant=name, trace_tail=20)
    result = shrink(options, max_runs=400)
    print(f"\n{describe(result)}")
    assert result.violation.property == violation.property
    assert result.size <= 15 < result.original_steps, describe(result)
    again = run_simulation(result.options)
    assert again.trace_digest == result.result.trace_digest
    assert again.violation == result.violation


def test_every_independent_check_has_a_mutant_of_its_own() -> None:
    """The checks added so that no check shares code with what it judges (policies, restores,
    hydration, quiescence, subscribes that complete, copy-to, which cluster answered, what a
    dropped cluster leaves, how many replicas a managed cluster runs) each catch a planted
    bug."""
    assert set(CHECK_MUTANTS) <= set(mutant_names(detectable=True))
    assert set(CHECK_MUTANTS.values()) == {
        "compaction_within_policy",
        "restore_keeps_promised_history",
        "compaction_progresses",
        "hydration_matches_trace",
        "holds_have_owners",
        "no_pending_peeks",
        "subscribes_finish",
        "subscribes_complete",
        "copy_to_matches_reference",
        "replicas_agree",
        "peeks_answered_in_their_cluster",
        "drops_clean_up",
        "managed_replicas_match",
    }
