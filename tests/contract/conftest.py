"""The driver contract suite runs once per driver; each driver is one factory below.

A factory builds a fresh harness (see ``relayflow.testing.DriverHarness``) hosting the given
workflows with the given services. Adding a backend is one entry in ``DRIVER_FACTORIES``.
"""

from __future__ import annotations

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


@pytest.fixture(params=sorted(DRIVER_FACTORIES))
def make_env(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., DriverHarness]]:
    """Builds a harness of the parametrised driver: ``make_env(workflows=[...], services=...)``."""
    if request.param not in ON_MOTO:
        yield DRIVER_FACTORIES[request.param]
        return
    use_fake_credentials(monkeypatch)
    with moto_backend():
        yield DRIVER_FACTORIES[request.param]
