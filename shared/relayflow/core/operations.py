"""Operator actions on one run: pause, resume, redrive, upgrade and the journal a rerun
starts from.

Pure: each returns the new record and its effects; the engine saves and applies them (see
docs/guides/operating-runs.md for what each means to a user). An action carries an id: an
action whose id the run already holds changes nothing, so client retries and resumed bulk
jobs act on each run once.
"""

from __future__ import annotations

from typing import Any

from relayflow.core.effects import ArmAlarm, Dispatch, Transition
from relayflow.core.outcome import arm, fail_on_timeout, run_again, working_copy
from relayflow.core.record import NOT_STARTED, PauseState, Redrive, RunAction, RunRecord
from relayflow.core.versions import pin_of, unpin
from relayflow.errors import RunActionConflictError, RunTerminalError, StepNotFoundError
from relayflow.protocol import Journal, RetryOverride, SerializedError, StepJournalEntry

#: The most actions a run keeps (the oldest go first; their ids are then forgotten).
ACTIONS_KEPT = 100
#: The statuses a redrive continues from.
REDRIVABLE: frozenset[str] = frozenset({"failed", "cancelled", "compensation_failed"})


def applied(record: RunRecord, action_id: str) -> bool:
    """True when the run already holds the action ``action_id``."""
    return any(action.id == action_id for action in record.actions)


def note(record: RunRecord, action: RunAction) -> None:
    """Keep ``action`` in the run (mutates it)."""
    record.actions = [*record.actions, action][-ACTIONS_KEPT:]


def _refuse_ended(record: RunRecord, what: str) -> None:
    if record.is_terminal:
        raise RunTerminalError(
            f"run {record.id} is {record.status}; it cannot be {what}", code="already_terminal"
        )


def pause(record: RunRecord, action: RunAction) -> Transition:
    """Pause a ``running`` or ``waiting`` run: it starts no new invocation until resumed.

    An invocation in flight goes on (the engine asks a checkpointing host to stop after its
    current step); its answer is kept and the run stays paused (see :func:`keep_paused`).

    Raises:
        RunTerminalError: The run ended (``already_terminal``).
        RunActionConflictError: ``already_paused``, or ``not_started`` (delayed, queued).
    """
    if applied(record, action.id):
        return Transition(record, (), changed=False)
    _refuse_ended(record, "paused")
    if record.status == "paused":
        raise RunActionConflictError(f"run {record.id} is paused already", code="already_paused")
    if record.status in NOT_STARTED:
        raise RunActionConflictError(
            f"run {record.id} is {record.status}: it has not started and holds nothing; "
            "cancel it, or pause its workflow",
            code="not_started",
        )
    rec = working_copy(record)
    resume_to = "running" if rec.status == "running" else "waiting"
    rec.pause = PauseState(at=action.at, by=action.by, resume_to=resume_to, reason=action.reason)
    _hold(rec)
    note(rec, action)
    return Transition(rec, ())


def paused_at_start(record: RunRecord, action: RunAction) -> RunRecord:
    """A new run of a paused workflow, as inserted: ``paused`` before it starts.

    It has taken no concurrency slot and its delay has not begun; at resume it starts as a
    ``delayed`` run due at its start time (see :func:`resume`).
    """
    start_at = record.wake_at if record.status == "delayed" else None
    held = record.model_copy(
        update={
            "status": "paused",
            "pause": PauseState(
                at=action.at,
                by=action.by,
                resume_to="start",
                reason=action.reason,
                start_at=start_at,
            ),
            "wake_at": None,
            "timeout_deadline": None,
            "alarm_armed": False,
            "alarm_at": None,
        }
    )
    note(held, action)
    return held


def resume(record: RunRecord, action: RunAction, now: int) -> Transition:
    """Resume a paused run: it runs again at once (the body replays and finds what arrived
    meanwhile); a run paused before it started becomes ``delayed``, due at its start time,
    and starts as a delayed run does (flow control applies then).

    Raises:
        RunTerminalError: The run ended (``already_terminal``).
        RunActionConflictError: ``not_paused``.
    """
    if applied(record, action.id):
        return Transition(record, (), changed=False)
    _refuse_ended(record, "resumed")
    if record.status != "paused" or record.pause is None:
        raise RunActionConflictError(
            f"run {record.id} is {record.status}, not paused", code="not_paused"
        )
    rec = working_copy(record)
    pause_state = rec.pause
    assert pause_state is not None
    rec.pause = None
    note(rec, action)
    if pause_state.resume_to == "start":
        rec.status = "delayed"
        rec.wake_at = max(now, pause_state.start_at or now)
        return Transition(rec, (arm(rec, rec.wake_at),))
    rec.status = "running" if pause_state.resume_to == "running" else "waiting"
    timed_out = fail_on_timeout(rec, now)
    if timed_out is not None:
        return Transition(rec, tuple(timed_out))
    return Transition(rec, tuple(run_again(rec, now)))


