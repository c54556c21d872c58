"""``SyncWorkflowContext``: the ``ctx`` of a plain ``def`` body (methods return values)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from relayflow.flow.declarations import RateLimit
from relayflow.sdk import tokens, waits
from relayflow.sdk.batch import BatchResult, CompletionPolicy, batch_op
from relayflow.sdk.context_base import SyncStreamWriter, SyncTokenHandle, _BaseContext
from relayflow.sdk.durations import Duration
from relayflow.sdk.groups import group_op
from relayflow.sdk.registry import Workflow
from relayflow.sdk.retry import RetryPolicy
from relayflow.sdk.runner import SyncRunner
from relayflow.sdk.scope import ContextCore
from relayflow.sdk.serdes import Serdes
from relayflow.sdk.steps import Semantics, run_step
from relayflow.sdk.waits import OnTimeout


class SyncWorkflowContext(_BaseContext):
    """The ``ctx`` of a plain ``def`` body: the same operations, returning values.

    Branches of ``parallel``/``map`` run one after another in input order.
    """

    def __init__(self, core: ContextCore, runner: SyncRunner) -> None:
        super().__init__(core)
        self._runner = runner
        self.stream = SyncStreamWriter(core, runner)

    def step(
        self,
        id: str,
        fn: Callable[..., Any],
        *args: Any,
        retry: RetryPolicy | None = None,
        timeout: Duration | None = None,
        compensate: Callable[..., Any] | None = None,
        idempotency_key: str | None = None,
        serdes: Serdes | None = None,
        semantics: Semantics = "at_least_once",
        rate_limit: RateLimit | None = None,
    ) -> Any:
        """Run ``fn(*args)`` once for the run (see :meth:`WorkflowContext.step`)."""
        opts = self._step_options(
            retry, timeout, compensate, idempotency_key, serdes, semantics, rate_limit
        )
        return self._runner.drive(run_step(self._core, id, fn, args, opts))

    def sleep(self, duration: Duration) -> None:
        """Suspend for ``duration`` (see :meth:`WorkflowContext.sleep`)."""
        waits.sleep(self._core, duration)

    def sleep_until(self, when: datetime | int) -> None:
        """Suspend until ``when`` (see :meth:`WorkflowContext.sleep_until`)."""
        waits.sleep_until(self._core, when)

    def wait_for_event(
        self,
        event_type: str,
        *,
        match: Any = None,
        timeout: Duration | None = None,
        on_timeout: OnTimeout = "null",
        lookback: Duration | None = None,
        name: str | None = None,
    ) -> Any:
        """Wait for an event (see :meth:`WorkflowContext.wait_for_event`)."""
        return waits.wait_for_message(
            self._core,
            "EVENT",
            event_type,
            match=match,
            timeout=timeout,
            on_timeout=on_timeout,
            lookback=lookback,
            name=name,
        )

    def wait_for_signal(
        self,
        name: str,
        *,
        match: Any = None,
        timeout: Duration | None = None,
        on_timeout: OnTimeout = "null",
        lookback: Duration | None = None,
    ) -> Any:
        """Wait for a signal (see :meth:`WorkflowContext.wait_for_signal`)."""
        return waits.wait_for_message(
            self._core,
            "SIGNAL",
            name,
            match=match,
            timeout=timeout,
            on_timeout=on_timeout,
            lookback=lookback,
            name=None,
        )

    def wait_for_token(
        self,
        *,
        name: str | None = None,
        token_id: str | None = None,
        timeout: Duration | None = None,
        heartbeat_timeout: Duration | None = None,
        on_timeout: OnTimeout = "raise",
        serdes: Serdes | None = None,
    ) -> SyncTokenHandle:
        """Create a token (see :meth:`WorkflowContext.wait_for_token`)."""
        spec = tokens.create_token(
            self._core,
            token_id=token_id,
            name=name,
            timeout=timeout,
            heartbeat_timeout=heartbeat_timeout,
            on_timeout=on_timeout,
            serdes=serdes,
        )
        return SyncTokenHandle(self._core, spec)

    def wait_for_callback(
        self,
        submit: Callable[[str], Any],
        *,
        name: str | None = None,
        timeout: Duration | None = None,
        heartbeat_timeout: Duration | None = None,
        retry: RetryPolicy | None = None,
        serdes: Serdes | None = None,
    ) -> Any:
        """Token, submit step, wait (see :meth:`WorkflowContext.wait_for_callback`)."""
        op = tokens.callback_op(
            self._core,
            submit,
            name=name,
            timeout=timeout,
            heartbeat_timeout=heartbeat_timeout,
            retry=retry,
            serdes=serdes,
        )
        return self._runner.drive(op)

    def wait_for_condition(
        self,
        check: Callable[[Any], Any],
        initial_state: Any,
        *,
        delay: Duration = 1_000,
        max_attempts: int | None = None,
        backoff_rate: float = 1.0,
        name: str | None = None,
        serdes: Serdes | None = None,
    ) -> Any:
        """Poll a condition (see :meth:`WorkflowContext.wait_for_condition`)."""
        op = tokens.condition_op(
            self._core,
            check,
            initial_state,
            delay=delay,
            max_attempts=max_attempts,
            backoff_rate=backoff_rate,
            name=name,
            serdes=serdes,
        )
        return self._runner.drive(op)

    def invoke(
        self,
        workflow: Workflow[Any] | str,
        input: Any = None,
        *,
        detach: bool = False,
        idempotency_key: str | None = None,
        serdes: Serdes | None = None,
        tags: Sequence[str] = (),
        lock_to_version: str | None = None,
    ) -> Any:
        """Start a child run (see :meth:`WorkflowContext.invoke`)."""
        return waits.invoke(
            self._core,
            workflow,
            input,
            detach=detach,
            idempotency_key=idempotency_key,
            serdes=serdes,
            tags=tuple(tags),
            lock_to_version=lock_to_version,
        )

    def parallel(
        self,
        branches: Sequence[Callable[..., Any]],
        *,
        max_concurrency: int | None = None,
        completion: CompletionPolicy | None = None,
        names: Sequence[str] | None = None,
        serdes: Serdes | None = None,
        result_serdes: Serdes | None = None,
    ) -> BatchResult[Any]:
        """Run each ``branch(child_ctx)`` (see :meth:`WorkflowContext.parallel`)."""
        specs = self._parallel_specs(branches, names)
        op = batch_op(
            self._core,
            "p",
            specs,
            max_concurrency=max_concurrency,
            completion=completion,
            serdes=serdes,
            result_serdes=result_serdes,
        )
        return self._runner.drive(op)

    def map(
        self,
        items: Iterable[Any],
        fn: Callable[..., Any],
        *,
        max_concurrency: int | None = None,
        completion: CompletionPolicy | None = None,
        item_name: Callable[[Any, int], str] | None = None,
        serdes: Serdes | None = None,
        result_serdes: Serdes | None = None,
    ) -> BatchResult[Any]:
        """Run ``fn(child_ctx, item, index)`` per item (see :meth:`WorkflowContext.map`)."""
        specs = self._map_specs(items, fn, item_name)
        op = batch_op(
            self._core,
            "m",
            specs,
            max_concurrency=max_concurrency,
            completion=completion,
            serdes=serdes,
            result_serdes=result_serdes,
        )
        return self._runner.drive(op)

    def group(self, name: str, fn: Callable[..., Any], *, serdes: Serdes | None = None) -> Any:
        """Run ``fn(child_ctx)`` once as a scope (see :meth:`WorkflowContext.group`)."""
        return self._runner.drive(group_op(self._core, name, fn, serdes))
