"""Runs the step host in the same process, called with the request in wire form exactly as a
Lambda or HTTP host would be."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from relayflow.errors import DriveAbandoned, HostCrashSignal
from relayflow.ports import Clock, offered_checkpoints
from relayflow.protocol import VERSION_UNAVAILABLE


class StepHandler(Protocol):
    """A step host entry point: ``relayflow.worker.handle_step_request`` (or its in-process
    form ``answer_step_request``, whose 200 carries the StepResponse itself)."""

    def __call__(
        self,
        raw: dict[str, Any],
        *,
        services: Mapping[str, object] | None = ...,
        now_ms: Callable[[], int] | None = ...,
    ) -> tuple[int, Any]: ...


class PinnedVersionReach(Protocol):
    """Reaches the code a run is pinned to when it is not this process's (in AWS Lambda:
    :class:`~relayflow.dispatch.lambda_dispatcher.PinnedFunctionHandOff`)."""

    def reach(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
        """That code's answer to ``request`` in wire form; None when it cannot be reached."""
        ...


class InlineDispatcher:
    """Calls the step host in process.

    ``dispatch`` answers in wire form, as a remote host would. The engine calls
    ``dispatch_in_process``, which hands a 200's StepResponse over as it is (with a custom
    ``handler``, both answer what the handler returns).

    When the host here answers ``version_unavailable`` (the run is pinned to another build),
    ``pinned`` may reach that build elsewhere: its answer is the dispatcher's.

    A ``HostCrashSignal`` raised by the host (``relayflow.testing.crash()``) is a process
    death: it becomes :class:`~relayflow.ports.DriveAbandoned` and nothing is saved.

    The step host writes its per-step checkpoints into the log of the engine that dispatches
    (:func:`~relayflow.ports.offering_checkpoints`), whatever ``handler_options`` say: an
    in-process host is never durable per invocation only because of how it was built.

    Args:
        services: What ``ctx.services`` resolves in workflow bodies.
        clock: The host's clock (the virtual clock in tests).
        handler: The step host entry point (``relayflow.worker.handle_step_request``); a
            custom one is called with ``handler_options`` only.
        handler_options: Extra keyword arguments passed to the handler on every call.
        pinned: Reaches the code version a run is pinned to when it is not this process's.
    """

    def __init__(
        self,
        *,
        services: Mapping[str, object] | None = None,
        clock: Clock | None = None,
        handler: StepHandler | None = None,
        handler_options: Mapping[str, Any] | None = None,
        pinned: PinnedVersionReach | None = None,
    ) -> None:
        self.services = dict(services or {})
        self.clock = clock
        self._handler = handler
        self._options = dict(handler_options or {})
        self._pinned = pinned

    def hosts_workflow(self, workflow_id: str) -> bool | None:
        """Whether this process registered ``workflow_id`` (None with a custom handler)."""
        if self._handler is not None:
            return None
        from relayflow.sdk.registry import find_workflow

        return find_workflow(workflow_id) is not None

    def dispatch(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """Invoke the host with ``request``; returns (HTTP status, body in wire form)."""
        # Imported when first used: the step host is a layer above the orchestrator.
        from relayflow.worker import handle_step_request

        answer: tuple[int, dict[str, Any]] = self._call(
            self._handler or handle_step_request, request
        )
        return answer

    def dispatch_in_process(self, request: dict[str, Any]) -> tuple[int, Any]:
        """Invoke the host with ``request``; a 200's body is the StepResponse itself."""
        from relayflow.worker.handler import answer_step_request

        return self._call(self._handler or answer_step_request, request)

    def _call(self, handler: StepHandler, request: dict[str, Any]) -> tuple[int, Any]:
        now_ms = self.clock.now_ms if self.clock is not None else None
        options = self._options
        engine_log = offered_checkpoints()
        if self._handler is None and engine_log is not None:
            options = {**options, "checkpoints": engine_log}
        try:
            answer = handler(request, services=self.services, now_ms=now_ms, **options)
        except HostCrashSignal as exc:
            raise DriveAbandoned("the step host died during the invocation") from exc
        if self._pinned is not None and _refused_version(answer):
            return self._pinned.reach(request) or answer
        return answer


def _refused_version(answer: tuple[int, Any]) -> bool:
    status, body = answer
    return status == 409 and isinstance(body, dict) and body.get("error") == VERSION_UNAVAILABLE
