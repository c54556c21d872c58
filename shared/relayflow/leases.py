"""Keeps a holder's lease on a run alive while an invocation of the run is in flight.

A lease lasts ``CoreSettings.lease_ms`` (a minute by default) so that a run whose holder died
is free again soon; a step may run far longer, so while the holder waits for an answer it
renews the lease every third of its length, up to the drive's own end (its budget plus the
grace). An invocation that answers within a third of the lease costs no renewal.

A renewal is a save of the run's header with only the lease (and the wake time the sweeper
reads) moved, conditional on the version this holder saved or read last: only the holder
can make it. A delivery or a cancel that saved the run in between (leaving a dirty mark)
makes it re-read the run and renew over that change; a run whose lease is no longer its own
is lost: the keeper stops renewing it and the holder saves nothing of the answer. A holder
that dies stops renewing with it, so the run falls due for the sweeper when its lease ends.

On a clock that tells when it moves (the virtual clock of tests) renewals happen in the
thread that moved it past their time; otherwise on one timer thread per engine, started when
the first invocation needs it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from relayflow.core.record import Lease, RunRecord
from relayflow.errors import StaleRunError
from relayflow.ports import Clock, ListenableClock, RunStore

_log = logging.getLogger("relayflow.leases")
_MAX_RACES = 200


class HeldLease:
    """One invocation's lease: the run as saved or read last by its holder.

    Attributes:
        record: The run as this holder last saved (or re-read) it; the answer's save is
            conditional on its version.
        lost: Another holder took the run: nothing of the answer may be saved.
        renewals: Renewal writes made so far.
    """

    def __init__(self, record: RunRecord, hold_until: int, lease_ms: int) -> None:
        lease = record.lease
        if lease is None:
            raise ValueError(f"run {record.id} is not leased")
        self.record = record
        self.owner = lease.owner
        self.hold_until = hold_until
        self.lost = False
        self.renewals = 0
        self.lease_ms = lease_ms
        self._retry_at: int | None = None

    @property
    def renew_at(self) -> int | None:
        """When the lease is renewed next (None: it already lasts as long as it may)."""
        lease = self.record.lease
        if self.lost or lease is None or lease.expires_at >= self.hold_until:
            return None
        if self._retry_at is not None:
            return self._retry_at
        # Renewed a third of the way in, so two missed renewals still leave it alive.
        return lease.expires_at - self.lease_ms + self.lease_ms // 3

    def retry_later(self, now: int) -> None:
        """A renewal failed for a passing reason: try again soon, well before expiry."""
        self._retry_at = now + max(1, self.lease_ms // 12)

    def renewed(self, record: RunRecord) -> None:
        self.record = record
        self.renewals += 1
        self._retry_at = None


class LeaseKeeper:
    """Renews the leases of the invocations in flight of one engine.

    Args:
        runs: The run store.
        clock: Time source; a :class:`~relayflow.ports.ListenableClock` renews synchronously.
        on_saved: Called with (before, after) for each renewal saved (the engine's observers).
    """

    def __init__(
        self,
        runs: RunStore,
        clock: Clock,
        on_saved: Callable[[RunRecord, RunRecord], None] | None = None,
    ) -> None:
        self._runs = runs
        self._clock = clock
        self._on_saved = on_saved
        self._held: list[HeldLease] = []
        # Held while renewals are written, so an invocation is released only between them;
        # not reentrant, so a renewal that moves a listened clock does not renew again.
        self._renewing = threading.Lock()
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None
        self._listening = False
        # Checked once: a runtime protocol check costs tens of microseconds.
        self._listenable: ListenableClock | None = (
            clock if isinstance(clock, ListenableClock) else None
        )

    @contextmanager
    def hold(self, record: RunRecord, hold_until: int, lease_ms: int) -> Iterator[HeldLease]:
        """Keep ``record``'s lease alive inside the block, renewing it to ``lease_ms`` from
        then every third of that, up to ``hold_until``.

        Leaving the block (an answer, an error, a dying process) stops the renewals; read the
        run to save from the yielded lease then.
        """
        held = HeldLease(record, hold_until, lease_ms)
        self._add(held)
        try:
            yield held
        finally:
            self._remove(held)

    # ----- registry -----------------------------------------------------------------------

    def _add(self, held: HeldLease) -> None:
        with self._changed:
            self._held.append(held)
            self._changed.notify_all()
        if self._listenable is not None:
            with self._changed:
                listen = not self._listening
                self._listening = True
            if listen:
                self._listenable.add_listener(self.renew_due)
        elif self._thread is None:
            with self._changed:
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._timer, name="relayflow-lease-keeper", daemon=True
                    )
                    self._thread.start()

    def _remove(self, held: HeldLease) -> None:
        with self._renewing, self._changed:
            self._held.remove(held)
            idle = not self._held and self._listening
            if idle:
                self._listening = False
        if idle and self._listenable is not None:
            self._listenable.remove_listener(self.renew_due)

    def _next_renewal(self) -> int | None:
        with self._changed:
            times = [at for held in self._held if (at := held.renew_at) is not None]
        return min(times) if times else None

    def _timer(self) -> None:
        """The timer thread: sleeps until the next renewal is due, for as long as it lives."""
        while True:
            with self._changed:
                at = self._next_renewal()
                if at is None:
                    self._changed.wait()
                    continue
                wait_ms = at - self._clock.now_ms()
                if wait_ms > 0:
                    self._changed.wait(wait_ms / 1000)
                    continue
            with self._renewing:
                saved = self._renew_all(self._clock.now_ms())
            self._tell(saved)

    # ----- renewals -----------------------------------------------------------------------

    def renew_due(self, now: int) -> None:
        """Renew every held lease whose renewal time is at or before ``now`` (the listener
        of a listenable clock)."""
        if not self._renewing.acquire(blocking=False):
            return  # a renewal in this thread moved the clock, or another thread renews
        try:
            saved = self._renew_all(now)
        finally:
            self._renewing.release()
        self._tell(saved)

    def _renew_all(self, now: int) -> list[tuple[RunRecord, RunRecord]]:
        """Renew the leases due at ``now``; returns each renewal as (before, after)."""
        with self._changed:
            due = [h for h in self._held if (at := h.renew_at) is not None and at <= now]
        saved: list[tuple[RunRecord, RunRecord]] = []
        for held in due:
            try:
                renewal = self._renew(held, now)
            except Exception:  # never breaks the code that moved the clock, nor the timer
                _log.exception("run %s: lease renewal failed; retrying", held.record.id)
                held.retry_later(now)
                continue
            if renewal is not None:
                saved.append(renewal)
        return saved

    def _tell(self, saved: list[tuple[RunRecord, RunRecord]]) -> None:
        # Outside the lock: an observer may drive another run, whose invocation is held.
        if self._on_saved is not None:
            for before, after in saved:
                self._on_saved(before, after)

    def _renew(self, held: HeldLease, now: int) -> tuple[RunRecord, RunRecord] | None:
        for _ in range(_MAX_RACES):
            current = held.record
            lease = current.lease
            if lease is None or lease.owner != held.owner:
                held.lost = True
                _log.warning("run %s: lease lost to another holder; stopping", current.id)
                return None
            expires_at = min(now + held.lease_ms, held.hold_until)
            if expires_at <= lease.expires_at:
                return None
            wake_at = current.wake_at
            renewed = current.model_copy(
                update={
                    "lease": Lease(owner=held.owner, expires_at=expires_at),
                    # The sweeper looks at a run in flight only once its lease has ended.
                    "wake_at": None if wake_at is None else max(wake_at, expires_at),
                }
            )
            try:
                saved = self._runs.save(renewed, expected_version=current.version)
            except StaleRunError:
                fresh = self._runs.get(current.id)
                if fresh is None or fresh.is_terminal:
                    held.lost = True
                    return None
                held.record = fresh
                continue
            held.renewed(saved)
            return current, saved
        held.retry_later(now)
        return None
