"""In-memory manifest store: manifests per environment with a ``current`` pointer and retention.

Implements the ``ManifestStore`` port with the semantics every store shares
(``relayflow.events.prepare_manifest`` and the retention helpers).
"""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass, field
from typing import Any

from relayflow.clock import SystemClock
from relayflow.events import (
    DEFAULT_KEEP,
    ManifestVersion,
    plan_retention,
    prepare_manifest,
    record_registration,
    validate_environment,
)
from relayflow.ports import Clock


@dataclass
class _Environment:
    current: str | None = None
    bodies: dict[str, dict[str, Any]] = field(default_factory=dict)
    history: list[ManifestVersion] = field(default_factory=list)


class InMemoryManifestStore:
    """Manifests per environment, thread-safe.

    Registration validates the manifest and fails closed (``ManifestValidationError``), makes
    it current, refreshes its registration time, and keeps only the newest ``keep`` versions
    (the current one is never pruned). Registering a version again is idempotent: same
    ``versionId``, the first stored body kept, the version current and newest again.

    Args:
        keep: Versions kept per environment (at least 1; default 3).
        clock: Registration times (the wall clock when omitted).
    """

    def __init__(self, *, keep: int = DEFAULT_KEEP, clock: Clock | None = None) -> None:
        plan_retention([], None, keep)  # validates keep
        self._keep = keep
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._envs: dict[str, _Environment] = {}
        self._lock = threading.Lock()

    def register(self, environment: str, manifest: dict[str, Any]) -> str:
        """Validate and store ``manifest`` as the environment's current one.

        Returns:
            The manifest's ``versionId`` (computed when absent).

        Raises:
            ValidationError: ``environment`` is not production, preview or development.
            ManifestValidationError: The manifest is refused (see ``prepare_manifest``).
        """
        validate_environment(environment)
        version_id, prepared = prepare_manifest(manifest)
        with self._lock:
            env = self._envs.setdefault(environment, _Environment())
            env.bodies.setdefault(version_id, prepared)
            env.current = version_id
            env.history = record_registration(env.history, version_id, self._clock.now_ms())
            plan = plan_retention(env.history, env.current, self._keep)
            for pruned in plan.pruned:
                env.bodies.pop(pruned, None)
            env.history = [v for v in env.history if v.version_id not in plan.pruned]
        return version_id

    def get_current(self, environment: str) -> dict[str, Any] | None:
        """A copy of the environment's current manifest, or None when none is registered."""
        with self._lock:
            env = self._envs.get(environment)
            if env is None or env.current is None:
                return None
            body = env.bodies.get(env.current)
        return copy.deepcopy(body) if body is not None else None

    def get_version(self, environment: str, version_id: str) -> dict[str, Any] | None:
        """A copy of a retained version of the environment's manifest, or None."""
        with self._lock:
            env = self._envs.get(environment)
            body = env.bodies.get(version_id) if env is not None else None
        return copy.deepcopy(body) if body is not None else None

    def versions(self, environment: str) -> list[str]:
        """The retained version ids of an environment, newest registration first."""
        with self._lock:
            env = self._envs.get(environment)
            if env is None:
                return []
            return list(plan_retention(env.history, env.current, max(1, len(env.history))).kept)
