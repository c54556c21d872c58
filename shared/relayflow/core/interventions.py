"""Transitions from outside the step host: injections, alarms, cancel and a child's end.

Pure: each returns the new record and its effects; the engine saves and applies them.
"""

from __future__ import annotations

from relayflow.core.effects import (
    ArmAlarm,
    CancelChildren,
    ChildOutcome,
    Dispatch,
    Effect,
    Transition,
)
from relayflow.core.inbox import (
    Injection,
    InjectionResult,
    buffer,
    is_seen,
    item_matches,
    remember,
    resolution_for,
    wait_key,
)
from relayflow.core.outcome import (
    arm,
    attached_children,
    fail_on_timeout,
    finish,
    park,
    resolve,
    run_again,
    settle_waits,
    working_copy,
)
from relayflow.core.record import NOT_STARTED, RunRecord
from relayflow.core.settings import CoreSettings
from relayflow.core.waits import compute_wake_at
from relayflow.errors import ChildRunError, RunTerminalError, child_ended_message
from relayflow.protocol import CancelDirective, SerializedError, WaitpointResolution


def _refuse_terminal(record: RunRecord, what: str, code: str = "run_terminal") -> None:
    if record.is_terminal:
        raise RunTerminalError(
            f"run {record.id} is {record.status}; it accepts no {what}", code=code
        )


def _heartbeat(
    record: RunRecord, injection: Injection, now: int
) -> tuple[Transition, InjectionResult]:
    rec = working_copy(record)
    for wait in rec.pending_waitpoints:
        if wait.kind != "MANUAL" or wait_key(wait) != injection.key:
            continue
        reg = rec.journal.waitpoints_registered.get(wait.client_waitpoint_id)
        interval = wait.meta.get("heartbeatTimeoutMs")
        if reg is None or not isinstance(interval, int) or isinstance(interval, bool):
            continue
        rec.journal.waitpoints_registered[wait.client_waitpoint_id] = reg.model_copy(
            update={"heartbeat_deadline": now + interval}
        )
        effects: tuple[Effect, ...] = ()
        if rec.status == "waiting":
            rec.wake_at = compute_wake_at(rec, now)
            if rec.wake_at is not None:
                effects = (arm(rec, rec.wake_at),)
        return Transition(rec, effects), InjectionResult("heartbeat", wait.client_waitpoint_id)
    return Transition(record, (), changed=False), InjectionResult("heartbeat")


def inject(
    record: RunRecord,
    injection: Injection,
    now: int,
    settings: CoreSettings,
    *,
    owned: bool = False,
) -> tuple[Transition, InjectionResult]:
    """Deliver an event, signal or token outcome to a run.

    A waiting run whose pending wait matches (kind, key, ``match``) resolves it and runs
    again; otherwise the injection goes to the inbox. Ids already seen are duplicates.
    ``owned``: ``record`` is a working copy of the caller's own (:func:`working_copy`), so
    it is changed in place instead of copied again; a refusal leaves it unchanged.

    Raises:
        RunTerminalError: The run already ended (code ``run_terminal``).
        InboxFullError: The inbox holds ``settings.inbox_limit`` items.
    """
    _refuse_terminal(record, "more injections")
    if injection.outcome == "heartbeat":
        return _heartbeat(record, injection, now)
    if is_seen(record, injection.id):
        return Transition(record, (), changed=False), InjectionResult("duplicate")
    rec = record if owned else working_copy(record)
    item = injection.to_item(now)
    if rec.status == "waiting" and rec.cancel_request is None:
        registered = rec.journal.waitpoints_registered
        for wait in rec.pending_waitpoints:
            wid = wait.client_waitpoint_id
            if wid in rec.journal.waitpoints_resolved:
                continue
            if item_matches(wait, registered.get(wid), item, buffered=False):
                resolve(rec, wid, resolution_for(item, now, buffered=False))
                remember(rec, item.id, settings.seen_ids_limit)
                return Transition(rec, tuple(run_again(rec, now))), InjectionResult("resolved", wid)
    buffer(rec, item, settings.inbox_limit)
    return Transition(rec, ()), InjectionResult("buffered")


