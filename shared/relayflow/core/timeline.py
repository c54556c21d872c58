"""A run's timeline: one entry per step attempt, per wait and per operator action, built
from its record."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from relayflow.batch_entries import with_copies
from relayflow.core.record import RecordModel, RunRecord
from relayflow.protocol import (
    AbandonedOutcome,
    Journal,
    SerializedError,
    StepAttempt,
    StepJournalEntry,
)

#: The key of a token's creation entry holding its run-locating id (see ``sdk.tokens``).
_RUN_TOKEN_ID_KEY = "runTokenId"


class TimelineEntry(RecordModel):
    """One step attempt, one wait or one operator action of a run.

    ``outcome`` is ``ok``/``err``/``started``/``retrying`` for steps and ``pending``,
    ``resolved``, ``timed_out``, ``error`` or ``cancelled`` (the run ended first) for
    waits. ``kind`` is the journal kind of a
    step entry (``step``, ``token``, ``condition``, ``group``, ``branch``, ``batch``, ...) and
    the wait kind of a wait (``DATETIME``, ``EVENT``, ``SIGNAL``, ``MANUAL``, ``RUN``).

    ``name`` is the name the author gave the operation (a token's, callback's, condition's,
    group's or event wait's ``name=``, a parallel branch's ``names=`` entry, a map item's
    ``item_name``). ``token_id`` is the id that completes a token (the run-locating one for
    generated ids). ``value``, ``value_size`` and ``value_truncated`` are set only when values
    are asked for: the checkpointed value (step or group result, wait payload, batch result,
    error data), the size of its JSON, and True when it was over
    :data:`TIMELINE_VALUE_CAP_BYTES` and left out.

    A step attempt that timed out but whose code ran on carries ``abandoned_ended_at``, when
    that code really returned or raised, and ``abandoned_outcome`` (``returned``/``raised``),
    once a later checkpoint or answer of the run journalled it.

    A step entry says whether it is a ``top_level`` step of the body (its journal key has no
    ``/``): a rerun can start from those. A step attempt a redrive took out of the journal
    carries ``redrive``, the number of that redrive (1 for the first); the step's attempts
    since start again from 1.

    An ``action`` entry is an operator action applied to the run: ``kind`` is ``pause``,
    ``resume``, ``cancel``, ``redrive``, ``rerun`` or ``upgrade``, ``id`` the action id,
    ``by`` who asked, ``reason`` why, ``detail`` what it chose or made; its ``outcome`` is
    ``applied``.
    """

    type: Literal["step", "wait", "action"]
    id: str
    attempt: int | None = None
    kind: str | None = None
    started_at: int
    ended_at: int | None = None
    outcome: str
    source: str | None = None
    error: SerializedError | None = None
    name: str | None = None
    token_id: str | None = None
    value: Any = None
    #: With values: a failed attempt's arguments, as it kept them (see ``StepAttempt.input``).
    input: Any = None
    value_size: int | None = None
    value_truncated: bool | None = None
    #: Why the value could not be given (``payload_not_found``/``payload_corrupt``).
    value_unavailable: str | None = None
    abandoned_ended_at: int | None = None
    abandoned_outcome: AbandonedOutcome | None = None
    top_level: bool | None = None
    redrive: int | None = None
    by: str | None = None
    reason: str | None = None
    detail: dict[str, Any] | None = None


def _local(key: str) -> tuple[str, str]:
    """``(namespace, local id)`` of a journal key (``g/token:tok_g-0`` → ``g/``, ...)."""
    head, slash, tail = key.rpartition("/")
    return (head + slash, tail)


TokenFacts = dict[str, tuple[str | None, str]]


def _token_names(journal: Journal) -> TokenFacts:
    """Per token wait id (``token:<id>``): the token's name and the id that completes it."""
    found: TokenFacts = {}
    for entry in journal.step_results.values():
        if entry.kind != "token" or not isinstance(entry.output, dict):
            continue
        local = str(entry.output.get("tokenId", ""))
        public = entry.output.get(_RUN_TOKEN_ID_KEY)
        found[f"token:{local}"] = (entry.name, str(public) if public else local)
    return found


def _step_name(key: str, entry: StepJournalEntry, tokens: TokenFacts) -> str | None:
    if entry.name is not None:
        return entry.name
    _, local = _local(key)
    if local.startswith("callback:"):
        # A wait_for_callback's submit step carries its token's name.
        token = tokens.get(f"token:{local.removeprefix('callback:')}")
        return token[0] if token is not None else None
    return None


def _step_value(
    step_id: str,
    entry: StepJournalEntry,
    attempt: int,
    error: SerializedError | None,
    steps: Mapping[str, StepJournalEntry],
) -> Any:
    if error is not None:
        return error.data
    if attempt == entry.attempt and entry.status == "ok":
        # A batch's entry refers to its branches' results; shown with them.
        return with_copies(step_id, entry.output, steps) if entry.kind == "batch" else entry.output
    return None