def upgrade(record: RunRecord, action: RunAction, now: int) -> Transition:
    """Move a run that has not ended to the current code: its next invocation goes to
    whatever build answers then (which it records and, when pinned, keeps); a run waiting
    for its pinned build is tried at once. A paused run moves too and runs on resume.

    A run that names no build (an ``upgrade`` workflow's, or one not yet answered) has
    nothing to change: the action is kept all the same, its detail ``from`` null.

    Raises:
        RunTerminalError: The run ended (``already_terminal``).
    """
    if applied(record, action.id):
        return Transition(record, (), changed=False)
    _refuse_ended(record, "upgraded")
    pinned = pin_of(record)
    waiting = record.version_wait
    rec = working_copy(record)
    detail = dict(action.detail)
    detail["from"] = pinned.model_dump(mode="json", by_alias=True) if pinned is not None else None
    detail["versionWait"] = waiting.reason if waiting is not None else None
    note(rec, action.model_copy(update={"detail": detail}))
    if pinned is None and waiting is None:
        return Transition(rec, ())
    unpin(rec, now)
    if waiting is not None and rec.status == "running" and rec.wake_at is not None:
        return Transition(rec, (Dispatch(rec.id),))
    return Transition(rec, ())


def _hold(rec: RunRecord) -> None:
    rec.status = "paused"
    rec.wake_at = None
    rec.dispatch_retry.next_attempt_at = None


def keep_paused(before: RunRecord, transition: Transition) -> Transition:
    """A host's answer (or a dispatch failure) applied to a paused run: the run stays paused,
    resuming to what the answer made of it, and nothing is dispatched or armed. An answer that
    ended the run ends it."""
    rec = transition.record
    if before.status != "paused" or rec.is_terminal or not transition.changed:
        return transition
    if rec.pause is None:
        # A cancel with compensation lifted the pause: the run runs to compensate.
        return transition
    rec.pause = rec.pause.model_copy(
        update={"resume_to": "running" if rec.status == "running" else "waiting"}
    )
    _hold(rec)
    kept = tuple(e for e in transition.effects if not isinstance(e, Dispatch | ArmAlarm))
    return Transition(rec, kept)


def redrive(
    record: RunRecord, action: RunAction, now: int, retry: RetryOverride | None = None
) -> Transition:
    """Continue a ``failed``, ``cancelled`` or ``compensation_failed`` run from its failure
    point under the same id: completed steps keep their results; the steps whose final
    failure is the run's error leave the journal (kept in the redrive's history) and start
    again from attempt 1, with ``retry`` as their policy when given; the failed
    compensations of a ``compensation_failed`` run run again.

    Raises:
        RunActionConflictError: ``not_redrivable`` (the run did not fail or was not cancelled).
    """
    if applied(record, action.id):
        return Transition(record, (), changed=False)
    if record.status not in REDRIVABLE:
        raise RunActionConflictError(
            f"run {record.id} is {record.status}; only failed, cancelled and "
            "compensation_failed runs can be redriven",
            code="not_redrivable",
        )
    rec = working_copy(record)
    history = Redrive(at=now, action_id=action.id, error=rec.error)
    if rec.status == "compensation_failed":
        runs = rec.journal.compensations_run
        for key in [k for k, report in runs.items() if _failed_report(report)]:
            history.compensations[key] = runs.pop(key)
        rec.compensations = [c for c in rec.compensations if c.status != "err"]
    else:
        for key in failing_steps(rec.journal, rec.error):
            history.steps[key] = rec.journal.step_results.pop(key)
            if retry is not None:
                rec.retry_overrides[key] = retry.to_wire()
    if rec.error is not None and rec.error.code == "WORKFLOW_TIMEOUT" and rec.timeout_ms:
        rec.timeout_deadline = now + rec.timeout_ms
    elif rec.timeout_deadline is not None and rec.timeout_deadline <= now:
        # The run did not time out, but its deadline passed while it was ended.
        rec.timeout_deadline = now + (rec.timeout_ms or 0)
    rec.redrives = [*rec.redrives, history]
    rec.error = None
    rec.output = None
    rec.completed_at = None
    rec.cancel_request = None
    rec.compensation_skipped = None
    rec.dispatch_retry.failures = 0
    rec.dispatch_retry.last_error = None
    note(rec, action)
    return Transition(rec, tuple(run_again(rec, now)))


