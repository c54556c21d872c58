"""What the driver contract suite needs from an environment, whatever its backend."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from relayflow.admin import WorkflowAdmin
from relayflow.core.views import RunDetail
from relayflow.drivers import DeliveryResult, WorkflowDriver


class DriverHarness(Protocol):
    """A driver plus control of its time, as :class:`~relayflow.testing.WorkflowTestEnv`
    gives for memory; other backends (AWS on moto) provide the same surface."""

    driver: WorkflowDriver
    admin: WorkflowAdmin

    def now(self) -> int: ...

    def advance(self, duration: int | str) -> None: ...

    def run_until_idle(self) -> None: ...

    def trigger(self, workflow: Any, input: Any = None, **options: Any) -> RunDetail: ...

    def get_run(self, run_id: str, *, values: bool = False) -> RunDetail: ...

    def send_event(
        self, run_id: str, event_type: str, payload: Any = None, **options: Any
    ) -> DeliveryResult: ...

    def signal(self, run_id: str, name: str, payload: Any = None) -> DeliveryResult: ...

    def complete_token(
        self, token_id: str, payload: Any = None, *, run_id: str | None = None
    ) -> DeliveryResult: ...

    def fail_token(
        self, token_id: str, error: Any, *, run_id: str | None = None
    ) -> DeliveryResult: ...

    def heartbeat_token(self, token_id: str, *, run_id: str | None = None) -> DeliveryResult: ...

    def cancel(
        self, run_id: str, reason: str | None = None, compensate: bool = False
    ) -> RunDetail: ...

    def recover(self, run_id: str) -> RunDetail: ...

    def fire_alarm(self, run_id: str, wake_at: int | None = None) -> None: ...

    def armed_alarm(self, run_id: str) -> int | None: ...


class HarnessFactory(Protocol):
    """Builds a fresh harness hosting ``workflows`` with ``services``."""

    def __call__(
        self,
        *,
        workflows: list[Any],
        services: Mapping[str, object] | None = None,
        step_mocks: Mapping[str, Any] | None = None,
    ) -> DriverHarness: ...
