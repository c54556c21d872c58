"""Attempts given up at their timeout whose code runs on, and when that code really ended.

An attempt given up at its timeout fails with ``TIMEOUT`` at once, but its code runs on in
its thread (Python cannot stop one). While it runs, :data:`ABANDONED` holds it, per step, so
that the step's next attempt in this process is not started beside it. When that code
returns or raises, the moment and the way are kept in :data:`OVERRUNS`, per run, until an
invocation of the run in this process journals them on the failed attempt
(``abandoned_ended_at``/``abandoned_outcome``) with its next checkpoint or answer. The
step's outcome never changes: only the history gains the fact.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from relayflow.protocol import AbandonedOutcome, Journal

#: Runs whose facts are kept at most: a run never driven again in this process gives its
#: place to newer ones, so a long-lived host holds a bounded number of them.
MAX_RUNS = 1_000


@dataclass(frozen=True)
class Overrun:
    """The code of attempt ``attempt`` of the step at ``key`` ended at ``ended_at``."""

    key: str
    attempt: int
    ended_at: int
    outcome: AbandonedOutcome


class Overruns:
    """Facts not journalled yet, per run (thread-safe: abandoned threads add them)."""

    def __init__(self, max_runs: int = MAX_RUNS) -> None:
        self._lock = threading.Lock()
        self._max_runs = max_runs
        self._by_run: OrderedDict[str, list[Overrun]] = OrderedDict()

    def add(self, run_id: str, fact: Overrun) -> None:
        """Keep ``fact`` for the next invocation of ``run_id``."""
        with self._lock:
            self._by_run.setdefault(run_id, []).append(fact)
            self._by_run.move_to_end(run_id)
            while len(self._by_run) > self._max_runs:
                self._by_run.popitem(last=False)

    def take(self, run_id: str) -> list[Overrun]:
        """The facts kept for ``run_id``, which are forgotten here."""
        with self._lock:
            return self._by_run.pop(run_id, [])


#: This process's facts.
OVERRUNS = Overruns()


class AbandonedAttempts:
    """Attempts given up at their timeout whose code still runs in this process, per step
    (keyed by the step's idempotency key; thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[str, threading.Event] = {}

    def keep(self, step: str, done: threading.Event) -> None:
        """``step``'s abandoned code runs until ``done`` is set."""
        with self._lock:
            self._running[step] = done

    def release(self, step: str, done: threading.Event) -> None:
        """The code that ``done`` stands for ended."""
        with self._lock:
            if self._running.get(step) is done:
                del self._running[step]

    def running(self, step: str) -> bool:
        """Whether abandoned code of ``step`` still runs here."""
        with self._lock:
            running = self._running.get(step)
        return running is not None and not running.is_set()

    def wait_clear(self, step: str, timeout_s: float) -> bool:
        """True when no abandoned code of ``step`` runs (after waiting up to ``timeout_s``)."""
        with self._lock:
            running = self._running.get(step)
        return running is None or running.wait(timeout_s)


#: This process's abandoned attempts.
ABANDONED = AbandonedAttempts()


def overrun_grace_ms(timeout_ms: int, cap_ms: int) -> int:
    """How long after an attempt was given up at its timeout the step's next attempt may
    wait for its code: twice the timeout, at most ``cap_ms``."""
    return max(0, min(2 * timeout_ms, cap_ms))


def journal_overruns(journal: Journal, facts: list[Overrun]) -> list[str]:
    """Write each fact on its timed-out attempt in ``journal`` (in place); the keys changed.

    A fact whose attempt the journal does not hold as failed (another host drove the run
    since) is dropped.
    """
    changed: list[str] = []
    for fact in facts:
        entry = journal.step_results.get(fact.key)
        if entry is None:
            continue
        for attempt in entry.attempts:
            if attempt.attempt == fact.attempt and attempt.status == "err":
                attempt.abandoned_ended_at = fact.ended_at
                attempt.abandoned_outcome = fact.outcome
                if fact.key not in changed:
                    changed.append(fact.key)
                break
    return changed
