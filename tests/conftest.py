"""Session-wide settings and hooks: hypothesis without wall-clock deadlines (these machines
are shared and noisy), the reliability totals printed by the process that reports (under
xdist the controller never loads ``tests/reliability/conftest.py``), and ``--race-repeat``."""

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

settings.register_profile("relayflow", deadline=None)
settings.load_profile("relayflow")

# The reliability helpers import each other by module name, as pytest's rootdir-relative
# import mode lets test folders do; the hooks must see the very same tally module.
sys.path.insert(0, str(Path(__file__).parent / "reliability"))

from reliability_summary import (  # noqa: E402 - after the sys.path entry it needs
    pytest_sessionfinish,
    pytest_terminal_summary,
    pytest_testnodedown,
)

from tests.race_runs import RaceRuns, add_race_option  # noqa: E402

__all__ = ["pytest_sessionfinish", "pytest_terminal_summary", "pytest_testnodedown"]


def pytest_addoption(parser: pytest.Parser) -> None:
    add_race_option(parser)
    parser.addoption(
        "--reliability-totals",
        metavar="PATH",
        help="write the reliability totals of this session to PATH (JSON), for the README",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(RaceRuns(config), "relayflow-race-runs")


@pytest.fixture(autouse=True)
def _settings_read_afresh() -> Iterator[None]:
    """Each test reads the process settings from its own environment, never from a copy
    cached while an earlier test had changed it."""
    from relayflow.config import current_settings

    current_settings.cache_clear()
    yield
    current_settings.cache_clear()


@pytest.fixture
def clean_registry() -> Iterator[None]:
    """Each test registers its own workflows; the ones other modules registered when they
    were imported come back after (tests of those modules may run next in this process)."""
    from relayflow.sdk import registry

    saved = dict(registry._REGISTRY)
    registry.reset_registry()
    yield
    registry.reset_registry()
    registry._REGISTRY.update(saved)