def _attempt_outcome(step: StepJournalEntry, attempt: StepAttempt | None) -> str:
    """An attempt's outcome; the failed last attempt of a step waiting for its next attempt
    reads ``retrying``: it did not fail the step."""
    if attempt is None:
        return step.status
    last = step.attempts[-1] if step.attempts else None
    if step.status == "retrying" and attempt is last and attempt.status == "err":
        return "retrying"
    return attempt.status


def _step_entries(
    step_id: str,
    step: StepJournalEntry,
    tokens: TokenFacts,
    steps: Mapping[str, StepJournalEntry],
    *,
    values: bool,
    redrive: int | None = None,
) -> list[TimelineEntry]:
    """One entry per attempt of a journalled step, among ``steps`` (``redrive``: the redrive
    that took it out of the journal, for its history)."""
    name = _step_name(step_id, step, tokens)
    token_id = None
    if step.kind == "token":
        token = tokens.get(f"token:{_token_local(step)}")
        token_id = token[1] if token is not None else None
    entries: list[TimelineEntry] = []
    attempts: list[StepAttempt | None] = list(step.attempts) or [None]
    for a in attempts:
        attempt = a.attempt if a is not None else step.attempt
        error = a.error if a is not None else step.error
        entries.append(
            TimelineEntry(
                type="step",
                id=step_id,
                attempt=attempt,
                kind=step.kind if step.kind != "step" else None,
                started_at=a.started_at if a is not None else step.started_at,
                ended_at=a.finished_at if a is not None else step.finished_at,
                outcome=_attempt_outcome(step, a),
                error=error,
                name=name,
                token_id=token_id,
                value=_step_value(step_id, step, attempt, error, steps) if values else None,
                input=a.input if values and a is not None else None,
                abandoned_ended_at=a.abandoned_ended_at if a is not None else None,
                abandoned_outcome=a.abandoned_outcome if a is not None else None,
                top_level="/" not in step_id,
                redrive=redrive,
            )
        )
    return entries


def action_entries(record: RunRecord) -> list[TimelineEntry]:
    """One entry per operator action applied to ``record`` (pause, resume, cancel, redrive,
    rerun, upgrade), oldest first."""
    return [
        TimelineEntry(
            type="action",
            id=action.id,
            kind=action.kind,
            started_at=action.at,
            ended_at=action.at,
            outcome="applied",
            by=action.by,
            reason=action.reason,
            detail=dict(action.detail) or None,
        )
        for action in record.actions
    ]


def timeline(record: RunRecord, *, values: bool = False) -> list[TimelineEntry]:
    """One entry per step attempt, per wait and per operator action, in start order; the
    attempts redrives took out of the journal are kept, marked with their redrive.

    With ``values`` each entry carries its checkpointed value as the journal holds it
    (possibly a payload pointer; :func:`cap_value` sizes and caps them).
    """
    entries: list[TimelineEntry] = []
    journal = record.journal
    tokens = _token_names(journal)
    for number, redriven in enumerate(record.redrives, start=1):
        for step_id, step in redriven.steps.items():
            entries.extend(
                _step_entries(step_id, step, tokens, redriven.steps, values=values, redrive=number)
            )
    for step_id, step in journal.step_results.items():
        entries.extend(_step_entries(step_id, step, tokens, journal.step_results, values=values))
    for wait_id, reg in journal.waitpoints_registered.items():
        resolution = journal.waitpoints_resolved.get(wait_id)
        outcome = "pending"
        ended_at = resolution.resolved_at if resolution else None
        if resolution is None and record.is_terminal:
            # The run ended (cancelled, failed) while it waited: the wait ended with it.
            outcome, ended_at = "cancelled", record.completed_at
        if resolution is not None:
            outcome = "resolved"
            if resolution.timed_out:
                outcome = "timed_out"
            elif resolution.error is not None:
                outcome = "error"
        token = tokens.get(wait_id) if reg.kind == "MANUAL" else None
        value = None
        if values and resolution is not None:
            value = resolution.error.data if resolution.error is not None else resolution.payload
        entries.append(
            TimelineEntry(
                type="wait",
                id=wait_id,
                kind=reg.kind,
                started_at=reg.registered_at,
                ended_at=ended_at,
                outcome=outcome,
                source=resolution.source if resolution else None,
                error=resolution.error if resolution else None,
                name=reg.name or (token[0] if token else None),
                token_id=token[1] if token else None,
                value=value,
            )
        )
    entries.extend(action_entries(record))
    far = 2**63
    entries.sort(key=lambda e: (e.started_at, e.ended_at if e.ended_at is not None else far))
    return entries


def _token_local(entry: StepJournalEntry) -> str:
    return str(entry.output.get("tokenId", "")) if isinstance(entry.output, dict) else ""
