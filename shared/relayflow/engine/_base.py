"""The engine's ground floor: its wiring, observers, time limits and hand-offs, the queue
of runs one call drives, and the questions every layer asks of a record (is it due, does it
want an invocation, who holds it)."""

from __future__ import annotations

import itertools
import logging
import secrets
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import NamedTuple

from relayflow.core.record import RunRecord
from relayflow.core.settings import CoreSettings
from relayflow.costs.meter import UsageMeter
from relayflow.errors import RelayflowError, RunNotFoundError, ValidationError
from relayflow.flow.declarations import Concurrency
from relayflow.flow.ports import ConcurrencySlots, Debouncer
from relayflow.leases import LeaseKeeper
from relayflow.operations.ports import AuditLog, WorkflowPauses
from relayflow.ports import (
    AlarmClock,
    AlarmObserver,
    CheckpointLog,
    Clock,
    DispatcherResolver,
    FlowObserver,
    InvocationObserver,
    PendingDeliveries,
    RunObserver,
    RunStore,
)

_log = logging.getLogger("relayflow.engine")
#: Attempts of a conditional write that keeps losing its race before it gives up.
MAX_RACES = 200


class Limits(NamedTuple):
    """Time limits of one invocation (epoch ms)."""

    lease_until: int
    request_deadline: int
    #: The latest its lease may be renewed to: the drive's deadline plus the grace.
    hold_until: int


class Work:
    """Runs queued for driving within one call, each at most once in the queue, with the
    records just read or written for some of them (their drive starts without a read)."""

    def __init__(self, run_ids: Iterable[str] = (), *, known: Iterable[RunRecord] = ()) -> None:
        self._queue: deque[str] = deque()
        self._known = {record.id: record for record in known}
        for run_id in run_ids:
            self.add(run_id)

    def take_known(self, run_id: str) -> RunRecord | None:
        """The record last seen of ``run_id``, once (later reads go to the store)."""
        return self._known.pop(run_id, None)

    def add(self, run_id: str) -> None:
        if run_id not in self._queue:
            self._queue.append(run_id)

    def pop(self) -> str | None:
        return self._queue.popleft() if self._queue else None


