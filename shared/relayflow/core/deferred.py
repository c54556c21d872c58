"""Runs that do not start at once: ``delayed`` until their start time, ``queued`` for a
concurrency slot. What a trigger's flow options make of a new run, how such a run starts,
and how it ends without starting (ttl, a refusing strategy).

A run that has not started has no workflow timeout ticking: its ``timeout_deadline`` is set
when it starts, so a long queue does not eat into the run's own time.
"""

from __future__ import annotations

from relayflow.core.effects import Effect, Transition
from relayflow.core.outcome import finish, working_copy
from relayflow.core.record import NOT_STARTED, RunRecord
from relayflow.flow.declarations import TriggerOptions
from relayflow.flow.errors import TTL_EXPIRED
from relayflow.protocol import SerializedError

#: A queued run is checked (a crash may have left it holding a slot while stored queued)
#: this long after it queued, then at intervals as long as it has waited, up to the max.
QUEUE_CHECK_MIN_MS = 60_000
QUEUE_CHECK_MAX_MS = 3_600_000


def deferred(record: RunRecord, options: TriggerOptions | None, now: int) -> RunRecord:
    """The new run as the trigger's ``delay``, ``ttl`` and ``priority`` make it: ``delayed``
    with its start time as ``wake_at`` when the start is later than ``now``."""
    if options is None:
        return record
    update: dict[str, object] = {"priority": options.priority}
    ttl = options.ttl_ms()
    if ttl is not None:
        update["start_deadline"] = now + ttl
    start_at = options.start_at_ms(now)
    if start_at > now:
        update.update(status="delayed", wake_at=start_at, timeout_deadline=None)
    return record.model_copy(update=update)


def queued(record: RunRecord, concurrency_key: str, now: int) -> RunRecord:
    """The run waiting for a slot of ``concurrency_key``, due at its first queue check."""
    waiting = record.model_copy(
        update={"status": "queued", "concurrency_key": concurrency_key, "timeout_deadline": None}
    )
    return waiting.model_copy(update={"wake_at": queue_check_at(waiting, now)})


def queue_check_at(record: RunRecord, now: int) -> int:
    """When a queued run is next checked: as long after ``now`` as it has waited so far
    (at least ``QUEUE_CHECK_MIN_MS``, at most ``QUEUE_CHECK_MAX_MS``), or at its ttl."""
    waited = now - record.started_at
    check = now + min(max(waited, QUEUE_CHECK_MIN_MS), QUEUE_CHECK_MAX_MS)
    return check if record.start_deadline is None else min(check, record.start_deadline)


def started(record: RunRecord, now: int) -> RunRecord:
    """The run starting now: ``running``, due at once, its workflow timeout from now on."""
    deadline = now + record.timeout_ms if record.timeout_ms is not None else None
    return record.model_copy(
        update={
            "status": "running",
            "wake_at": now,
            "start_deadline": None,
            "timeout_deadline": deadline,
        }
    )


def expired(record: RunRecord, now: int) -> bool:
    """Whether the not-started run's ttl has passed."""
    return (
        record.status in NOT_STARTED
        and record.start_deadline is not None
        and record.start_deadline <= now
    )


def end_unstarted(record: RunRecord, now: int, code: str, message: str) -> Transition:
    """End a run that never started ``cancelled`` with ``code`` (``TTL_EXPIRED``,
    ``CONCURRENCY_LIMITED``)."""
    rec = working_copy(record)
    error = SerializedError(category="USER_ERROR", code=code, message=message)
    effects: list[Effect] = finish(rec, "cancelled", now, error=error)
    return Transition(rec, tuple(effects))


def expire(record: RunRecord, now: int) -> Transition:
    """End a run whose ttl passed before it started."""
    assert record.start_deadline is not None
    waited = now - record.started_at
    return end_unstarted(
        record,
        now,
        TTL_EXPIRED,
        f"the run did not start within its ttl ({record.start_deadline - record.started_at} ms;"
        f" it was {record.status} for {waited} ms)",
    )
