"""The mutation benchmark's harness (``bench/mutation.py``): how it classifies a campaign's
end, scores and reports, and that it runs mutants in private copies of the tree.

The harness's own logic is exercised on a toy package with a toy check in a temporary
folder (cosmic-ray generates the toy's mutants for real); one small run over the
product's own code checks the whole path: coverage, baseline, a mutant, the report.
"""

from __future__ import annotations

import importlib.util
import json
import signal
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_mutation", ROOT / "bench" / "mutation.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_mutation"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


mb = _load()


def test_classify_a_campaigns_end() -> None:
    def c(code: int, out: str = "", err: str = "", **kw: object) -> tuple[str, str]:
        args = {"wall_expired": False, "cpu_s": 3.0, "budget_s": 60.0, **kw}
        return mb.classify(code, out, err, **args)  # type: ignore[no-any-return]

    assert c(0, "passed     6\nfailed     0\n") == (mb.SURVIVED, "all seeds passed")
    failed = "passed     0\nfailed     1\n\nfailing seeds (...):\n  seed 1: peek_correct ..."
    assert c(1, failed) == (mb.KILLED, "violation")
    assert c(1, "passed     6\nfailed     0\n") == (mb.KILLED, "crash (exit 1)")
    crash = "Traceback (most recent call last):\n  ...\nImportError: boom"
    assert c(1, "", crash) == (mb.KILLED, "crash (exit 1)")
    assert c(2, "", "usage") == (mb.KILLED, "crash (exit 2)")
    assert c(-signal.SIGSEGV) == (mb.KILLED, f"crash (exit {-signal.SIGSEGV})")
    assert c(-signal.SIGXCPU, cpu_s=59.1) == (mb.TIMEOUT, "cpu budget")
    assert c(-signal.SIGKILL, cpu_s=61.2) == (mb.TIMEOUT, "cpu budget")
    # killed by something else before the budget: a crash, not a timeout
    assert c(-signal.SIGKILL, cpu_s=5.0) == (mb.KILLED, f"crash (exit {-signal.SIGKILL})")
    assert c(-signal.SIGKILL, wall_expired=True) == (mb.TIMEOUT, "wall limit")
    # a violation found before the wall limit fired still counts as found
    assert c(0, "PASS", wall_expired=True) == (mb.TIMEOUT, "wall limit")


def _outcome(path: str, line: int, status: str, diff: list[str] | None = None) -> object:
    m = mb.Mutant(f"{path}{line}{status}", path, "core/ReplaceComparisonOperator_Lt_Gt", 0, line)
    return mb.Outcome(m, status, "x", 1.0, 1.0, diff=diff or [])


def test_scores_per_package_and_the_survivors_listed() -> None:
    outcomes = [
        _outcome("spec/compute/a.py", 3, mb.KILLED),
        _outcome("spec/compute/b.py", 4, mb.KILLED),
        _outcome("spec/compute/b.py", 9, mb.SURVIVED, ["-if x < y:", "+if x > y:"]),
        _outcome("spec/compute/b.py", 12, mb.TIMEOUT),
        _outcome("runtime/oracle.py", 7, mb.SURVIVED, ["-a", "+b"]),
    ]
    rows = {
        r.package: r
        for r in mb.scores(outcomes, {"spec.compute": 40, "runtime": 10}, {"spec.compute": 5})
    }
    sc = rows["spec.compute"]
    assert (sc.killed, sc.survived, sc.timeout, sc.total) == (2, 1, 1, 4)
    assert (sc.score, sc.score_with_timeouts) == (0.5, 0.75)
    assert (sc.generated, sc.unreached) == (40, 5)
    assert rows["runtime"].score == 0.0
    assert (rows["all"].total, rows["all"].killed, rows["all"].generated) == (5, 2, 50)
    text = mb.render(list(rows.values()), outcomes)
    assert "surviving mutants (2;" in text
    assert "spec/compute/b.py:9" in text and "+if x > y:" in text
    assert "runtime/oracle.py:7" in text
    assert "spec/compute/a.py:3" not in text  # killed ones are not listed
    assert "timeouts (1):" in text and "spec/compute/b.py:12" in text
    doc = mb.to_json(list(rows.values()), outcomes, {"command": ["x"]})
    assert json.loads(json.dumps(doc))["mutants"][2]["status"] == mb.SURVIVED


def test_package_of_a_module() -> None:
    assert mb.Mutant("j", "spec/compute/x.py", "o", 0, 1).package == "spec.compute"
    assert mb.Mutant("j", "runtime/oracle.py", "o", 0, 1).package == "runtime"


def test_changed_lines_of_a_mutation() -> None:
    assert mb.changed_lines("a = 1\nb = x < y\n", "a = 1\nb = x > y\n") == [
        "-b = x < y",
        "+b = x > y",
    ]


def test_sample_is_deterministic_and_per_package() -> None:
    ms = [mb.Mutant(str(i), f"spec/p{i % 2}/m.py", "o", i, i) for i in range(20)]
    a = mb.sample(ms, 3, seed=1)
    assert a == mb.sample(list(reversed(ms)), 3, seed=1) or a == mb.sample(ms, 3, seed=1)
    assert sorted(a) == ["spec.p0", "spec.p1"] and all(len(v) == 3 for v in a.values())
    assert {len(v) for v in mb.sample(ms, None, seed=1).values()} == {10}


