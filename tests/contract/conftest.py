"""The driver contract suite runs once per driver; each driver is one factory below.

A factory builds a fresh harness (see ``relayflow.testing.DriverHarness``) hosting the given
workflows with the given services. Adding a backend is one entry in ``DRIVER_FACTORIES``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from relayflow.testing import DriverHarness, WorkflowTestEnv
from tests.aws.moto_driver import moto_driver
from tests.moto_support import moto_backend, use_fake_credentials


def memory_driver(
    *,
    workflows: list[Any],
    services: Mapping[str, object] | None = None,
    step_mocks: Mapping[str, Any] | None = None,
) -> DriverHarness:
    """The in-memory driver with a virtual clock."""
    return WorkflowTestEnv(workflows=workflows, services=services, step_mocks=step_mocks)


DRIVER_FACTORIES: dict[str, Callable[..., DriverHarness]] = {
    "memory": memory_driver,
    "aws-moto": moto_driver,
}
#: Drivers that need moto running (and fake credentials) while the test runs.
ON_MOTO = {"aws-moto"}


#: Durability modes every contract test runs in: per-step checkpoints (the default) and
#: invocation-level batching (the engine offers hosts no checkpoint log, as with a
#: reference TypeScript host or ``checkpoint="batched"``).
MODES = ("per-step", "batched")


def _in_mode(factory: Callable[..., DriverHarness], mode: str) -> Callable[..., DriverHarness]:
    if mode == "per-step":
        return factory

    def batched(**options: Any) -> DriverHarness:
        harness = factory(**options)
        harness.engine.checkpoints = None  # type: ignore[attr-defined]
        return harness

    return batched


def _combinations() -> list[tuple[str, str]]:
    """Every driver per step; batched in memory, and on moto too with
    ``RELAYFLOW_CONTRACT_MODES=all`` (it doubles the suite's slowest half)."""
    both = os.environ.get("RELAYFLOW_CONTRACT_MODES") == "all"
    return [
        (driver, mode)
        for driver in sorted(DRIVER_FACTORIES)
        for mode in MODES
        if mode == "per-step" or both or driver not in ON_MOTO
    ]


@pytest.fixture(params=_combinations(), ids=str)
def make_env(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., DriverHarness]]:
    """Builds a harness of the parametrised driver and durability mode:
    ``make_env(workflows=[...], services=...)``."""
    driver, mode = request.param
    factory = _in_mode(DRIVER_FACTORIES[driver], mode)
    if driver not in ON_MOTO:
        yield factory
        return
    use_fake_credentials(monkeypatch)
    with moto_backend():
        yield factory
