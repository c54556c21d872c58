"""The driver contract suite runs once per driver; each driver is one factory below.

A factory builds a fresh harness (see ``relayflow.testing.DriverHarness``) hosting the given
workflows with the given services. Adding a backend is one entry in ``DRIVER_FACTORIES``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest

from relayflow.testing import DriverHarness, WorkflowTestEnv


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
}


@pytest.fixture(params=sorted(DRIVER_FACTORIES))
def make_env(request: pytest.FixtureRequest) -> Callable[..., DriverHarness]:
    """Builds a harness of the parametrised driver: ``make_env(workflows=[...], services=...)``."""
    return DRIVER_FACTORIES[request.param]