def _failed_report(report: Any) -> bool:
    return isinstance(report, dict) and report.get("status") == "err"


def failing_steps(journal: Journal, error: SerializedError | None) -> list[str]:
    """The journal keys whose final failure is the run's ``error``: its failure point."""
    if error is None:
        return []
    data = error.data if isinstance(error.data, dict) else {}
    named = data.get("stepId")
    return [
        key
        for key, entry in journal.step_results.items()
        if entry.status in ("err", "started")
        and entry.error is not None
        and (key == named or (entry.error.code, entry.error.message) == (error.code, error.message))
    ]


def is_top_level(key: str, kind: str | None) -> bool:
    """An operation of the body itself (a step, token, group, parallel or map the body
    reached), not one inside a group or branch, nor a branch: what a rerun can start from."""
    return "/" not in key and kind != "branch"


def rerun_journal(record: RunRecord, from_step: str) -> Journal:
    """The journal a rerun of ``record`` from its top-level step ``from_step`` starts with:
    every operation the body reached before that step, with everything inside it.

    Raises:
        StepNotFoundError: No top-level step ``from_step``.
        RunActionConflictError: ``not_rerunnable`` (the run has not ended, or its
            compensations ran and ``from_step`` is not its first step).
    """
    if not record.is_terminal:
        raise RunActionConflictError(
            f"run {record.id} is {record.status}: only an ended run can be rerun",
            code="not_rerunnable",
        )
    journal = record.journal
    chosen = journal.step_results.get(from_step)
    if chosen is None or not is_top_level(from_step, chosen.kind):
        raise StepNotFoundError(f"run {record.id} has no top-level step {from_step!r}")
    copied = {
        key: entry
        for key, entry in journal.step_results.items()
        if _before(key, entry, from_step, chosen, journal)
    }
    if copied and (journal.compensations_run or record.compensations):
        raise RunActionConflictError(
            f"the compensations of run {record.id} ran: the steps before {from_step!r} were "
            "undone, so it can be rerun only from its first step",
            code="not_rerunnable",
        )
    cut = _started_at(chosen)
    registered = {
        wid: reg for wid, reg in journal.waitpoints_registered.items() if reg.registered_at < cut
    }
    return Journal(
        step_results=copied,
        waitpoints_registered=registered,
        waitpoints_resolved={
            wid: res
            for wid, res in journal.waitpoints_resolved.items()
            if wid in registered and res.resolved_at <= cut
        },
    )


def _started_at(entry: StepJournalEntry) -> int:
    first = entry.attempts[0].started_at if entry.attempts else entry.started_at
    return min(first, entry.started_at) if entry.started_at else first


def _owner(key: str, entry: StepJournalEntry, journal: Journal) -> StepJournalEntry | None:
    """The top-level entry whose scope holds ``key``: itself at the top, else its group's
    or branch's (a branch's entry carries its parallel's or map's ordinal)."""
    if "/" not in key:
        return entry
    scope = key.split("/", 1)[0]
    steps = journal.step_results
    return steps.get(scope) or steps.get(f"branch:{scope}") or steps.get(f"group:{scope}")


def _before(
    key: str, entry: StepJournalEntry, chosen_key: str, chosen: StepJournalEntry, journal: Journal
) -> bool:
    """Whether the body reached ``key`` before the chosen top-level step: by the top-level
    ordinal where both have one, else by start time."""
    if key == chosen_key:
        return False
    owner = _owner(key, entry, journal) or entry
    if owner is chosen:
        return False
    if owner.ordinal is not None and chosen.ordinal is not None:
        return owner.ordinal < chosen.ordinal
    return _started_at(owner) < _started_at(chosen)
