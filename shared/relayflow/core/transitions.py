"""Transitions of a run driven by its step host: starting an invocation, applying the host's
answer, and transport failures. Pure: each returns the new record and its effects."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pydantic

from relayflow.core.checkpoints import add_chunks, attempts_of
from relayflow.core.effects import Effect, Transition
from relayflow.core.metadata import apply_updates
from relayflow.core.operations import keep_paused
from relayflow.core.outcome import (
    arm,
    finish,
    park,
    run_again,
    runtime_error,
    settle_waits,
    working_copy,
)
from relayflow.core.record import CompensationSkipped, RunRecord, RunStatus
from relayflow.core.settings import CoreSettings
from relayflow.core.versions import pin_of, record_code_version, wait_for_version
from relayflow.core.waits import compute_wake_at, register_waits
from relayflow.protocol import (
    CAPABILITY_CANCEL,
    DURABILITY_UNAVAILABLE,
    REQUEST_REPLAYED,
    VERSION_UNAVAILABLE,
    CancelledResponse,
    CompensatedResponse,
    CompensationFailedResponse,
    CompletedResponse,
    FailedResponse,
    Journal,
    RunMeta,
    SerializedError,
    StepRequest,
    StepResponse,
    WaitingResponse,
    parse_step_response,
)
from relayflow.tracing.ids import RunTrace


@dataclass(frozen=True)
class SentInvocation:
    """What the engine sent: the invocation number, whether it carried ``cancel``, and when."""

    invocation: int
    cancel: bool
    started_at: int


def build_request(
    record: RunRecord,
    now: int,
    settings: CoreSettings,
    *,
    deadline: int | None = None,
    checkpoints: bool = False,
) -> StepRequest:
    """The step request of the record's current invocation.

    ``deadline`` (epoch ms) is the drive's; by default ``now + invocation_timeout_ms``. With
    ``checkpoints`` the request offers the host the run's checkpoint log from the slot after
    ``record.checkpoint_seq`` on.
    """
    channel: dict[str, Any] | None = None
    if checkpoints:
        channel = {"seq": record.checkpoint_seq + 1}
        if settings.require_per_step:
            channel["required"] = True
    return StepRequest.model_validate(
        {
            "runId": record.id,
            "workflowId": record.workflow_id,
            "workflowVersion": record.workflow_version,
            "invocationCount": max(1, record.invocation_count),
            "input": record.input,
            "journal": record.journal,
            "environment": record.environment,
            "deadline": now + settings.invocation_timeout_ms if deadline is None else deadline,
            "tenantMeta": record.tenant_meta,
            "runMeta": RunMeta(
                number=record.run_number,
                attempt=1,
                triggered_by=record.triggered_by,
                tags=list(record.tags),
                started_at=record.started_at,
            ),
            "cancel": record.cancel_request,
            "checkpoint": channel,
            "retryOverrides": record.retry_overrides or None,
            "codeVersion": pin_of(record),
            "traceparent": RunTrace.of(record.id, record.trace_parent)
            .invocation(max(1, record.invocation_count))
            .traceparent,
        }
    )


def begin_invocation(
    record: RunRecord, now: int, settings: CoreSettings
) -> tuple[Transition, SentInvocation | None]:
    """Count a new invocation, or fail the run if its operations limit is reached.

    Returns:
        The transition and, when the invocation may go ahead, what will be sent.
    """
    rec = working_copy(record)
    if rec.operations_count >= settings.operations_limit:
        message = (
            f"run used {rec.operations_count} operations, its limit is "
            f"{settings.operations_limit} (CoreSettings.operations_limit)"
        )
        effects = finish(
            rec, "failed", now, error=runtime_error("operations_limit_exceeded", message)
        )
        return Transition(rec, tuple(effects)), None
    rec.invocation_count += 1
    rec.operations_count += 1
    rec.dispatch_retry.next_attempt_at = None
    rec.wake_at = compute_wake_at(rec, now)
    sent = SentInvocation(rec.invocation_count, rec.cancel_request is not None, now)
    return Transition(rec, ()), sent


def _attempt_count(journal: Journal) -> int:
    return sum(attempts_of(entry) for entry in journal.step_results.values())


def _merge_journal(record: RunRecord, response_journal: Journal) -> None:
    """Take the host's journal but keep the orchestrator-owned parts (resolutions, fixed
    registration facts, metadata state).

    The answer is left as it was: a save that loses its race applies the same answer again
    to the run read anew (an in-process host's answer is not a fresh copy). Entries are
    shared, as in :func:`~relayflow.core.outcome.working_copy`.
    """
    old = record.journal
    new = response_journal
    record.operations_count += max(0, _attempt_count(new) - _attempt_count(old))
    record.journal = new.model_copy(
        update={
            "step_results": dict(new.step_results),
            "waitpoints_resolved": {**new.waitpoints_resolved, **old.waitpoints_resolved},
            "waitpoints_registered": {**new.waitpoints_registered, **old.waitpoints_registered},
            "compensations_run": {**old.compensations_run, **new.compensations_run},
            "metadata_state": dict(old.metadata_state),
            "streams_completed": dict(new.streams_completed),
        }
    )


def _is_current(record: RunRecord, sent: SentInvocation) -> bool:
    return not record.is_terminal and record.invocation_count == sent.invocation


def apply_response(
    record: RunRecord,
    status_code: int,
    body: Any,
    sent: SentInvocation,
    now: int,
    settings: CoreSettings,
) -> Transition:
    """Apply the host's answer to the invocation ``sent``.

    A stale answer (the run ended or another invocation started since) changes nothing.
    Non-200 answers are transport failures (see :func:`dispatch_failed`); a 200 body that is
    not a step response fails the run with ``invalid_step_response``. A run paused while the
    invocation ran stays paused (see :func:`~relayflow.core.operations.keep_paused`).
    """
    return keep_paused(record, _apply_response(record, status_code, body, sent, now, settings))


def _apply_response(
    record: RunRecord,
    status_code: int,
    body: Any,
    sent: SentInvocation,
    now: int,
    settings: CoreSettings,
) -> Transition:
    if not _is_current(record, sent):
        return Transition(record, (), changed=False)
    if status_code != 200:
        error = body.get("error") if isinstance(body, dict) else None
        message = body.get("message") if isinstance(body, dict) else None
        detail = f"step host answered HTTP {status_code}"
        if error:
            detail += f" {error}"
        if message:
            detail += f": {message}"
        if status_code == 409 and error == VERSION_UNAVAILABLE:
            return wait_for_version(record, detail, now, settings)
        # A copy of a request the host already ran (a dispatcher's own retry): send anew.
        transient = status_code == 429 or status_code >= 500 or error == REQUEST_REPLAYED
        return dispatch_failed(
            record, sent, detail, transient=transient, now=now, settings=settings
        )
    try:
        response = parse_step_response(body)
    except pydantic.ValidationError as exc:
        rec = working_copy(record)
        summary = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:3]
        )
        effects = finish(
            rec,
            "failed",
            now,
            error=runtime_error("invalid_step_response", f"step host answer is invalid: {summary}"),
        )
        return Transition(rec, tuple(effects))
    return _apply_parsed(record, response, sent, now, settings)


def _apply_parsed(
    record: RunRecord,
    response: StepResponse,
    sent: SentInvocation,
    now: int,
    settings: CoreSettings,
) -> Transition:
    rec = working_copy(record)
    rec.dispatch_retry.failures = 0
    rec.dispatch_retry.last_error = None
    rec.compute_time_ms += max(0, now - sent.started_at)
    record_code_version(rec, response)
    _merge_journal(rec, response.journal)
    apply_updates(rec, response.metadata_updates)
    add_chunks(rec, response.stream_chunks)
    if response.checkpoint_seq is not None:
        rec.checkpoint_seq = max(rec.checkpoint_seq, response.checkpoint_seq)
    rec.checkpoint_open = False
    durability = response.durability or "per_invocation"
    if rec.durability != "per_invocation":
        rec.durability = durability
    if settings.require_per_step and durability != "per_step" and not _refused_by_host(response):
        error = runtime_error(
            DURABILITY_UNAVAILABLE,
            "the run requires per-step durability and its step host answered without "
            "checkpointing each step (a host without a checkpoint log, or a reference host)",
        )
        return Transition(rec, tuple(finish(rec, "failed", now, error=error)))
    reports = getattr(response, "compensations", None)
    if reports:
        rec.compensations.extend(reports)

    effects: list[Effect]
    if rec.cancel_request is not None:
        directive = rec.cancel_request
        if not sent.cancel and not isinstance(response, CancelledResponse):
            # The cancel arrived while this invocation ran: ask again, this time with it.
            return Transition(rec, tuple(run_again(rec, now)))
        reason = directive.reason or "run cancelled"
        error = SerializedError(category="USER_ERROR", code="CANCELLED", message=reason)
        if directive.compensate:
            rec.compensation_skipped = compensation_skipped(response)
        effects = finish(rec, "cancelled", now, error=error)
        return Transition(rec, tuple(effects))

    if isinstance(response, CompletedResponse):
        effects = finish(rec, "completed", now, output=response.output)
    elif isinstance(response, FailedResponse):
        effects = finish(rec, "failed", now, error=response.error)
    elif isinstance(response, CancelledResponse):
        error = SerializedError(category="USER_ERROR", code="CANCELLED", message="run cancelled")
        effects = finish(rec, "cancelled", now, error=error)
    elif isinstance(response, CompensatedResponse | CompensationFailedResponse):
        effects = finish(rec, response.status, now, error=response.error)
    else:
        effects = _apply_waiting(rec, response, now, settings)
    return Transition(rec, tuple(effects))


def _refused_by_host(response: StepResponse) -> bool:
    """The host itself refused to run without per-step durability (its message says why)."""
    return isinstance(response, FailedResponse) and response.error.code == DURABILITY_UNAVAILABLE


def compensation_skipped(response: StepResponse) -> CompensationSkipped | None:
    """Why the answer to a cancel request that asked for compensation ran none (None: it ran
    them, or the body compensated on its own)."""
    if isinstance(response, CancelledResponse | CompensatedResponse | CompensationFailedResponse):
        return None
    if CAPABILITY_CANCEL not in (response.capabilities or ()):
        return CompensationSkipped(
            code="host_cannot_compensate",
            message=(
                "no compensation ran: the step host does not advertise the "
                f"'{CAPABILITY_CANCEL}' capability (a reference host ignores the cancel "
                f"directive) and answered '{response.status}'"
            ),
            host_status=response.status,
        )
    return CompensationSkipped(
        code="host_did_not_compensate",
        message=(
            f"no compensation ran: the step host answered the cancel request with "
            f"'{response.status}' instead of 'cancelled'"
        ),
        host_status=response.status,
    )


def _apply_waiting(
    rec: RunRecord, response: WaitingResponse, now: int, settings: CoreSettings
) -> list[Effect]:
    if not response.waitpoints:
        return finish(
            rec,
            "failed",
            now,
            error=runtime_error(
                "empty_waitpoint_list", "step host answered waiting without any waitpoint"
            ),
        )
    register_waits(rec, response.waitpoints, now)
    rec.pending_waitpoints = [w.model_copy(deep=True) for w in response.waitpoints]
    resolved, effects = settle_waits(rec, now, settings)
    if resolved:
        return [*effects, *run_again(rec, now)]
    return [*effects, *park(rec, now)]


def dispatch_failed(
    record: RunRecord,
    sent: SentInvocation,
    message: str,
    *,
    transient: bool,
    now: int,
    settings: CoreSettings,
    code: str = "handler_error",
) -> Transition:
    """A transport failure of the invocation ``sent``.

    Transient failures are retried with exponential backoff through the run's alarm, up to
    ``dispatch_max_attempts``; then (or at once for permanent ones) the run fails with
    ``code`` (``handler_error`` by default). A paused run stays paused.
    """
    return keep_paused(
        record, _dispatch_failed(record, sent, message, transient, now, settings, code)
    )


def _dispatch_failed(
    record: RunRecord,
    sent: SentInvocation,
    message: str,
    transient: bool,
    now: int,
    settings: CoreSettings,
    code: str,
) -> Transition:
    if not _is_current(record, sent):
        return Transition(record, (), changed=False)
    rec = working_copy(record)
    retry = rec.dispatch_retry
    retry.last_error = message
    if transient and retry.failures + 1 < settings.dispatch_max_attempts:
        retry.failures += 1
        retry.next_attempt_at = now + settings.dispatch_backoff_ms(retry.failures)
        rec.wake_at = compute_wake_at(rec, now)
        assert rec.wake_at is not None
        return Transition(rec, (arm(rec, rec.wake_at),))
    attempts = retry.failures + 1
    retry.failures = 0
    suffix = f" (after {attempts} attempts)" if transient else ""
    status: RunStatus = "compensation_failed" if rec.cancel_request is not None else "failed"
    effects = finish(rec, status, now, error=runtime_error(code, message + suffix))
    return Transition(rec, tuple(effects))
