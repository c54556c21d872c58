"""Turns the engine's saves of a run into the run's spans (see docs/guides/tracing.md).

Each save is compared with the record it replaced: what it settled (a step attempt, a
wait, a child run, the run itself) is emitted then, with the times the record stores and
the ids :mod:`relayflow.tracing.ids` derives, so the process that saves a change emits its
span and nothing is remembered between saves. No input, output or payload goes into a span.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.util.types import AttributeValue

from relayflow.core.record import RunRecord
from relayflow.flow.status import RATE_WAIT_PREFIX
from relayflow.protocol import SerializedError, StepAttempt, WaitpointResolution
from relayflow.tracing.ids import RunTrace, SpanRef
from relayflow.tracing.spans import emit, tracing_enabled

#: The id a step's wait before its next attempt starts with (see relayflow.sdk.steps).
RETRY_WAIT_PREFIX = "retry:"

#: How each wait kind is named in spans.
WAIT_KINDS = {
    "DATETIME": "sleep",
    "EVENT": "event",
    "SIGNAL": "signal",
    "MANUAL": "token",
    "RUN": "child",
}


class RunTracer:
    """A run observer (``Engine.add_observer``) that emits the spans each save settles, and
    the invocation spans the engine reports (``on_invoked``)."""

    def on_saved(self, before: RunRecord | None, after: RunRecord) -> None:
        if not tracing_enabled():
            return
        trace = RunTrace.of(after.id, after.trace_parent)
        base = {"relayflow.run.id": after.id, "relayflow.workflow.id": after.workflow_id}
        if before is None:
            emit(
                f"trigger {after.workflow_id}",
                trace.trigger,
                trace.root,
                after.started_at,
                after.started_at,
                {**base, "relayflow.trigger.kind": after.triggered_by.kind},
            )
        parent = (
            trace.invocation(before.invocation_count)
            if before is not None and before.invocation_count > 0
            else trace.root
        )
        for key, attempt in _new_attempts(before, after):
            _emit_attempt(trace, parent, base, key, attempt)
        self._emit_waits(trace, before, after, base)
        if after.is_terminal and (before is None or not before.is_terminal):
            _emit_run(trace, after, base, before)

    def on_interrupted(self, run_id: str, reason: str) -> None:
        """An interrupted drive leaves nothing to emit: the next drive's saves tell it."""

    def on_invoked(
        self, record: RunRecord, started_at: int, ended_at: int, outcome: str, failed: bool
    ) -> None:
        """Invocation ``record.invocation_count`` of the body ran from ``started_at`` to
        ``ended_at`` and ended ``outcome`` (the host's answer, or how it was not had)."""
        if not tracing_enabled():
            return
        trace = RunTrace.of(record.id, record.trace_parent)
        number = max(1, record.invocation_count)
        emit(
            f"invoke {record.workflow_id}",
            trace.invocation(number),
            trace.root,
            started_at,
            ended_at,
            {
                "relayflow.run.id": record.id,
                "relayflow.workflow.id": record.workflow_id,
                "relayflow.invocation.number": number,
                "relayflow.invocation.outcome": outcome,
            },
            failed=failed,
        )

    def _emit_waits(
        self, trace: RunTrace, before: RunRecord | None, after: RunRecord, base: dict[str, Any]
    ) -> None:
        resolved_before = before.journal.waitpoints_resolved if before is not None else {}
        children = {link.waitpoint_id: link.run_id for link in after.children}
        registered = after.journal.waitpoints_registered
        for wait_id, resolution in after.journal.waitpoints_resolved.items():
            if wait_id in resolved_before:
                continue
            registration = registered.get(wait_id)
            start = registration.registered_at if registration is not None else None
            _emit_wait(
                trace,
                base,
                wait_id,
                resolution.kind,
                start if start is not None else resolution.resolved_at,
                resolution.resolved_at,
                _wait_outcome(resolution),
                children.get(wait_id),
                resolution.error,
            )
        known_before = {link.run_id for link in before.children} if before is not None else set()
        for link in after.children:
            if link.detached and link.run_id not in known_before:
                ref = trace.child(link.run_id)
                child_root = RunTrace.of(link.run_id).root
                started = after.journal.waitpoints_registered.get(link.waitpoint_id)
                at = started.registered_at if started is not None else after.started_at
                emit(
                    "child run",
                    ref,
                    trace.root,
                    at,
                    at,
                    {
                        **base,
                        "relayflow.child.run_id": link.run_id,
                        "relayflow.child.detached": True,
                    },
                    links=[child_root],
                )


