"""Where the orchestrator learns a workflow's ``concurrency``: from the workflows registered
in its own process, else from the environment's current manifest.

The manifest is what lets the API function limit workflows whose code it does not load (a
worker function's, an HTTP host's, a reference TypeScript host's). It is read at most once
per environment every ``ttl_ms``, so triggers do not each pay a manifest read; a newly
registered limit is in force everywhere within that time.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from relayflow.flow.declarations import Concurrency
from relayflow.flow.errors import FlowControlError
from relayflow.ports import Clock

_log = logging.getLogger("relayflow.flow")

#: How long one read of an environment's manifest answers for it.
MANIFEST_TTL_MS = 5_000


class CurrentManifests(Protocol):
    """The part of a manifest store this needs."""

    def get_current(self, environment: str) -> dict[str, Any] | None: ...


def manifest_concurrency(manifest: Mapping[str, Any] | None) -> dict[str, Concurrency]:
    """The ``concurrency`` of each workflow a manifest declares one for (``{key?, limit,
    strategy}``, the reference's wire); an unreadable declaration limits nothing and is
    logged (registration refuses them, so only an old manifest can carry one)."""
    found: dict[str, Concurrency] = {}
    for entry in (manifest or {}).get("workflows", []):
        if not isinstance(entry, Mapping) or entry.get("concurrency") is None:
            continue
        try:
            found[str(entry.get("id"))] = Concurrency.from_wire(entry["concurrency"])
        except FlowControlError as exc:
            _log.warning("manifest workflow %r: concurrency ignored: %s", entry.get("id"), exc)
    return found


class DeclaredConcurrency:
    """``concurrency_of(workflow_id, environment)`` for the engine.

    Args:
        registered: The declaration of a workflow registered in this process (wins: it can
            carry a function key, which a manifest cannot).
        manifests: The environments' current manifests.
        clock: Times the cache.
        ttl_ms: How long one manifest read is used.
    """

    def __init__(
        self,
        registered: Callable[[str], Concurrency | None],
        manifests: CurrentManifests,
        clock: Clock,
        *,
        ttl_ms: int = MANIFEST_TTL_MS,
    ) -> None:
        self._registered = registered
        self._manifests = manifests
        self._clock = clock
        self._ttl_ms = ttl_ms
        self._lock = threading.Lock()
        self._cached: dict[str, tuple[int, dict[str, Concurrency]]] = {}

    def __call__(self, workflow_id: str, environment: str) -> Concurrency | None:
        own = self._registered(workflow_id)
        if own is not None:
            return own
        return self._of_environment(environment).get(workflow_id)

    def _of_environment(self, environment: str) -> dict[str, Concurrency]:
        now = self._clock.now_ms()
        with self._lock:
            cached = self._cached.get(environment)
        if cached is not None and cached[0] > now:
            return cached[1]
        declared = manifest_concurrency(self._manifests.get_current(environment))
        with self._lock:
            self._cached[environment] = (now + self._ttl_ms, declared)
        return declared
