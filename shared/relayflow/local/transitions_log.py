"""One readable console line per run transition, from the engine's saves (a run observer).

The wrapper sees every insert and conditional save; it prints a line when a run's status or
the step/wait it is at changes (lease-only saves stay quiet).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime

from relayflow.cli.render import compact_json, format_duration
from relayflow.core.record import RunRecord

#: Runs whose last line is remembered (the oldest are forgotten first).
_REMEMBERED_RUNS = 10_000


def _clock(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%H:%M:%S")


def describe_position(record: RunRecord, now_ms: int) -> str:
    """Where the run is: the waits it is parked on, its last step, or how it ended."""
    if record.status == "completed":
        return f"output {compact_json(record.output, 100)}"
    if record.error is not None and record.is_terminal:
        return f"error {record.error.code}: {record.error.message}"[:160]
    if record.status == "waiting" and record.pending_waitpoints:
        parts = []
        for wait in record.pending_waitpoints:
            registered = record.journal.waitpoints_registered.get(wait.client_waitpoint_id)
            wake = registered.wake_at if registered is not None else None
            deadline = registered.deadline if registered is not None else None
            if wait.kind == "DATETIME" and wake is not None:
                parts.append(
                    f"{wait.client_waitpoint_id} until {_clock(wake)}"
                    f" (in {format_duration(wake - now_ms)})"
                )
            elif deadline is not None:
                parts.append(
                    f"{wait.client_waitpoint_id} (timeout in {format_duration(deadline - now_ms)})"
                )
            else:
                parts.append(wait.client_waitpoint_id)
        return "waits on " + ", ".join(parts)
    # A running run: name the latest thing that happened (a step finishing, a wait resolving).
    latest: list[tuple[int, str]] = []
    for step_id, entry in record.journal.step_results.items():
        attempt = f" (attempt {entry.attempt})" if entry.attempt > 1 else ""
        at = entry.finished_at or entry.started_at
        latest.append((at, f"after step {step_id} {entry.status}{attempt}"))
    for wait_id, resolution in record.journal.waitpoints_resolved.items():
        outcome = "timed out" if resolution.timed_out else "resolved"
        latest.append((resolution.resolved_at, f"after wait {wait_id} {outcome}"))
    if latest:
        return max(latest, key=lambda item: item[0])[1]
    return ""


class TransitionLog:
    """A run observer (``Engine.add_observer``) that reports run transitions to ``write``.

    Args:
        write: Receives one line per transition (without a newline).
        now_ms: Wall clock for the line's time stamp.
    """

    def __init__(self, write: Callable[[str], None], now_ms: Callable[[], int]) -> None:
        self._write = write
        self._now_ms = now_ms
        self._last: OrderedDict[str, tuple[str, str]] = OrderedDict()
        self._lock = threading.Lock()

    def on_saved(self, before: RunRecord | None, after: RunRecord) -> None:
        """Report ``after`` if its status or position changed since the last line."""
        self._report(after)

    def on_interrupted(self, run_id: str, reason: str) -> None:
        """Say that ``run_id`` will be driven again after a transient failure."""
        now = self._now_ms()
        self._write(f"{_clock(now)}  {run_id}  interrupted ({reason}), driven again")

    def _report(self, record: RunRecord) -> None:
        now = self._now_ms()
        # The position of a waiting run mentions "in 2.0s": compare on status and waits only.
        waits = tuple(w.client_waitpoint_id for w in record.pending_waitpoints)
        position = describe_position(record, now)
        signature = (record.status, repr(waits) if record.status == "waiting" else position)
        with self._lock:
            if self._last.get(record.id) == signature:
                return
            self._last[record.id] = signature
            self._last.move_to_end(record.id)
            while len(self._last) > _REMEMBERED_RUNS:
                self._last.popitem(last=False)
        line = f"{_clock(now)}  {record.id}  {record.workflow_id}  {record.status}"
        self._write(f"{line}  {position}".rstrip())