class EngineBase:
    """The engine's state and the services every layer uses.

    Args:
        runs: The run store.
        alarms: The alarm clock (one alarm per run).
        dispatchers: Chooses each run's dispatcher.
        clock: Time source (virtual in tests).
        settings: Limits and timings.
        handoff: Continues a run elsewhere when one call's invocation budget is spent
            (default: arm its alarm now).
        workflow_timeout: Looks up a workflow's timeout in ms (for child runs).
        owner: Identity of this process in leases (random by default).
        checkpoints: The runs' checkpoint log, offered to step hosts so each step is durable
            before the body goes on (without one, durability is per invocation).
        pending: Where events and signals are stored until the run's record takes them
            (without one, each is saved into the record by a conditional save of its own).
        slots: The concurrency slots per (workflow, key); without them ``concurrency`` is
            not enforced.
        concurrency_of: A workflow's ``concurrency`` declaration by workflow id and the run's
            environment (None: unlimited).
        debouncer: The open bursts of debounced triggers; without one a trigger asking for
            ``debounce`` is refused.
        audit: Where operator actions are recorded across runs (each run keeps its own).
        workflow_pauses: The paused workflows; without them a workflow cannot be paused.
        usage: Where the AWS work done for each run is counted until a save carries it
            (the run store's adapters report into the same meter; see ``relayflow.costs``).
    """

    def __init__(
        self,
        *,
        runs: RunStore,
        alarms: AlarmClock,
        dispatchers: DispatcherResolver,
        clock: Clock,
        settings: CoreSettings | None = None,
        handoff: Callable[[str, int], None] | None = None,
        workflow_timeout: Callable[[str], int | None] | None = None,
        owner: str | None = None,
        checkpoints: CheckpointLog | None = None,
        pending: PendingDeliveries | None = None,
        slots: ConcurrencySlots | None = None,
        concurrency_of: Callable[[str, str], Concurrency | None] | None = None,
        debouncer: Debouncer | None = None,
        audit: AuditLog | None = None,
        workflow_pauses: WorkflowPauses | None = None,
        usage: UsageMeter | None = None,
    ) -> None:
        self.runs = runs
        self.usage = usage or UsageMeter()
        self.audit = audit
        self.workflow_pauses = workflow_pauses
        self.slots = slots
        self._concurrency_of = concurrency_of
        self.debouncer = debouncer
        self.pending = pending
        self.checkpoints = checkpoints
        if checkpoints is None and settings is not None and settings.require_per_step:
            raise ValidationError("per-step durability is required but no checkpoint log is given")
        self.alarms = alarms
        self.dispatchers = dispatchers
        self.clock = clock
        self.settings = settings or CoreSettings()
        self._handoff = handoff or alarms.arm
        self._workflow_timeout = workflow_timeout
        self._owner = owner or f"drv_{secrets.token_hex(6)}"
        self._drives = itertools.count(1)
        self._observers: list[RunObserver] = []
        # The deadline of the drive this thread is making (see ``budget``).
        self._local = threading.local()
        self._leases = LeaseKeeper(runs, clock, self._observe)

    def add_observer(self, observer: RunObserver) -> None:
        """Tell ``observer`` about every save of a run from now on (metrics, logs)."""
        self._observers.append(observer)

    def _observe(self, before: RunRecord | None, after: RunRecord) -> None:
        self._note_saved(after)
        _log_durability(before, after)
        for observer in self._observers:
            try:
                observer.on_saved(before, after)
            except Exception:  # an observer never breaks a drive
                _log.exception("run observer failed")

    def _interrupted(self, run_id: str, reason: str) -> None:
        """Tell the observers that a drive or invocation of ``run_id`` ended on a transient
        failure of relayflow's own AWS resources; the run is driven again (the next
        invocation, a lease expiry and the sweeper, an alarm or a redelivered event)."""
        _log.warning("run %s interrupted (%s); it will be driven again", run_id, reason)
        for observer in self._observers:
            try:
                observer.on_interrupted(run_id, reason)
            except Exception:  # an observer never breaks a drive
                _log.exception("run observer failed")

    def _flow_event(
        self, counter: str, run_id: str, workflow_id: str, *, queued_at: int | None = None
    ) -> None:
        """Tell the observers that count flow control (``FlowObserver``) that ``run_id`` of
        ``workflow_id`` was queued (at place ``queued_at`` of its key's queue), started from
        its queue, debounced... (``counter``, an observability name)."""
        for observer in self._observers:
            if not isinstance(observer, FlowObserver):
                continue
            try:
                observer.on_flow(counter, run_id, workflow_id, queued_at=queued_at)
            except Exception:  # an observer never breaks a drive
                _log.exception("run observer failed")

    def _alarm_fired(self, record: RunRecord, now: int) -> None:
        """Tell the observers that time (``AlarmObserver``) that the run's alarm, hand-off or
        sweep drove it at ``now``, against its stored wake time."""
        if record.wake_at is None:
            return
        for observer in self._observers:
            if not isinstance(observer, AlarmObserver):
                continue
            try:
                observer.on_alarm(record.workflow_id, max(0, now - record.wake_at))
            except Exception:  # an observer never breaks a drive
                _log.exception("run observer failed")

    def _invoked(self, record: RunRecord, started_at: int, outcome: str, failed: bool) -> None:
        """Tell the observers that hear of invocations (``InvocationObserver``) that the one
        ``record`` began, sent at ``started_at``, ended now with ``outcome``."""
        ended_at = self.clock.now_ms()
        for observer in self._observers:
            if not isinstance(observer, InvocationObserver):
                continue
            try:
                observer.on_invoked(record, started_at, ended_at, outcome, failed)
            except Exception:  # an observer never breaks a drive
                _log.exception("run observer failed")

    def _note_saved(self, saved: RunRecord) -> None:
        watched: dict[str, RunRecord] | None = getattr(self._local, "watched", None)
        if watched is not None and saved.id in watched:
            watched[saved.id] = saved

    @contextmanager
    def _watching(self, record: RunRecord) -> Iterator[dict[str, RunRecord]]:
        """Keep, for the block, the last version of ``record`` this thread saved: a drive that
        just saved a run need not read it back (and parse its whole journal) to return it."""
        watched: dict[str, RunRecord] | None = getattr(self._local, "watched", None)
        if watched is None:
            watched = self._local.watched = {}
        watched[record.id] = record
        try:
            yield watched
        finally:
            del watched[record.id]

    @property
    def owner(self) -> str:
        """This process's identity in leases."""
        return self._owner

    def new_run_id(self) -> str:
        """A fresh, time-sortable run id."""
        return f"run_{self.clock.now_ms():012x}_{secrets.token_hex(5)}"

    @contextmanager
    def budget(self, budget_ms: int) -> Iterator[None]:
        """Bound every drive this thread makes inside the block to end ``budget_ms`` from now.

        Without one, a drive gets ``settings.drive_budget_ms``. No invocation starts with less
        than ``settings.min_invocation_ms`` left: the run is handed off instead. The step
        request's deadline and the lease derive from the budget (see :meth:`_limits`).
        """
        previous: int | None = getattr(self._local, "deadline", None)
        deadline = self.clock.now_ms() + max(0, budget_ms)
        self._local.deadline = deadline if previous is None else min(previous, deadline)
        try:
            yield
        finally:
            self._local.deadline = previous

    def _limits(self, now: int) -> Limits:
        """The lease and request deadline of an invocation starting at ``now``.

        The drive may hold the run until its deadline plus a grace for saving the answer;
        its lease lasts ``lease_ms`` of that and is renewed while the invocation is in flight
        (:mod:`relayflow.leases`). The request deadline ends a grace before the hold, so the
        lease always outlasts the work done under it.
        """
        settings = self.settings
        deadline: int | None = getattr(self._local, "deadline", None)
        if deadline is None:
            deadline = now + settings.drive_budget_ms
        grace = min(settings.lease_grace_ms, settings.lease_ms // 4)
        hold_until = max(deadline, now) + grace
        return Limits(
            lease_until=min(now + settings.lease_ms, hold_until),
            request_deadline=min(now + settings.invocation_timeout_ms, hold_until - grace),
            hold_until=hold_until,
        )

    def _time_for_invocation(self, now: int) -> bool:
        return self._limits(now).request_deadline - now >= self.settings.min_invocation_ms

    @contextmanager
    def handing_off(self) -> Iterator[None]:
        """Inside the block, this thread drives nothing: every run a call would drive is
        handed off (:meth:`hand_off`) instead. For a process that must not start step code
        it cannot finish in its own time (the api function)."""
        previous = self._handing_off()
        self._local.hand_off = True
        try:
            yield
        finally:
            self._local.hand_off = previous

    def _handing_off(self) -> bool:
        return bool(getattr(self._local, "hand_off", False))

    def hand_off_or_raise(self, run_id: str) -> None:
        """Like :meth:`hand_off`, raising what the hand-off raised (for a caller that tells
        whoever started the run that the sweeper, not a drive, takes it from here)."""
        self._handoff(run_id, self.clock.now_ms())

    def hand_off(self, run_id: str) -> None:
        """Let the run be driven elsewhere now (the drive function), not in this process.

        A hand-off that fails is logged, not raised: the run is stored and due now, so the
        sweeper drives it.
        """
        try:
            self.hand_off_or_raise(run_id)
        except RelayflowError:
            _log.exception("run %s could not be handed off; the sweeper will drive it", run_id)

    def _load(self, run_id: str) -> RunRecord:
        record = self.runs.get(run_id)
        if record is None:
            raise RunNotFoundError(f"no run with id {run_id!r}")
        return record

    def _needs_attention(self, record: RunRecord, now: int) -> bool:
        if record.is_terminal:
            return False
        if self._due(record, now):
            return True
        return self.pending is not None and bool(self.pending.pending(record.id))

    def _due(self, record: RunRecord, now: int) -> bool:
        if record.dirty:
            return True
        if record.status == "paused":
            return False
        if record.timeout_deadline is not None and record.timeout_deadline <= now:
            return True
        if record.status == "running":
            retry_at = record.dispatch_retry.next_attempt_at
            return retry_at is None or retry_at <= now
        return record.wake_at is not None and record.wake_at <= now

    def _wants_invocation(self, record: RunRecord, now: int) -> bool:
        if record.is_terminal or record.status != "running":
            return False
        retry_at = record.dispatch_retry.next_attempt_at
        return retry_at is None or retry_at <= now

    def _holds(self, record: RunRecord, owner: str) -> bool:
        return record.lease is not None and record.lease.owner == owner


def _log_durability(before: RunRecord | None, after: RunRecord) -> None:
    if after.durability == "per_invocation" and (
        before is None or before.durability != "per_invocation"
    ):
        _log.info(
            "run %s (%s) is durable per invocation: its step host answered without "
            "checkpointing each step, so a crash re-runs the steps of the invocation it "
            "interrupts",
            after.id,
            after.workflow_id,
            extra={"runId": after.id, "durability": after.durability},
        )
