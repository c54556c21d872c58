"""Race tests run often enough to mean something: ``--race-repeat N`` runs every test marked
``race`` N times (``make test-races``), and the session ends with how many of those runs failed.

A single pass of a race proves little: an interleaving that loses a write may come up once in
ten runs. ``make test`` keeps one pass; the repeat is for the dedicated target.
"""

from __future__ import annotations

from typing import Any

import pytest

OPTION = "--race-repeat"


def add_race_option(parser: pytest.Parser) -> None:
    """The ``--race-repeat`` option (1 by default: one pass, as ``make test`` runs)."""
    parser.addoption(
        OPTION,
        type=int,
        default=1,
        metavar="N",
        help="run every test marked 'race' N times and report how many runs failed",
    )


class RaceRuns:
    """Repeats the race tests and prints their failure count at the end of the session."""

    def __init__(self, config: pytest.Config) -> None:
        self.repeat = int(config.getoption(OPTION))
        if self.repeat < 1:
            raise pytest.UsageError(f"{OPTION} must be at least 1, got {self.repeat}")

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if self.repeat > 1 and metafunc.definition.get_closest_marker("race") is not None:
            metafunc.fixturenames.append("race_round")
            metafunc.parametrize("race_round", range(1, self.repeat + 1), ids=lambda n: f"round{n}")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        runs: set[str] = set()
        failed: set[str] = set()
        for outcome in ("passed", "failed", "error"):
            for report in terminalreporter.stats.get(outcome, []):
                if "race" in getattr(report, "keywords", {}):
                    runs.add(report.nodeid)
                    if outcome != "passed":
                        failed.add(report.nodeid)
        if not runs:
            return
        terminalreporter.write_sep("=", "races")
        terminalreporter.write_line(
            f"race test runs: {len(runs)} ({self.repeat} per test), failed: {len(failed)}"
        )
