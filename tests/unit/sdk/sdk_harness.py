"""A tiny stand-in for the orchestrator: drives the step host over hand-built journals."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from relayflow.protocol import StepRequest
from relayflow.sdk import registry
from relayflow.sdk.invocation import ExecutorOptions
from relayflow.worker import handle_step_request

Resolver = Callable[[dict[str, Any]], dict[str, Any] | None]

FAST = ExecutorOptions(in_process_retry_threshold_ms=20)


@pytest.fixture(autouse=True)
def clean_registry() -> Iterator[None]:
    """Each test registers its own workflows; other suites' registrations come back after."""
    saved = dict(registry._REGISTRY)
    registry.reset_registry()
    yield
    registry.reset_registry()
    registry._REGISTRY.update(saved)


@dataclass
class Clock:
    """A virtual clock in epoch ms that only moves when told to."""

    now: int = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


@dataclass
class Harness:
    """Runs one workflow run: call the host, apply its journal, resolve waits, call again."""

    workflow_id: str
    input: Any = None
    run_id: str = "run_abc"
    clock: Clock = field(default_factory=Clock)
    services: Mapping[str, object] | None = None
    options: ExecutorOptions = FAST
    journal: dict[str, Any] = field(default_factory=dict)
    invocation_count: int = 0
    started_at: int = 0
    bodies: list[dict[str, Any]] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    applied_metadata_ids: set[str] = field(default_factory=set)
    deadline_in: int | None = None

    def __post_init__(self) -> None:
        self.started_at = self.clock.now

    def request(self, **overrides: Any) -> dict[str, Any]:
        """The wire form of the next step request."""
        self.invocation_count += 1
        deadline = self.clock.now + self.deadline_in if self.deadline_in is not None else None
        fields: dict[str, Any] = {
            "run_id": self.run_id,
            "workflow_id": self.workflow_id,
            "invocation_count": self.invocation_count,
            "input": self.input,
            "journal": self.journal,
            "run_meta": {"startedAt": self.started_at, "tags": ["t1"]},
        }
        if deadline is not None:
            fields["deadline"] = deadline
        fields.update(overrides)
        return StepRequest.model_validate(fields).to_wire()

    def call(self, **overrides: Any) -> dict[str, Any]:
        """One invocation; the journal and metadata of a 200 answer are kept."""
        status, body = handle_step_request(
            self.request(**overrides),
            services=self.services,
            now_ms=self.clock,
            options=self.options,
        )
        assert status == 200, body
        self.bodies.append(body)
        self.journal = body["journal"]
        for update in body.get("metadataUpdates", []):
            self._apply_metadata(update)
        if body["status"] == "waiting":
            registered = self.journal.setdefault("waitpointsRegistered", {})
            for wait in body["waitpoints"]:
                registered.setdefault(
                    wait["clientWaitpointId"],
                    {"kind": wait["kind"], "registeredAt": self.clock.now},
                )
        return body

    def _apply_metadata(self, update: dict[str, Any]) -> None:
        if update.get("id") in self.applied_metadata_ids:
            return
        self.applied_metadata_ids.add(update["id"])
        key, value = update["key"], update.get("value")
        if update["op"] == "set":
            self.metadata[key] = value
        elif update["op"] == "increment":
            current = self.metadata.get(key)
            base = current if isinstance(current, int | float) else 0
            self.metadata[key] = base + (1 if value is None else value)
        elif update["op"] == "append":
            current = self.metadata.get(key)
            self.metadata[key] = [*(current if isinstance(current, list) else []), value]
        else:
            self.metadata.pop(key, None)

    def resolve(self, wait_id: str, kind: str, payload: Any = None, **extra: Any) -> None:
        """Write a resolution the way the orchestrator does."""
        resolved = self.journal.setdefault("waitpointsResolved", {})
        resolved[wait_id] = {
            "kind": kind,
            "resolvedAt": self.clock.now,
            "payload": payload,
            "source": extra.pop("source", "live"),
            **extra,
        }

    def wake_time(self, wait: dict[str, Any]) -> int:
        """When a DATETIME wait is due (facts fixed at first registration)."""
        meta = wait.get("meta", {})
        if "wakeAt" in meta:
            return int(meta["wakeAt"])
        first = self.journal["waitpointsRegistered"][wait["clientWaitpointId"]]["registeredAt"]
        return int(first + meta.get("durationMs", 0))

    def run(self, resolver: Resolver | None = None, *, max_invocations: int = 40) -> dict[str, Any]:
        """Call until the run ends or parks on a wait nobody resolves.

        DATETIME waits are resolved at their wake time (the clock jumps there); other waits
        are resolved by ``resolver(wait)`` returning a resolution dict (or None to park).
        """
        body: dict[str, Any] = {}
        for _ in range(max_invocations):
            body = self.call()
            if body["status"] != "waiting":
                return body
            progressed = False
            datetime_waits = [w for w in body["waitpoints"] if w["kind"] == "DATETIME"]
            for wait in body["waitpoints"]:
                if wait["kind"] == "DATETIME" or resolver is None:
                    continue
                resolution = resolver(wait)
                if resolution is not None:
                    self.resolve(wait["clientWaitpointId"], wait["kind"], **resolution)
                    progressed = True
            if not progressed and datetime_waits:
                first = min(datetime_waits, key=self.wake_time)
                self.clock.now = max(self.clock.now, self.wake_time(first))
                for wait in datetime_waits:
                    if self.wake_time(wait) <= self.clock.now:
                        self.resolve(wait["clientWaitpointId"], "DATETIME", source="replay")
                progressed = True
            if not progressed:
                return body
        raise AssertionError(f"run did not settle in {max_invocations} invocations: {body}")


def waits_of(body: dict[str, Any]) -> list[str]:
    """The wait ids of a waiting answer."""
    return [w["clientWaitpointId"] for w in body.get("waitpoints", [])]
