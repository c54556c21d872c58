"""Replays one invocation of a workflow body against its journal and builds the StepResponse."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from relayflow.errors import (
    CancelledSignal,
    CheckpointRefusedSignal,
    CompensateRequestedSignal,
    NotJsonError,
    SuspendSignal,
)
from relayflow.ports import CheckpointWriter
from relayflow.protocol import (
    DURABILITY_UNAVAILABLE,
    HOST_CAPABILITIES,
    CancelledResponse,
    CompensatedResponse,
    CompensationFailedResponse,
    CompletedResponse,
    FailedResponse,
    SerializedError,
    StepRequest,
    StepResponse,
    WaitingResponse,
)
from relayflow.sdk.checkpoints import Checkpointer
from relayflow.sdk.context import WorkflowContext
from relayflow.sdk.failures import run_error, serialize_error
from relayflow.sdk.groups import run_compensations
from relayflow.sdk.instructions import Op, Settle
from relayflow.sdk.invocation import ExecutorOptions, Invocation
from relayflow.sdk.ordinals import Operation, scope_of
from relayflow.sdk.registry import Workflow
from relayflow.sdk.runner import AsyncRunner, SyncRunner, run_coroutine_sync
from relayflow.sdk.scope import ContextCore
from relayflow.sdk.serdes import dump_output
from relayflow.sdk.sync_context import SyncWorkflowContext

OutcomeKind = Literal["completed", "suspended", "cancelled", "compensate", "error"]


@dataclass(frozen=True)
class _Outcome:
    kind: OutcomeKind
    value: Any = None
    error: Exception | None = None


def execute(
    workflow: Workflow[Any],
    request: StepRequest,
    *,
    now_ms: Callable[[], int],
    services: Mapping[str, object] | None = None,
    options: ExecutorOptions | None = None,
    checkpoints: CheckpointWriter | None = None,
    claim: bool = False,
) -> StepResponse:
    """Replay ``workflow`` once against ``request.journal``.

    Args:
        workflow: The registered workflow whose body runs.
        request: The step request; its journal is updated in place and returned.
        now_ms: The host's wall clock in epoch ms (step timestamps, retries, the deadline).
        services: What ``ctx.services`` resolves.
        options: Executor tuning (in-process retry threshold, checkpoint interval...).
        checkpoints: The run's checkpoint log. When the request offers the channel and the
            workflow checkpoints per step (the default), every step is durable in it before
            the body goes on; otherwise the answer is the only checkpoint (batched).
        claim: Claim the invocation's first slot before the body runs (a remote host's
            defence against a replayed request, see :meth:`Checkpointer.claim`).

    Returns:
        ``completed``, ``failed``, ``waiting``, ``cancelled``, ``compensated`` or
        ``compensation_failed``. Signals other than the executor's own (a simulated host
        crash, a refused checkpoint, ``KeyboardInterrupt``) propagate.
    """
    options = options or ExecutorOptions()
    checkpointer = None
    channel = request.checkpoint
    if channel is not None and checkpoints is not None and workflow.config.checkpoint == "per_step":
        checkpointer = Checkpointer(
            checkpoints,
            request.run_id,
            channel.seq,
            group=options.group_checkpoints,
        )
        if claim:
            checkpointer.claim()
            request.cancel = request.cancel or checkpointer.cancel
    elif channel is not None and channel.required:
        return _durability_refused(workflow, request, has_log=checkpoints is not None)
    inv = Invocation(
        request,
        workflow,
        services=services or {},
        now_ms=now_ms,
        options=options,
        checkpointer=checkpointer,
    )
    root = ContextCore(inv, "", clock_ms=request.run_meta.started_at, retry=workflow.config.retry)
    try:
        if workflow.is_async:
            return run_coroutine_sync(_execute_async(inv, root))
        return _execute_sync(inv, root)
    finally:
        if checkpointer is not None:
            checkpointer.close()


def _durability_refused(
    workflow: Workflow[Any], request: StepRequest, *, has_log: bool
) -> StepResponse:
    """The answer to a request that requires per-step durability this host cannot give:
    nothing of the body runs."""
    why = (
        f"workflow {workflow.id!r} is declared checkpoint='batched'"
        if has_log
        else "this step host has no checkpoint log (no checkpoint table or route)"
    )
    error = SerializedError(
        category="RUNTIME_ERROR",
        code=DURABILITY_UNAVAILABLE,
        message=f"the run requires per-step durability and {why}; nothing ran",
    )
    return FailedResponse(
        error=error,
        journal=request.journal,
        capabilities=list(HOST_CAPABILITIES),
        durability="per_invocation",
    )


def _execute_sync(inv: Invocation, root: ContextCore) -> StepResponse:
    runner = SyncRunner(SyncWorkflowContext, inv.options.sleep)
    ctx = runner.context(root)
    try:
        value = inv.workflow.fn(inv.request.input, ctx)
        if inspect.isawaitable(value):
            raise TypeError("a def workflow body returned an awaitable")
        outcome = _Outcome("completed", value=value)
    except BaseException as exc:
        outcome = _classify(exc)
    return runner.drive(_finish(inv, root, outcome))


async def _execute_async(inv: Invocation, root: ContextCore) -> StepResponse:
    runner = AsyncRunner(WorkflowContext, inv.options.sleep)
    ctx = runner.context(root)
    try:
        value = await inv.workflow.fn(inv.request.input, ctx)
        outcome = _Outcome("completed", value=value)
    except BaseException as exc:
        outcome = _classify(exc)
    return await runner.drive(_finish(inv, root, outcome))


def _classify(exc: BaseException) -> _Outcome:
    if isinstance(exc, CheckpointRefusedSignal):
        return _Outcome("error", error=exc.error)
    if isinstance(exc, SuspendSignal):
        return _Outcome("suspended")
    if isinstance(exc, CancelledSignal):
        return _Outcome("cancelled")
    if isinstance(exc, CompensateRequestedSignal):
        return _Outcome("compensate")
    if isinstance(exc, Exception):
        return _Outcome("error", error=exc)
    raise exc  # a host crash, KeyboardInterrupt...: never ours to handle


def _flush(inv: Invocation) -> Op[Exception | None]:
    """Make every entry durable before the answer reports it done; returns a refusal for
    good (the run fails with it)."""
    try:
        yield Settle(flush=inv.settle_all)
    except (SuspendSignal, CancelledSignal):
        # The log refused the rest (unavailable, paused, cancelled): the answer carries it,
        # and a cancel found there is answered as one (``request.cancel`` is set).
        pass
    except CheckpointRefusedSignal as refused:
        return refused.error
    return None


def _finish(inv: Invocation, root: ContextCore, outcome: _Outcome) -> Op[StepResponse]:
    """Map the body's outcome to a response, running compensations where it calls for them."""
    refused = yield from _flush(inv)
    if refused is not None and outcome.kind in ("completed", "suspended"):
        outcome = _Outcome("error", error=refused)
    inv.journal_overruns()
    parts: dict[str, Any] = {
        "journal": inv.journal,
        "metadata_updates": inv.metadata,
        "stream_chunks": inv.stream_chunks,
        "capabilities": list(HOST_CAPABILITIES),
        "checkpoint_seq": inv.checkpointer.last_seq if inv.checkpointer is not None else None,
        "checkpoint_usage": inv.checkpointer.take_usage() if inv.checkpointer is not None else None,
        "durability": "per_step" if inv.checkpointer is not None else "per_invocation",
    }
    cancel = inv.request.cancel
    if cancel is not None:
        reports = []
        if cancel.compensate:
            reports = yield from run_compensations(inv, root.compensables)
            yield from _flush(inv)
        return CancelledResponse(compensations=reports, **parts)
    if inv.nondeterminism is not None:
        return FailedResponse(error=serialize_error(inv.nondeterminism), **parts)
    if outcome.kind == "suspended":
        if not inv.waits:
            raise RuntimeError("the body suspended without registering a wait")
        return WaitingResponse(waitpoints=inv.pending_waits(), **parts)
    if outcome.kind == "completed" and inv.has_user_waits():
        # The body swallowed a suspension (e.g. gather(return_exceptions=True)): keep waiting.
        return WaitingResponse(waitpoints=inv.pending_waits(), **parts)
    if outcome.kind in ("completed", "error"):
        missing = inv.unreached()
        if missing:
            lost_entry = inv.journal.step_results[missing[0]]
            lost = inv.nondeterministic(
                f"journalled step {missing[0]!r} was not reached before the body finished "
                f"(last operation reached: {inv.last_op!r}); the code no longer matches the run",
                data={
                    "scope": scope_of(missing[0]),
                    "ordinal": lost_entry.ordinal,
                    "expected": Operation(missing[0], lost_entry.kind).to_data(),
                    "found": None,
                },
            )
            return FailedResponse(error=serialize_error(lost), **parts)
    if outcome.kind == "completed":
        try:
            output = dump_output("the workflow returned a value", outcome.value, None)
        except NotJsonError as exc:
            return FailedResponse(error=serialize_error(exc), **parts)
        return CompletedResponse(output=output, **parts)
    if outcome.kind == "compensate":
        reports = yield from run_compensations(inv, root.compensables)
        yield from _flush(inv)
        if any(r.status == "err" for r in reports):
            return CompensationFailedResponse(compensations=reports, **parts)
        return CompensatedResponse(compensations=reports, **parts)
    assert outcome.error is not None
    error = run_error(outcome.error)
    if not root.compensables:
        return FailedResponse(error=error, **parts)
    reports = yield from run_compensations(inv, root.compensables)
    yield from _flush(inv)
    if any(r.status == "err" for r in reports):
        return CompensationFailedResponse(error=error, compensations=reports, **parts)
    return CompensatedResponse(error=error, compensations=reports, **parts)