def test_mutants_in_annotations_never_evaluated_are_left_out(tmp_path: Path) -> None:
    body = "def f(x: int | None, y: int = 1) -> int | None:\n    return x | y\n"
    (tmp_path / "lazy.py").write_text("from __future__ import annotations\n\n" + body)
    (tmp_path / "eager.py").write_text(body)
    lazy = mb.generate(tmp_path, ["lazy.py"], tmp_path / "a.sqlite")
    kept = mb.drop_annotations(tmp_path, lazy)
    # only the body's `|` (line 4) and the default's number (line 3) stay
    assert lazy and {(m.line, m.column) for m in kept} == {(4, 13), (3, 30)}
    eager = mb.generate(tmp_path, ["eager.py"], tmp_path / "b.sqlite")
    assert mb.drop_annotations(tmp_path, eager) == eager  # evaluated at def time: kept


_TOY = """\
def add(a, b):
    return a + b


def unchecked(x):
    return x * 3
"""

# The toy's "campaign": like tidegate sim campaign, it exits 1 and prints the failed
# count and the failing seed when add is wrong; it never looks at unchecked.
_CHECK = (
    "import sys, toy.calc as c\n"
    "bad = c.add(2, 3) != 5\n"
    "print(f'passed     {int(not bad)}')\n"
    "print(f'failed     {int(bad)}')\n"
    "if bad: print('failing seeds:\\n  seed 1: add_correct: 2 + 3 != 5')\n"
    "sys.exit(1 if bad else 0)\n"
)


@pytest.mark.processes
def test_toy_mutants_killed_and_survived_in_private_trees(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / "toy").mkdir(parents=True)
    (root / "toy" / "__init__.py").write_text("")
    (root / "toy" / "calc.py").write_text(_TOY)
    session = tmp_path / "session.sqlite"
    mutants = mb.generate(root, ["toy/calc.py"], session)
    ops = {(m.line, m.operator) for m in mutants}
    assert (2, "core/ReplaceBinaryOperator_Add_Sub") in ops
    assert (6, "core/ReplaceBinaryOperator_Mul_Add") in ops
    chosen = [
        m
        for m in mutants
        if m.operator
        in ("core/ReplaceBinaryOperator_Add_Sub", "core/ReplaceBinaryOperator_Mul_Add")
    ]
    trees = mb.Trees(root, {"toy": "toy"}, 2, tmp_path / "trees")
    outcomes = mb.run_mutants(
        chosen,
        trees,
        [sys.executable, "-c", _CHECK],
        budget_s=20,
        wall_factor=10,
        jobs=2,
    )
    by_line = {o.mutant.line: o for o in outcomes}
    assert (by_line[2].status, by_line[2].how) == (mb.KILLED, "violation")
    assert by_line[2].diff == ["-return a + b", "+return a - b"]
    assert by_line[2].evidence.startswith("seed 1: add_correct: 2 + 3 != 5")
    assert (by_line[6].status, by_line[6].how) == (mb.SURVIVED, "all seeds passed")
    # the repository's file is never written; each tree is restored after its mutant
    assert (root / "toy" / "calc.py").read_text() == _TOY
    assert all((t / "toy" / "calc.py").read_text() == _TOY for t in trees.dirs)
    mb.record(session, outcomes)
    from cosmic_ray.work_db import WorkDB, use_db

    with use_db(str(session), WorkDB.Mode.open) as db:
        assert db.num_results == 2
        assert db.num_work_items == len(mutants)


@pytest.mark.processes
def test_a_run_past_its_cpu_budget_is_a_timeout(tmp_path: Path) -> None:
    r = mb.run_bounded(
        [sys.executable, "-c", "while True: pass"],
        cwd=tmp_path,
        env={},
        cpu_budget_s=1,
        wall_limit_s=120,
    )
    status = mb.classify(
        r.exit_code, r.stdout, r.stderr, wall_expired=r.wall_expired, cpu_s=r.cpu_s, budget_s=1
    )
    assert status == (mb.TIMEOUT, "cpu budget")
    assert r.cpu_s >= 0.5


@pytest.mark.processes
@pytest.mark.slow
def test_a_small_real_run_over_the_product(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report.json"
    code = mb.main(
        [
            "--packages",
            "spec/frontier/antichain.py",
            "--per-package",
            "1",
            "--seeds",
            "1..1",
            "--jobs",
            "1",
            "--budget",
            "60",
            "--out",
            str(out),
            "--session",
            str(tmp_path / "session.sqlite"),
        ]
    )
    assert code == 0, capsys.readouterr()
    doc = json.loads(out.read_text())
    [pkg, total] = doc["packages"]
    assert pkg["package"] == "spec.frontier" and pkg["total"] == 1 and total["package"] == "all"
    [mutant] = doc["mutants"]
    assert mutant["status"] in (mb.KILLED, mb.SURVIVED, mb.TIMEOUT)
    assert mutant["diff"] and mutant["path"] == "spec/frontier/antichain.py"
    assert "baseline (unmutated): all seeds passed" in capsys.readouterr().out
    assert not _dirty(ROOT)


def _dirty(root: Path) -> bool:
    import subprocess

    done = subprocess.run(
        ["git", "status", "--porcelain", "--", "spec", "runtime", "sim", "replica", "tidegate"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    )
    return bool(done.stdout.strip())
