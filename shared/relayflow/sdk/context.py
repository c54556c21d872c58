"""``WorkflowContext``: the ``ctx`` an ``async def`` body receives (durable methods awaited).

A plain ``def`` body gets the synchronous twin, ``relayflow.sdk.sync_context``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from relayflow.flow.declarations import RateLimit
from relayflow.sdk import tokens, waits
from relayflow.sdk.batch import BatchResult, CompletionPolicy, batch_op
from relayflow.sdk.context_base import StreamWriter, TokenHandle, _BaseContext
from relayflow.sdk.durations import Duration
from relayflow.sdk.groups import group_op
from relayflow.sdk.registry import Workflow
from relayflow.sdk.retry import RetryPolicy
from relayflow.sdk.runner import AsyncRunner
from relayflow.sdk.scope import ContextCore
from relayflow.sdk.serdes import Serdes
from relayflow.sdk.steps import Semantics, run_step
from relayflow.sdk.waits import OnTimeout


class WorkflowContext(_BaseContext):
    """The ``ctx`` of an ``async def`` body: every durable operation is awaited.

    Attributes:
        run: :class:`~relayflow.sdk.info.RunInfo` (id, number, attempt, triggered_by, tags,
            started_at, invocation_count).
        workflow: :class:`~relayflow.sdk.info.WorkflowInfo` (id, version).
        environment: :class:`~relayflow.sdk.info.EnvironmentInfo` (name).
        services: ``resolve(name)`` / ``has(name)`` over the host's services.
        metadata: ``set``/``increment``/``append``/``remove`` run metadata.
        stream: ``await ctx.stream(id, source)`` (also ``.text``, ``.json``, ``.bytes``).
    """

    def __init__(self, core: ContextCore, runner: AsyncRunner) -> None:
        super().__init__(core)
        self._runner = runner
        self.stream = StreamWriter(core, runner)

    async def step(
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
        """Run ``fn(*args)`` once for the run; replays return the journalled result.

        Args:
            id: The step id, unique within this context.
            fn: A ``def`` (run in a worker thread) or ``async def`` function.
            *args: Its arguments.
            retry: This step's policy (else ``set_retry``'s, else the workflow's, else one
                attempt).
            timeout: Per-attempt timeout; an overlong attempt fails with code ``TIMEOUT``.
            compensate: ``compensate(output)`` undoes the step when the run compensates.
            idempotency_key: Exposed to the step through ``current_step()``.
            serdes: Dumps/loads the result when it is not plain JSON.
            semantics: ``at_most_once`` journals every attempt as started before running it
                and never re-runs an interrupted attempt (``StepInterruptedError``).
            rate_limit: A :class:`~relayflow.flow.RateLimit` every attempt reserves a slot
                of first: the run waits (durably) for its slot, or with ``on_limit="fail"``
                ``RateLimitedError`` is raised.

        Returns:
            The step's result (as JSON, or through ``serdes``).

        Raises:
            StepFailedError: The step failed for good (carries the journalled code/message).
            StepInterruptedError: An at-most-once attempt was interrupted and not retried.
            RateLimitedError: ``rate_limit`` with ``on_limit="fail"`` found no free slot.
            RateLimiterMissingError: ``rate_limit`` on a host without a rate limiter.
        """
        opts = self._step_options(
            retry, timeout, compensate, idempotency_key, serdes, semantics, rate_limit
        )
        return await self._runner.drive(run_step(self._core, id, fn, args, opts))

    async def sleep(self, duration: Duration) -> None:
        """Suspend for ``duration``; the wake time is fixed when the wait is first registered."""
        waits.sleep(self._core, duration)

    async def sleep_until(self, when: datetime | int) -> None:
        """Suspend until ``when`` (a datetime, naive meaning UTC, or epoch ms)."""
        waits.sleep_until(self._core, when)

    async def wait_for_event(
        self,
        event_type: str,
        *,
        match: Any = None,
        timeout: Duration | None = None,
        on_timeout: OnTimeout = "null",
        lookback: Duration | None = None,
        name: str | None = None,
    ) -> Any:
        """Wait for an event of ``event_type`` and return its payload.

        Args:
            event_type: The event type.
            match: A predicate (reference DSL) or a partial dict matched against the payload.
            timeout: At the deadline the wait returns ``None`` or raises ``WaitTimeoutError``.
            on_timeout: ``"null"`` or ``"raise"``.
            lookback: Accept a buffered event at most this old.
            name: A label shown with the wait.
        """
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

    async def wait_for_signal(
        self,
        name: str,
        *,
        match: Any = None,
        timeout: Duration | None = None,
        on_timeout: OnTimeout = "null",
        lookback: Duration | None = None,
    ) -> Any:
        """Wait for the signal ``name`` sent to this run and return its payload."""
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

    async def wait_for_token(
        self,
        *,
        name: str | None = None,
        token_id: str | None = None,
        timeout: Duration | None = None,
        heartbeat_timeout: Duration | None = None,
        on_timeout: OnTimeout = "raise",
        serdes: Serdes | None = None,
    ) -> TokenHandle:
        """Create a token an external party completes, fails or heartbeats.

        Timeouts run from the token's creation. An overall timeout raises
        ``WaitTimeoutError`` (or returns ``None`` with ``on_timeout="null"``); a missed
        heartbeat raises ``HeartbeatTimeoutError``; a failed token ``TokenFailedError``.
        A generated ``token_id`` locates its run (``complete_token(token_id, value)`` and
        ``POST /api/tokens/{tokenId}`` need no run id); an id the author chose stays
        run-scoped. ``serdes`` loads the completion payload.
        """
        spec = tokens.create_token(
            self._core,
            token_id=token_id,
            name=name,
            timeout=timeout,
            heartbeat_timeout=heartbeat_timeout,
            on_timeout=on_timeout,
            serdes=serdes,
        )
        return TokenHandle(self._core, spec)

    async def wait_for_callback(
        self,
        submit: Callable[[str], Any],
        *,
        name: str | None = None,
        timeout: Duration | None = None,
        heartbeat_timeout: Duration | None = None,
        retry: RetryPolicy | None = None,
        serdes: Serdes | None = None,
    ) -> Any:
        """Create a token, run ``submit(token_id)`` as a retried step, then wait for it.

        ``submit`` receives a run-locating token id; ``serdes`` loads the callback payload.
        """
        op = tokens.callback_op(
            self._core,
            submit,
            name=name,
            timeout=timeout,
            heartbeat_timeout=heartbeat_timeout,
            retry=retry,
            serdes=serdes,
        )
        return await self._runner.drive(op)

    async def wait_for_condition(
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
        """Poll ``check(state) -> (done, new_state)`` until done; returns the final state.

        The state is checkpointed after every poll and polls are ``delay`` apart (times
        ``backoff_rate`` per poll). An error raised by ``check`` fails the wait at once with
        ``ConditionCheckError``; running out of ``max_attempts`` raises ``WaitTimeoutError``.
        """
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
        return await self._runner.drive(op)

    async def invoke(
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
        """Start a child run and return its output (``None`` when ``detach``).

        The child runs with this run's workflow version unless ``lock_to_version`` names
        another (see docs/guides/versioning.md).

        Raises:
            ChildRunError: The child ended without completing (code ``CHILD_RUN_ENDED``;
                the child's own code and message in ``child_code``/``child_message``).
        """
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

    async def parallel(
        self,
        branches: Sequence[Callable[..., Any]],
        *,
        max_concurrency: int | None = None,
        completion: CompletionPolicy | None = None,
        names: Sequence[str] | None = None,
        serdes: Serdes | None = None,
        result_serdes: Serdes | None = None,
    ) -> BatchResult[Any]:
        """Run each ``branch(child_ctx)`` concurrently, each in its own child context.

        ``serdes`` dumps/loads each branch's value; ``result_serdes`` the whole
        ``BatchResult`` (its ``loads`` must return one), on the first run and on replay.
        """
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
        return await self._runner.drive(op)

    async def map(
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
        """Run ``fn(child_ctx, item, index)`` for each item, each in its own child context.

        ``serdes`` dumps/loads each item's value; ``result_serdes`` the whole ``BatchResult``.
        """
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
        return await self._runner.drive(op)

    async def group(
        self, name: str, fn: Callable[..., Any], *, serdes: Serdes | None = None
    ) -> Any:
        """Run ``fn(child_ctx)`` once: its result or error is checkpointed and its
        compensations are scoped (a failing group undoes its own steps, newest first)."""
        return await self._runner.drive(group_op(self._core, name, fn, serdes))
