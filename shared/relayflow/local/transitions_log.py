"""One readable console line per run transition, from the engine's saves (a run observer).

The wrapper sees every insert and conditional save; it prints a line when a run's status or
the step/wait it is at changes (lease-only saves stay quiet), and each failed step attempt's
type and traceback once, when the attempt is first saved (replays journal it again).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

from relayflow.cli.render import compact_json, format_duration, stack_lines
from relayflow.core.record import RunRecord
from relayflow.protocol import SerializedError, StepJournalEntry

#: Runs whose last line is remembered (the oldest are forgotten first).
_REMEMBERED_RUNS = 10_000
#: Failed attempts whose traceback was printed, remembered so that a replay stays quiet.
_REMEMBERED_FAILURES = 10_000


def _clock(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%H:%M:%S")


def describe_position(record: RunRecord, now_ms: int) -> str:
    """Where the run is: the waits it is parked on, its last step, or how it ended."""
    if record.status == "completed":
        return f"output {compact_json(record.output, 100)}"
    if record.error is not None and record.is_terminal:
        error = record.error
        # A code the user gave says more than the type; UNKNOWN says less.
        label = error.code if error.code != "UNKNOWN" or not error.name else error.name
        return f"error {label}: {error.message}"[:160]
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
        self._failures: OrderedDict[tuple[str, str, int], None] = OrderedDict()
        self._lock = threading.Lock()

    def on_saved(self, before: RunRecord | None, after: RunRecord) -> None:
        """Report ``after`` if its status or position changed since the last line, and the
        step attempts that failed since ``before``."""
        self._report_failures(before, after)
        self._report(after)

    def _report_failures(self, before: RunRecord | None, after: RunRecord) -> None:
        old = before.journal.step_results if before is not None else {}
        for step_id, entry in after.journal.step_results.items():
            previous = old.get(step_id)
            if previous is entry or (previous is not None and previous.attempts == entry.attempts):
                continue
            for attempt, error in _failed_attempts(entry):
                if self._first_time((after.id, step_id, attempt)):
                    head = f"{_clock(self._now_ms())}  {after.id}  step {step_id} attempt {attempt}"
                    self._write(describe_failure(head, error))

    def _first_time(self, failure: tuple[str, str, int]) -> bool:
        with self._lock:
            if failure in self._failures:
                return False
            self._failures[failure] = None
            while len(self._failures) > _REMEMBERED_FAILURES:
                self._failures.popitem(last=False)
            return True

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


def describe_failure(head: str, error: SerializedError) -> str:
    """``<head> failed: KeyError: 'id'`` and the traceback, indented."""
    kind = error.name or error.code
    lines = [f"{head} failed: {kind}: {error.message}"[:400]]
    lines += ["    " + line for line in stack_lines(error.stack or "", verbose=True)]
    return "\n".join(lines)


def _failed_attempts(entry: StepJournalEntry) -> Iterator[tuple[int, SerializedError]]:
    for attempt in entry.attempts:
        if attempt.status == "err" and attempt.error is not None:
            yield attempt.attempt, attempt.error