def on_alarm(record: RunRecord, now: int, settings: CoreSettings) -> Transition:
    """Time passed: enforce the workflow timeout, resolve due waits, retry due dispatches,
    check the attached children when their check is due.

    An early or duplicate alarm changes nothing and re-arms the alarm at the wake time.
    """
    if record.is_terminal or record.status in NOT_STARTED or record.status == "paused":
        # A run not started yet is started (or expired) by the engine's flow control; a
        # paused run waits for its resume, which looks at what came due meanwhile.
        return Transition(record, (), changed=False)
    due = record.wake_at is not None and record.wake_at <= now
    if record.status == "waiting" and not due:
        again = (ArmAlarm(record.id, record.wake_at),) if record.wake_at is not None else ()
        return Transition(record, again, changed=False)
    rec = working_copy(record)
    timed_out = fail_on_timeout(rec, now)
    if timed_out is not None:
        return Transition(rec, tuple(timed_out))
    if rec.status == "running":
        retry_at = rec.dispatch_retry.next_attempt_at
        if retry_at is not None and retry_at > now:
            return Transition(record, (ArmAlarm(rec.id, retry_at),), changed=False)
        if retry_at is not None:
            rec.dispatch_retry.next_attempt_at = None
            rec.wake_at = compute_wake_at(rec, now)
            return Transition(rec, (Dispatch(rec.id),))
        return Transition(record, (Dispatch(rec.id),), changed=False)
    resolved, effects = settle_waits(rec, now, settings)
    if resolved:
        return Transition(rec, (*effects, *run_again(rec, now)))
    if effects or rec.reconcile_at != record.reconcile_at:
        # Child checks were issued (or their time set): park with the next check time.
        return Transition(rec, (*effects, *park(rec, now)))
    wake_at = compute_wake_at(record, now)
    rearm: tuple[Effect, ...] = (ArmAlarm(rec.id, wake_at),) if wake_at is not None else ()
    return Transition(record, rearm, changed=False)


def cancel(
    record: RunRecord,
    reason: str | None,
    compensate: bool,
    now: int,
    *,
    code: str = "CANCELLED",
) -> Transition:
    """Cancel a waiting or running run, and its attached children.

    ``code`` is the error code the run ends with when it is not compensated (flow control
    cancels with its own, e.g. ``CONCURRENCY_REPLACED``).

    Without compensation the run is ``cancelled`` at once. With it, the run runs once more
    with ``cancel`` set on the request so the host runs the compensations (LIFO) and answers
    ``cancelled`` with their reports.

    Raises:
        RunTerminalError: The run already ended (code ``already_terminal``).
    """
    _refuse_terminal(record, "cancel", code="already_terminal")
    rec = working_copy(record)
    # A paused run is cancelled as well: compensating runs it once more for that.
    rec.pause = None
    if not compensate:
        error = SerializedError(category="USER_ERROR", code=code, message=reason or "run cancelled")
        effects = finish(
            rec, "cancelled", now, error=error, cancel_children=True, cancel_reason=reason
        )
        return Transition(rec, tuple(effects))
    if rec.cancel_request is not None:
        return Transition(record, (), changed=False)
    rec.cancel_request = CancelDirective(reason=reason, compensate=True)
    rec.pending_waitpoints = []
    effects_list: list[Effect] = []
    children = attached_children(rec)
    if children:
        effects_list.append(CancelChildren(children, reason=reason, compensate=True))
    effects_list.extend(run_again(rec, now))
    return Transition(rec, tuple(effects_list))


def child_ended(
    parent: RunRecord, waitpoint_id: str, outcome: ChildOutcome, now: int
) -> Transition:
    """Resolve the parent's RUN wait with a child's end: its output, or its error.

    As in the reference, a child's error reaches the parent's wait with the child's own
    ``category``, ``code`` and ``message`` (``CHILD_RUN_ENDED`` only when the child has no
    code), so bodies on any host can branch on the child's code. ``data`` names the child
    run and its status (a relayflow extension that reference hosts ignore).
    """
    if parent.is_terminal or waitpoint_id in parent.journal.waitpoints_resolved:
        return Transition(parent, (), changed=False)
    rec = working_copy(parent)
    if outcome.status == "completed":
        resolution = WaitpointResolution(
            kind="RUN", resolved_at=now, payload=outcome.output, source="replay"
        )
    else:
        child = outcome.error or SerializedError(code="", message="")
        resolution = WaitpointResolution(
            kind="RUN",
            resolved_at=now,
            source="replay",
            error=SerializedError(
                category=child.category,
                code=child.code or ChildRunError.code,
                message=child.message or child_ended_message(outcome.status),
                data={"childRunId": outcome.run_id, "childStatus": outcome.status},
            ),
        )
    resolve(rec, waitpoint_id, resolution)
    if rec.status == "waiting" and rec.cancel_request is None:
        return Transition(rec, tuple(run_again(rec, now)))
    return Transition(rec, ())
