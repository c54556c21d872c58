"""The Reliability page's figures (``docs/reliability.md``) are the totals a recorded run wrote (see
``tests/reliability/reliability_figures.py``), never typed by hand."""

from __future__ import annotations

from pathlib import Path

import pytest
import reliability_figures as figures
import reliability_tally


def test_the_page_shows_the_recorded_totals_of_each_sweep() -> None:
    recorded = figures.recorded_totals()
    assert "default" in recorded, "make suite records tests/reliability/figures/default.json"
    page = figures.PAGE.read_text(encoding="utf-8")
    for sweep, totals in recorded.items():
        assert figures.current_block(page, sweep) == figures.render(sweep, totals), (
            f"docs/reliability.md {sweep} figures differ from the recorded run: "
            "make reliability-figures"
        )


def test_the_recorded_totals_say_nothing_was_lost() -> None:
    for sweep, totals in figures.recorded_totals().items():
        assert set(totals) == set(reliability_tally.LABELS), sweep
        lost = {name: totals[name] for name in totals if name.startswith("runs_lost")}
        assert set(lost.values()) == {0}, f"{sweep}: {lost}"
        assert totals["double_executions"] == totals["server_errors"] == 0, sweep
        assert totals["runs_failed_transient"] == 0, sweep


def test_a_run_the_recorded_figures_no_longer_describe_fails_the_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded = figures.recorded_totals()["default"]
    page = tmp_path / "reliability.md"
    page.write_text(figures.PAGE.read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setattr(figures, "PAGE", page)
    monkeypatch.setattr(figures, "FIGURES_DIR", tmp_path / "figures")
    figures.write_totals(tmp_path / "figures" / "default.json", recorded, full=False)

    def check(**changes: int) -> int:
        measured = tmp_path / "run" / "default.json"
        figures.write_totals(measured, {**recorded, **changes}, full=False)
        return figures.main(["check", str(measured)])

    assert check() == 0
    assert check(runs_checked=recorded["runs_checked"] + 1) == 0  # one interleaving apart
    assert check(crash_points=recorded["crash_points"] + 10) == 1
    assert check(runs_lost=1) == 1

    assert check(crash_points=recorded["crash_points"] + 10) == 1
    assert figures.main(["write", str(tmp_path / "run" / "default.json")]) == 0  # records it
    assert check(crash_points=recorded["crash_points"] + 10) == 0
    rewritten = figures.current_block(page.read_text(encoding="utf-8"), "default")
    assert f"| {recorded['crash_points'] + 10:,} |" in rewritten
