"""The status line a run view shows for a run that flow control keeps from running: why it is
``queued``, until when it is ``delayed``, until when a step's rate limit parks it.

Read from the run's record alone, except for a queued run's key occupancy, which only the
slots store knows: the caller reads it for a single run's view (never for a list).
"""

from __future__ import annotations

from dataclasses import dataclass

from relayflow.core.record import RunRecord
from relayflow.schedules.times import iso_utc

#: The id prefix of the timed wait that parks a run until its rate-limit slot (the local id,
#: after any scope path).
RATE_WAIT_PREFIX = "rate:"


@dataclass(frozen=True)
class KeyOccupancy:
    """How many of a concurrency key's slots are held, out of the workflow's limit."""

    in_use: int
    limit: int
    #: The run holds one of them: a release gave it the slot and handed it to its drive.
    holds_one: bool = False


def concurrency_line(state: str, key: str | None, occupancy: KeyOccupancy | None) -> str:
    """``queued (concurrency key acme: 5 of 5 in use)``; without a key the limit covers the
    workflow (``queued (concurrency: 5 of 5 in use)``); without occupancy just the key; a run
    that holds a slot already ``queued (concurrency key acme: got a slot, starting)``."""
    scope = f"concurrency key {key}" if key else "concurrency"
    if occupancy is None:
        return f"{state} ({scope})"
    if occupancy.holds_one:
        return f"{state} ({scope}: got a slot, starting)"
    return f"{state} ({scope}: {occupancy.in_use} of {occupancy.limit} in use)"


def rate_limited_until(record: RunRecord) -> int | None:
    """When the run's pending rate-limit wait ends (its slot), if it is parked on one."""
    if record.is_terminal:
        return None
    found: list[int] = []
    for wait in record.pending_waitpoints:
        local = wait.client_waitpoint_id.rpartition("/")[2]
        wake_at = wait.meta.get("wakeAt")
        if local.startswith(RATE_WAIT_PREFIX) and isinstance(wake_at, int):
            found.append(wake_at)
    return max(found) if found else None


def status_line(record: RunRecord, occupancy: KeyOccupancy | None = None) -> str | None:
    """Why the run is not running, in words (None when nothing holds it)."""
    if record.version_wait is not None and not record.is_terminal:
        wait = record.version_wait
        return f"waiting for its code version since {iso_utc(wait.since)}: {wait.reason}"
    if record.status == "queued":
        return concurrency_line("queued", record.concurrency_key, occupancy)
    if record.status == "delayed" and record.debounce_key is not None and record.wake_at:
        # A later trigger of the burst moves the start without writing the run.
        when = iso_utc(record.wake_at)
        return f"delayed: debounced (key {record.debounce_key}), starts {when} at the earliest"
    if record.status == "delayed":
        return f"delayed until {iso_utc(record.wake_at)}" if record.wake_at else "delayed"
    until = rate_limited_until(record)
    return None if until is None else f"rate limited until {iso_utc(until)}"
