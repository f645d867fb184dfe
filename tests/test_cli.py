"""The `tidegate` command: what `make run` runs must succeed and say what it did."""

from __future__ import annotations

import pytest

from tidegate.cli import main


def test_demo_runs_a_passing_simulation(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "not built yet" in out
    assert "PASS seed 1 (small)" in out


def test_unknown_commands_are_refused_with_usage(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit:
        main(["frobnicate"])
    assert exit.value.code == 2
    assert "invalid choice" in capsys.readouterr().err