def _new_attempts(before: RunRecord | None, after: RunRecord) -> list[tuple[str, StepAttempt]]:
    """The step attempts that ended in this save (an at-most-once "started" mark is not)."""
    found: list[tuple[str, StepAttempt]] = []
    previous = before.journal.step_results if before is not None else {}
    for key, entry in after.journal.step_results.items():
        old = previous.get(key)
        ended_before = (
            {a.attempt for a in old.attempts if a.status != "started"} if old is not None else set()
        )
        for attempt in entry.attempts:
            if attempt.status != "started" and attempt.attempt not in ended_before:
                found.append((key, attempt))
    return found


def _emit_attempt(
    trace: RunTrace, parent: SpanRef, base: dict[str, Any], key: str, attempt: StepAttempt
) -> None:
    attributes: dict[str, AttributeValue] = {
        **base,
        "relayflow.step.id": key,
        "relayflow.step.attempt": attempt.attempt,
        "relayflow.step.retry": attempt.attempt - 1,
        "relayflow.step.outcome": "ok" if attempt.status == "ok" else "error",
    }
    if attempt.error is not None:
        attributes["error.type"] = _error_type(attempt.error)
    emit(
        f"step {key}",
        trace.step_attempt(key, attempt.attempt),
        parent,
        attempt.started_at,
        attempt.finished_at if attempt.finished_at is not None else attempt.started_at,
        attributes,
        failed=attempt.status == "err",
    )


def _emit_wait(
    trace: RunTrace,
    base: dict[str, Any],
    wait_id: str,
    kind: str,
    start: int,
    end: int,
    outcome: str,
    child_run_id: str | None,
    error: SerializedError | None,
) -> None:
    attributes: dict[str, AttributeValue] = {
        **base,
        "relayflow.wait.id": wait_id,
        "relayflow.wait.kind": _wait_kind(wait_id, kind),
        "relayflow.wait.outcome": outcome,
    }
    if error is not None:
        attributes["error.type"] = _error_type(error)
    if child_run_id is not None:
        attributes["relayflow.child.run_id"] = child_run_id
        emit(
            "child run",
            trace.child(child_run_id),
            trace.root,
            start,
            end,
            attributes,
            failed=outcome == "failed",
            links=[RunTrace.of(child_run_id).root],
        )
        return
    emit(
        f"wait {_wait_kind(wait_id, kind)}",
        trace.wait(wait_id),
        trace.root,
        start,
        end,
        attributes,
        failed=outcome == "failed",
    )


def _wait_kind(wait_id: str, kind: str) -> str:
    """``sleep``, ``event``, ``signal``, ``token``, ``child``, or the waits relayflow makes
    itself: ``retry`` (a step's backoff) and ``rate_limit`` (a step's rate-limit slot)."""
    own = wait_id.rpartition("/")[2]
    if kind == "DATETIME" and own.startswith(RETRY_WAIT_PREFIX):
        return "retry"
    if own.startswith(RATE_WAIT_PREFIX):
        return "rate_limit"
    return WAIT_KINDS.get(kind, kind.lower())


def _wait_outcome(resolution: WaitpointResolution) -> str:
    """``fired`` (a sleep), ``delivered`` (an event, signal or token), ``completed`` (a
    child run), ``failed`` or ``timed_out``; ``cancelled`` is told by the run's end."""
    if resolution.timed_out or resolution.source == "timeout":
        return "timed_out"
    if resolution.error is not None:
        return "failed"
    if resolution.kind == "RUN":
        return "completed"
    return "fired" if resolution.kind == "DATETIME" else "delivered"


def _emit_run(
    trace: RunTrace, after: RunRecord, base: dict[str, Any], before: RunRecord | None
) -> None:
    ended = after.completed_at if after.completed_at is not None else after.started_at
    # Waits the run ended in (cancelled, timed out, failed elsewhere) end with it.
    for wait in (before or after).pending_waitpoints:
        wait_id = wait.client_waitpoint_id
        if wait_id in after.journal.waitpoints_resolved:
            continue
        registration = after.journal.waitpoints_registered.get(wait_id)
        start = registration.registered_at if registration is not None else ended
        child = next((c.run_id for c in after.children if c.waitpoint_id == wait_id), None)
        _emit_wait(trace, base, wait_id, wait.kind, start, ended, "cancelled", child, None)
    attributes: dict[str, AttributeValue] = {
        **base,
        "relayflow.run.status": after.status,
        "relayflow.run.invocations": after.invocation_count,
        "relayflow.trigger.kind": after.triggered_by.kind,
    }
    if after.parent is not None:
        attributes["relayflow.parent.run_id"] = after.parent.run_id
    if after.error is not None:
        attributes["error.type"] = _error_type(after.error)
    emit(
        f"run {after.workflow_id}",
        trace.root,
        trace.caller,
        after.started_at,
        ended,
        attributes,
        failed=after.status not in ("completed", "compensated", "cancelled"),
    )


def _error_type(error: SerializedError) -> str:
    return error.name or error.code
