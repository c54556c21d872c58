"""Read-only facts a body sees through ``ctx``: the run, the workflow, the environment, services."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from relayflow.errors import ServiceNotFoundError


@dataclass(frozen=True)
class RunInfo:
    """``ctx.run``: the run being replayed.

    Attributes:
        id: The run id.
        number: The run number.
        attempt: The run attempt.
        triggered_by: What started the run (``{"kind": "api" | "schedule" | "event" | ...}``).
        tags: The run's tags.
        started_at: When the run started (UTC).
        invocation_count: This invocation's number (1-based).
    """

    id: str
    number: int
    attempt: int
    triggered_by: dict[str, Any]
    tags: tuple[str, ...]
    started_at: datetime
    invocation_count: int


@dataclass(frozen=True)
class WorkflowInfo:
    """``ctx.workflow``: the workflow id and the deployed version."""

    id: str
    version: str


@dataclass(frozen=True)
class EnvironmentInfo:
    """``ctx.environment``: ``production``, ``preview`` or ``development``."""

    name: str


class Services:
    """``ctx.services``: the host's services, looked up by name."""

    def __init__(self, services: Mapping[str, object]) -> None:
        self._services = services

    def resolve(self, name: str) -> Any:
        """The service registered as ``name``.

        Raises:
            ServiceNotFoundError: No service has that name.
        """
        if name not in self._services:
            raise ServiceNotFoundError(f"service {name!r} is not registered on this host")
        return self._services[name]

    def has(self, name: str) -> bool:
        """Whether a service named ``name`` is registered."""
        return name in self._services
