"""Shared steps of the transitions: ending a run, settling waits, parking or driving again."""

from __future__ import annotations

from typing import Any

from relayflow.core.effects import (
    ArmAlarm,
    CancelChildren,
    ChildOutcome,
    DisarmAlarm,
    Dispatch,
    Effect,
    ResumeParent,
    StartChild,
)
from relayflow.core.inbox import remember, resolution_for, take_from_inbox
from relayflow.core.record import ChildLink, ParentLink, RunRecord, RunStatus
from relayflow.core.settings import CoreSettings
from relayflow.core.trigger import TriggerSpec
from relayflow.core.waits import (
    compute_wake_at,
    is_detached,
    linked_child_waits,
    time_resolution,
)
from relayflow.protocol import (
    Journal,
    RunTrigger,
    SerializedError,
    Waitpoint,
    WaitpointResolution,
)


def working_copy(record: RunRecord) -> RunRecord:
    """A copy of ``record`` that transitions may change freely.

    The journal, the biggest part, is copied one level deep only: transitions replace its
    entries, never change them in place, so the entries can be shared.
    """
    journal = record.journal
    copied = record.model_copy(update={"journal": Journal()}).model_copy(deep=True)
    copied.journal = journal.model_copy(
        update={
            "step_results": dict(journal.step_results),
            "waitpoints_resolved": dict(journal.waitpoints_resolved),
            "waitpoints_registered": dict(journal.waitpoints_registered),
            "compensations_run": dict(journal.compensations_run),
            "metadata_state": dict(journal.metadata_state),
            "streams_completed": dict(journal.streams_completed),
        }
    )
    return copied


def runtime_error(code: str, message: str) -> SerializedError:
    """A ``RUNTIME_ERROR`` with ``code`` and ``message``."""
    return SerializedError(category="RUNTIME_ERROR", code=code, message=message)


def attached_children(record: RunRecord) -> tuple[str, ...]:
    """Ids of the children that end with their parent (not detached)."""
    return tuple(c.run_id for c in record.children if not c.detached)


def finish(
    record: RunRecord,
    status: RunStatus,
    now: int,
    *,
    output: Any = None,
    error: SerializedError | None = None,
    cancel_children: bool = False,
    cancel_reason: str | None = None,
) -> list[Effect]:
    """Move ``record`` to a terminal status (mutates it); returns the resulting effects."""
    record.status = status
    record.completed_at = now
    record.output = output
    record.error = error
    record.pending_waitpoints = []
    record.wake_at = None
    record.reconcile_at = None
    record.cancel_request = None
    record.dispatch_retry.next_attempt_at = None
    effects: list[Effect] = disarm(record)
    children = attached_children(record)
    if cancel_children and children:
        effects.append(CancelChildren(children, reason=cancel_reason or f"parent run {status}"))
    if record.parent is not None:
        effects.append(
            ResumeParent(
                parent_run_id=record.parent.run_id,
                waitpoint_id=record.parent.waitpoint_id,
                outcome=ChildOutcome(record.id, status, output=output, error=error),
            )
        )
    return effects


def fail_on_timeout(record: RunRecord, now: int) -> list[Effect] | None:
    """Fail the run with ``WORKFLOW_TIMEOUT`` if its deadline passed (mutates it)."""
    if record.timeout_deadline is None or record.timeout_deadline > now:
        return None
    message = f"workflow exceeded its timeout of {record.timeout_ms} ms"
    return finish(
        record,
        "failed",
        now,
        error=runtime_error("WORKFLOW_TIMEOUT", message),
        cancel_children=True,
        cancel_reason="parent run timed out",
    )


def run_again(record: RunRecord, now: int) -> list[Effect]:
    """Mark the run as needing an invocation now (mutates it)."""
    record.status = "running"
    record.wake_at = compute_wake_at(record, now)
    return [Dispatch(record.id)]


def park(record: RunRecord, now: int) -> list[Effect]:
    """Mark the run as waiting and arm its alarm at its earliest wake time (mutates it)."""
    record.status = "waiting"
    record.wake_at = compute_wake_at(record, now)
    if record.wake_at is None:
        return disarm(record)
    return [arm(record, record.wake_at)]


def arm(record: RunRecord, wake_at: int) -> ArmAlarm:
    """The effect arming the run's alarm at ``wake_at``; marks the alarm armed (mutates it)."""
    record.alarm_armed = True
    record.alarm_at = wake_at
    return ArmAlarm(record.id, wake_at)


def disarm(record: RunRecord) -> list[Effect]:
    """The effect disarming the run's alarm, if one may be armed (mutates the record)."""
    if not record.alarm_armed:
        return []
    record.alarm_armed = False
    wake_at, record.alarm_at = record.alarm_at, None
    return [DisarmAlarm(record.id, wake_at)]


