"""The README's reliability figures are the totals a recorded run wrote (see
``tests/reliability/reliability_figures.py``), never typed by hand."""

from __future__ import annotations

from pathlib import Path

import pytest
import reliability_figures as figures
import reliability_tally


def test_the_readme_shows_the_recorded_totals_of_each_sweep() -> None:
    recorded = figures.recorded_totals()
    assert "default" in recorded, "make suite records tests/reliability/figures/default.json"
    readme = figures.README.read_text(encoding="utf-8")
    for sweep, totals in recorded.items():
        assert figures.current_block(readme, sweep) == figures.render(sweep, totals), (
            f"README {sweep} figures differ from the recorded run: make reliability-figures"
        )


def test_the_recorded_totals_say_nothing_was_lost() -> None:
    for sweep, totals in figures.recorded_totals().items():
        assert set(totals) == set(reliability_tally.LABELS), sweep
        lost = {name: totals[name] for name in totals if name.startswith("runs_lost")}
        assert set(lost.values()) == {0}, f"{sweep}: {lost}"
        assert totals["double_executions"] == totals["server_errors"] == 0, sweep
        assert totals["runs_failed_transient"] == 0, sweep


def test_a_readme_that_differs_from_the_run_fails_the_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded = figures.recorded_totals()["default"]
    other = tmp_path / "default.json"
    figures.write_totals(
        other, {**recorded, "crash_points": recorded["crash_points"] + 1}, full=False
    )
    readme = tmp_path / "README.md"
    readme.write_text(figures.README.read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setattr(figures, "README", readme)

    assert figures.main(["check", str(other)]) == 1
    assert figures.main(["write", str(other)]) == 0
    assert figures.main(["check", str(other)]) == 0
    rewritten = figures.current_block(readme.read_text(encoding="utf-8"), "default")
    assert f"| {recorded['crash_points'] + 1:,} |" in rewritten