def child_spec(record: RunRecord, wait: Waitpoint) -> tuple[TriggerSpec, bool]:
    """The spec of the child a RUN wait starts, and whether it is detached."""
    meta = wait.meta
    detached = is_detached(wait)
    tags = meta.get("tags") or []
    key = meta.get("idempotencyKey")
    locked = meta.get("lockToVersion")
    wid = wait.client_waitpoint_id
    spec = TriggerSpec(
        workflow_id=str(meta.get("childWorkflowId", "")),
        input=meta.get("childInput"),
        run_id=f"{record.id}/{wid}",
        # A child runs its parent's version unless its invoke locks it to another.
        workflow_version=locked if isinstance(locked, str) and locked else record.workflow_version,
        environment=record.environment,
        tags=tuple(str(t) for t in tags) if isinstance(tags, list) else (),
        tenant_meta=record.tenant_meta,
        triggered_by=RunTrigger.model_validate(
            {"kind": "parent", "parentRunId": record.id, "parentStepId": wid}
        ),
        idempotency_key=key if isinstance(key, str) else None,
        parent=None if detached else ParentLink(run_id=record.id, waitpoint_id=wid),
        parent_workflow_id=record.workflow_id,
    )
    return spec, detached


def resolve(record: RunRecord, wait_id: str, resolution: WaitpointResolution) -> None:
    """Write a resolution and drop the wait from the pending list (mutates ``record``)."""
    record.journal.waitpoints_resolved[wait_id] = resolution
    record.pending_waitpoints = [
        w for w in record.pending_waitpoints if w.client_waitpoint_id != wait_id
    ]
    record.operations_count += 1


def settle_waits(record: RunRecord, now: int, settings: CoreSettings) -> tuple[int, list[Effect]]:
    """Resolve every pending wait that can be resolved now (mutates ``record``).

    Already-resolved waits count as resolved; due times resolve or time out; buffered
    injections are consumed in arrival order; RUN waits start their child (a detached one
    resolves at once with ``None``). When the check of the attached children is due, each
    of their starts is issued again (see :func:`reconcile_children`).

    Returns:
        The number of waits now resolved and the effects (child starts).
    """
    resolved = 0
    effects: list[Effect] = []
    journal = record.journal
    for wait in list(record.pending_waitpoints):
        wid = wait.client_waitpoint_id
        if wid in journal.waitpoints_resolved:
            record.pending_waitpoints = [
                w for w in record.pending_waitpoints if w.client_waitpoint_id != wid
            ]
            resolved += 1
            continue
        reg = journal.waitpoints_registered.get(wid)
        if wait.kind == "RUN":
            spec, detached = child_spec(record, wait)
            if all(c.waitpoint_id != wid for c in record.children):
                record.children.append(
                    ChildLink(run_id=spec.run_id, waitpoint_id=wid, detached=detached)
                )
                effects.append(StartChild(record.id, wid, spec, detached=detached))
            if detached:
                resolve(
                    record, wid, WaitpointResolution(kind="RUN", resolved_at=now, source="replay")
                )
                resolved += 1
            continue
        if reg is not None:
            # An item that arrived in time wins over a deadline that passed before the wait
            # was settled (the run was paused, or its alarm came late).
            deadline = min(
                (t for t in (reg.deadline, reg.heartbeat_deadline) if t is not None), default=None
            )
            early = None
            if wait.kind in ("EVENT", "SIGNAL", "MANUAL") and deadline is not None:
                early = take_from_inbox(record, wait, reg, received_by=deadline)
            if early is not None:
                resolve(record, wid, resolution_for(early, now, buffered=True))
                remember(record, early.id, settings.seen_ids_limit)
                resolved += 1
                continue
            by_time = time_resolution(wait, reg, now)
            if by_time is not None:
                resolve(record, wid, by_time)
                resolved += 1
                continue
        if wait.kind in ("EVENT", "SIGNAL", "MANUAL"):
            item = take_from_inbox(record, wait, reg)
            if item is not None:
                resolve(record, wid, resolution_for(item, now, buffered=True))
                remember(record, item.id, settings.seen_ids_limit)
                resolved += 1
    started = {e.waitpoint_id for e in effects if isinstance(e, StartChild)}
    effects.extend(reconcile_children(record, now, settings, started=started))
    return resolved, effects


def reconcile_children(
    record: RunRecord,
    now: int,
    settings: CoreSettings,
    *,
    started: set[str] | frozenset[str] = frozenset(),
) -> list[StartChild]:
    """Keep the check time of the waits on attached children and, when due, check again.

    The first such wait sets the check one period ahead; once it is due, every pending one
    issues its ``StartChild`` again (except those in ``started``, issued just now), and the
    next check is one period later. A start is idempotent: a missing child is inserted, an
    ended one resumes this run, a live one is left alone. Without such waits there is no
    check time. Mutates ``record``.
    """
    linked = linked_child_waits(record)
    if not linked:
        record.reconcile_at = None
        return []
    if record.reconcile_at is not None and record.reconcile_at > now:
        return []
    first = record.reconcile_at is None
    record.reconcile_at = now + settings.child_reconcile_ms
    if first:
        return []
    checks: list[StartChild] = []
    for wait in linked:
        if wait.client_waitpoint_id in started:
            continue
        spec, _ = child_spec(record, wait)
        checks.append(StartChild(record.id, wait.client_waitpoint_id, spec, reconcile=True))
    return checks
