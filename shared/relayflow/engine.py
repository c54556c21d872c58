"""Drives runs: load -> transition -> conditional save -> effects, retrying lost races.

One driver at a time per run holds a lease (owner, expiry); whoever changes a leased run
leaves a dirty mark so the holder looks again before it lets go (DESIGN §8). Events and
signals are stored on their own first (``ports.PendingDeliveries``) and taken into the
record by the run's holder, or by the delivery itself when nobody holds the run: concurrent
deliveries never contend on the run's record while it is driven.
"""

from __future__ import annotations

import itertools
import logging
import secrets
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, NamedTuple, TypeVar

from relayflow.core.checkpoints import (
    UNAVAILABLE_REASON,
    cancel_entry,
    ended_unavailable,
    fence_entry,
    fold,
)
from relayflow.core.effects import (
    ArmAlarm,
    CancelChildren,
    ChildOutcome,
    DisarmAlarm,
    Dispatch,
    Effect,
    ResumeParent,
    StartChild,
    Transition,
)
from relayflow.core.inbox import InboxFullError, Injection, InjectionResult
from relayflow.core.interventions import cancel, child_ended, inject, on_alarm
from relayflow.core.outcome import finish, runtime_error, working_copy
from relayflow.core.pending import result_in, take
from relayflow.core.record import Lease, RunRecord
from relayflow.core.settings import CoreSettings
from relayflow.core.transitions import (
    SentInvocation,
    apply_response,
    begin_invocation,
    build_request,
    dispatch_failed,
)
from relayflow.core.trigger import TriggerSpec, new_run
from relayflow.errors import (
    CheckpointSlotTakenError,
    DispatchError,
    RelayflowError,
    RunAlreadyExistsError,
    RunNotFoundError,
    RunTerminalError,
    StaleRunError,
    StorageRefusedError,
    ValidationError,
)
from relayflow.leases import LeaseKeeper
from relayflow.ports import (
    AlarmClock,
    CheckpointLog,
    Clock,
    DispatcherResolver,
    DriveAbandoned,
    InProcessDispatcher,
    PendingDeliveries,
    RunObserver,
    RunStore,
    offering_checkpoints,
)
from relayflow.protocol import SerializedError

T = TypeVar("T")
_log = logging.getLogger("relayflow.engine")
_MAX_RACES = 200


class _Limits(NamedTuple):
    """Time limits of one invocation (epoch ms)."""

    lease_until: int
    request_deadline: int
    #: The latest its lease may be renewed to: the drive's deadline plus the grace.
    hold_until: int


class _Beginning(NamedTuple):
    """An invocation begun on an unsaved record: what to save, then what to send."""

    record: RunRecord
    #: None: the record wants no invocation after all.
    sent: SentInvocation | None
    effects: list[Effect]
    limits: _Limits


class _Begun(NamedTuple):
    """The saved answer of one invocation that also began the next one."""

    saved: RunRecord
    sent: SentInvocation
    limits: _Limits


class _Work:
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


class Engine:
    """Applies core transitions to stored runs and carries out their effects.

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
    ) -> None:
        self.runs = runs
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

    # ----- time limits --------------------------------------------------------------------

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

    def _limits(self, now: int) -> _Limits:
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
        return _Limits(
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

    # ----- entry points -------------------------------------------------------------------

    def trigger(self, spec: TriggerSpec, *, drive: bool = True) -> tuple[RunRecord, bool]:
        """Insert a run atomically and drive it inline (bounded).

        Returns:
            The run as stored after the drive and whether this call created it. A run that
            already existed (same id) is returned untouched and not driven.
        """
        if spec.timeout_ms is None and self._workflow_timeout is not None:
            spec = replace(spec, timeout_ms=self._workflow_timeout(spec.workflow_id))
        record = new_run(spec, self.clock.now_ms())
        try:
            stored = self.runs.try_insert(record)
        except RunAlreadyExistsError as exc:
            existing: RunRecord = exc.existing
            return existing, False
        self._observe(None, stored)
        if drive and self._handing_off():
            self.hand_off(stored.id)
            return stored, True
        if not drive:
            return self._load(stored.id), True
        with self._watching(stored) as watched:
            self._run(_Work([stored.id], known=[stored]))
            latest = watched[stored.id]
        # Nothing saved by this drive (another process holds the run): read what is stored.
        return (self._load(stored.id) if latest is stored else latest), True

    def inject(self, run_id: str, injection: Injection) -> tuple[InjectionResult, RunRecord]:
        """Deliver an event, signal or token outcome, then drive the run if it resumed.

        A run another process is driving is only marked dirty: its holder looks again. With
        a store of pending deliveries, an event or signal is stored there instead and taken
        by the holder before it lets go (answered ``buffered`` without waiting for it).

        Raises:
            RunNotFoundError: No such run.
            RunTerminalError: The run already ended.
            InboxFullError: The run's inbox is full.
        """
        if self.pending is not None and injection.outcome == "deliver":
            return self._inject_stored(self.pending, run_id, injection)
        work = _Work()
        settings = self.settings

        def step(rec: RunRecord, now: int) -> tuple[Transition, InjectionResult]:
            return inject(rec, injection, now, settings)

        saved, result = self._mutate(run_id, step, work)
        if self._handing_off():
            self._hand_off_work(work)
            return result, saved
        self._run(work)
        return result, self._load(run_id)

    def _inject_stored(
        self, pending: PendingDeliveries, run_id: str, injection: Injection
    ) -> tuple[InjectionResult, RunRecord]:
        """Store the delivery, then take it into a waiting run nobody holds; a run that is
        held or running is left to its drive.

        The delivery is stored before the run is read, and the holder reads the store after
        it lets go of the lease: a delivery that sees the run leased is always found.
        """
        # A repeat finds its id stored already (its first attempt died before the id was
        # taken, or is still under way): it takes it all the same, so a delivery whose
        # process died mid-way is completed by the client's retry, never left stored.
        pending.post(run_id, injection.to_item(self.clock.now_ms()))
        work = _Work()
        looked_again = False
        for _ in range(_MAX_RACES):
            found = self.runs.get(run_id)
            if found is None:
                pending.remove(run_id, [injection.id])
                raise RunNotFoundError(f"no run with id {run_id!r}")
            record = found
            now = self.clock.now_ms()
            held = result_in(record, injection.id)
            if held is not None:
                # Taken by another save since it was stored (or by an earlier delivery of
                # the same id, whose repeat the next taker drops as seen).
                return held, record
            if record.is_terminal:
                pending.remove(run_id, [injection.id])
                inject(record, injection, now, self.settings)  # raises: it ended
            lease = record.lease
            if (lease is not None and lease.expires_at > now) or record.status == "running":
                # The holder takes it; a running run nobody holds yet is due for a drive
                # (handed off, or the sweeper's), which takes it first.
                return InjectionResult("buffered"), record
            stored = pending.pending(run_id)
            if all(item.id != injection.id for item in stored):
                if not looked_again:
                    # Taken by a repeat of this delivery since the run was read: the run
                    # read again holds its result.
                    looked_again = True
                    continue
                raise InboxFullError(f"run {run_id} has no room for {injection.id!r}")
            taken = take(record, stored, now, self.settings)
            if injection.id in taken.refused:
                pending.remove(run_id, [injection.id])
                raise InboxFullError(f"run {run_id}'s inbox is full")
            saved = record
            if taken.transition.changed:
                try:
                    saved = self.runs.save(taken.transition.record, expected_version=record.version)
                except StaleRunError:
                    continue
                self._observe(record, saved)
            pending.remove(run_id, [*taken.results, *taken.seen])
            self._apply_effects(taken.transition.effects, work)
            result = taken.results.get(injection.id) or result_in(saved, injection.id)
            if result is None:
                continue
            if self._handing_off():
                self._hand_off_work(work)
                return result, saved
            self._run(work)
            return result, self._load(run_id)
        raise StaleRunError(f"run {run_id} kept changing; gave up after {_MAX_RACES} attempts")

    def cancel(
        self, run_id: str, *, reason: str | None = None, compensate: bool = False
    ) -> RunRecord:
        """Cancel a run (and its attached children), optionally compensating first.

        Raises:
            RunNotFoundError: No such run.
            RunTerminalError: The run already ended (code ``already_terminal``).
        """
        work = _Work()
        saved, _ = self._mutate(
            run_id, lambda rec, now: (cancel(rec, reason, compensate, now), None), work
        )
        self._deliver_cancel(saved)
        if self._handing_off():
            self._hand_off_work(work)
            return saved
        self._run(work)
        return self._load(run_id)

    def _deliver_cancel(self, record: RunRecord) -> None:
        """Tell a host running the run, at its next checkpoint, that the run was cancelled.

        A cancel entry takes the next free slot of the log, so the host's next checkpoint
        fails its condition and the host stops the body there (and compensates when asked).
        A plain cancel ends the run at once; the entry stops the host from running steps
        whose results nobody will keep.
        """
        if self.checkpoints is None or not record.checkpoint_open:
            return
        directive = record.cancel_request
        if directive is not None:
            reason, compensate = directive.reason, directive.compensate
        elif record.status == "cancelled":
            reason, compensate = (record.error.message if record.error else None), False
        else:
            return
        seq = record.checkpoint_seq + 1
        for _ in range(_MAX_RACES):
            seq += len(self.checkpoints.read(record.id, seq - 1))
            try:
                self.checkpoints.append(record.id, cancel_entry(seq, reason, compensate))
                return
            except CheckpointSlotTakenError:
                continue

    def drive(self, run_id: str, *, take_over: bool = False) -> RunRecord | None:
        """Drive a run until it parks, ends or the inline budget is spent.

        Args:
            run_id: The run.
            take_over: Take the lease even if another driver holds it (crash recovery of a
                driver known to be dead).
        """
        self._run(_Work([run_id]), take_over=run_id if take_over else None)
        return self.runs.get(run_id)

    def drive_from_event(self, event: Mapping[str, Any]) -> RunRecord | None:
        """Handle an alarm or hand-off payload ``{"runId", "wakeAt"}``.

        Early and duplicate alarms are harmless: a run with nothing due only gets its alarm
        re-armed at its wake time.
        """
        run_id = event.get("runId")
        if not isinstance(run_id, str) or not run_id:
            raise ValidationError(f"alarm payload needs a runId string, got {dict(event)!r}")
        record = self.runs.get(run_id)
        if record is None or record.is_terminal:
            return record
        now = self.clock.now_ms()
        if not self._needs_attention(record, now):
            if record.wake_at is not None and record.lease is None:
                self.alarms.arm(run_id, record.wake_at)
            return record
        self._run(_Work([run_id], known=[record]))
        return self.runs.get(run_id)

    def sweep(self, now: int | None = None, *, limit: int = 100) -> list[str]:
        """Re-drive runs whose wake time passed (missed alarms, dead drivers); returns ids.

        A run in flight is due only once its lease has expired (its wake time is the lease's
        end), so runs being driven never crowd out a run whose alarm was lost. A run found
        leased by a live driver is left alone (no dirty mark), judged from its header alone.
        Once the drive's budget is spent, the remaining due runs are handed off rather than
        driven here.
        """
        before = self.clock.now_ms() if now is None else now
        due = self.runs.due_runs(before, limit)
        for run_id in due:
            if self._in_flight(run_id):
                continue
            if self._time_for_invocation(self.clock.now_ms()):
                self._run(_Work([run_id]), mark_leased=False)
            else:
                self.hand_off(run_id)
        return due

    def _in_flight(self, run_id: str) -> bool:
        """Leased by a live driver (or gone): judged from the header alone, so the sweeper
        does not read the whole of every run in flight (their wake entry may be due) on
        each pass."""
        header = self.runs.get_header(run_id)
        if header is None or header.is_terminal:
            return True
        lease = header.lease
        return lease is not None and lease.expires_at > self.clock.now_ms()

    def recover(self, run_id: str) -> RunRecord | None:
        """Re-drive a run whose driver died, from its last saved record."""
        return self.drive(run_id, take_over=True)

    # ----- store access -------------------------------------------------------------------

    def _load(self, run_id: str) -> RunRecord:
        record = self.runs.get(run_id)
        if record is None:
            raise RunNotFoundError(f"no run with id {run_id!r}")
        return record

    def _mutate(
        self,
        run_id: str,
        step: Callable[[RunRecord, int], tuple[Transition, T]],
        work: _Work,
    ) -> tuple[RunRecord, T]:
        """Apply ``step`` to the stored run with a conditional save, retrying lost races."""
        for _ in range(_MAX_RACES):
            record = self._load(run_id)
            now = self.clock.now_ms()
            transition, extra = step(record, now)
            if not transition.changed:
                self._apply_effects(transition.effects, work)
                return record, extra
            new = transition.record
            lease = record.lease
            if lease is not None and lease.expires_at > now:
                new = new.model_copy(update={"dirty": True})
            try:
                saved = self.runs.save(new, expected_version=record.version)
            except StaleRunError:
                continue
            self._observe(record, saved)
            self._apply_effects(transition.effects, work)
            return saved, extra
        raise StaleRunError(f"run {run_id} kept changing; gave up after {_MAX_RACES} attempts")

    # ----- effects ------------------------------------------------------------------------

    def _hand_off_work(self, work: _Work) -> None:
        """Hand off every queued run that is not leased by a live driver (whose holder looks
        again because of the dirty mark)."""
        while (run_id := work.pop()) is not None:
            record = work.take_known(run_id) or self.runs.get(run_id)
            if record is None or record.is_terminal:
                continue
            lease = record.lease
            if lease is not None and lease.expires_at > self.clock.now_ms():
                continue
            self.hand_off(run_id)

    def _apply_effects(
        self, effects: Iterable[Effect], work: _Work, *, driving: str | None = None
    ) -> None:
        """Apply every effect, even when an earlier one failed; then raise the first failure.

        Each effect is idempotent, and the run's state is already saved: a failed one is
        repaired by a retry or the sweeper, a skipped one would be lost.
        """
        failure: Exception | None = None
        for effect in effects:
            try:
                self._apply_effect(effect, work, driving)
            except Exception as exc:
                _log.exception("effect %s failed", type(effect).__name__)
                failure = failure or exc
        if failure is not None:
            raise failure

    def _apply_effect(self, effect: Effect, work: _Work, driving: str | None) -> None:
        if isinstance(effect, Dispatch):
            if effect.run_id != driving:
                work.add(effect.run_id)
        elif isinstance(effect, ArmAlarm):
            self.alarms.arm(effect.run_id, effect.wake_at)
        elif isinstance(effect, DisarmAlarm):
            self.alarms.disarm(effect.run_id, effect.wake_at)
        elif isinstance(effect, StartChild):
            self._start_child(effect, work)
        elif isinstance(effect, ResumeParent):
            self._resume_parent(effect, work)
        else:
            self._cancel_children(effect, work)

    def _start_child(self, effect: StartChild, work: _Work) -> None:
        spec = effect.spec
        if spec.timeout_ms is None and self._workflow_timeout is not None:
            spec = replace(spec, timeout_ms=self._workflow_timeout(spec.workflow_id))
        try:
            child = new_run(spec, self.clock.now_ms())
        except ValidationError as exc:
            if not effect.detached:
                failure = ChildOutcome(
                    spec.run_id, "failed", error=_error_of(exc, "child_run_unresolvable")
                )
                self._resume_parent(
                    ResumeParent(effect.parent_run_id, effect.waitpoint_id, failure), work
                )
            return
        # A periodic check expects the child to exist: a read costs less than an insert
        # refused by its condition.
        existing = self.runs.get(spec.run_id) if effect.reconcile else None
        if existing is not None:
            self._child_exists(effect, existing, work)
            return
        try:
            inserted = self.runs.try_insert(child)
        except RunAlreadyExistsError as exc:
            self._child_exists(effect, exc.existing, work)
            return
        self._observe(None, inserted)
        work.add(spec.run_id)

    def _child_exists(self, effect: StartChild, existing: RunRecord, work: _Work) -> None:
        """A child to start is there already: an ended one resumes its parent (again)."""
        if existing.is_terminal:
            if not effect.detached:
                outcome = ChildOutcome(
                    existing.id, existing.status, existing.output, existing.error
                )
                self._resume_parent(
                    ResumeParent(effect.parent_run_id, effect.waitpoint_id, outcome), work
                )
            return
        if not effect.reconcile or self._needs_attention(existing, self.clock.now_ms()):
            # A child inserted by a process that died before driving it is driven here.
            work.add(existing.id)

    def _resume_parent(self, effect: ResumeParent, work: _Work) -> None:
        def step(rec: RunRecord, now: int) -> tuple[Transition, None]:
            return child_ended(rec, effect.waitpoint_id, effect.outcome, now), None

        try:
            self._mutate(effect.parent_run_id, step, work)
        except RunNotFoundError:
            return

    def _cancel_children(self, effect: CancelChildren, work: _Work) -> None:
        for child_id in effect.run_ids:
            try:
                self._mutate(
                    child_id,
                    lambda rec, now: (cancel(rec, effect.reason, effect.compensate, now), None),
                    work,
                )
            except (RunNotFoundError, RunTerminalError):
                continue

    # ----- driving ------------------------------------------------------------------------

    def _run(self, work: _Work, *, take_over: str | None = None, mark_leased: bool = True) -> None:
        with self.budget(self.settings.drive_budget_ms):
            try:
                while (run_id := work.pop()) is not None:
                    try:
                        self._drive_one(
                            run_id, work, take_over=run_id == take_over, mark_leased=mark_leased
                        )
                    except RelayflowError as exc:
                        # Throttled or unavailable storage: nothing unsaved is lost, the
                        # caller's retry or the sweeper drives the run again.
                        if getattr(exc, "transient", False):
                            self._interrupted(run_id, exc.code)
                        raise
            except DriveAbandoned:
                # The process died: nothing more is saved; a new process has a new identity.
                self._owner = f"drv_{secrets.token_hex(6)}"

    def _needs_attention(self, record: RunRecord, now: int) -> bool:
        if record.is_terminal:
            return False
        if self._due(record, now):
            return True
        return self.pending is not None and bool(self.pending.pending(record.id))

    def _due(self, record: RunRecord, now: int) -> bool:
        if record.dirty:
            return True
        if record.timeout_deadline is not None and record.timeout_deadline <= now:
            return True
        if record.status == "running":
            retry_at = record.dispatch_retry.next_attempt_at
            return retry_at is None or retry_at <= now
        return record.wake_at is not None and record.wake_at <= now

    def _acquire(
        self,
        run_id: str,
        owner: str,
        take_over: bool,
        known: RunRecord | None = None,
        *,
        mark_leased: bool = True,
    ) -> tuple[RunRecord, RunRecord] | None:
        """The stored run and an unsaved copy leased to ``owner``, or None if not ours to drive.

        The lease is written by the first save of the drive, together with whatever that save
        carries (an alarm's resolutions, the next invocation): it is never a write of its own.
        A run leased by a live driver is marked dirty instead, so its holder looks again.
        """
        for _ in range(_MAX_RACES):
            # A record known from this call may be stale: the conditional save catches that.
            record, known = (known, None) if known is not None else (self.runs.get(run_id), None)
            now = self.clock.now_ms()
            if record is None or record.is_terminal:
                return None
            lease = record.lease
            ours = lease is not None and lease.owner == owner
            if not ours and not take_over and not self._needs_attention(record, now):
                return None
            if lease is not None and lease.expires_at > now and not (ours or take_over):
                if record.dirty or not mark_leased:
                    return None
                marked = record.model_copy(update={"dirty": True})
                try:
                    self._note_saved(self.runs.save(marked, expected_version=record.version))
                except StaleRunError:
                    continue
                return None
            leased = record.model_copy(
                update={
                    "lease": Lease(owner=owner, expires_at=self._limits(now).lease_until),
                    "dirty": False,
                }
            )
            return record, leased
        return None

    def _drive_one(
        self, run_id: str, work: _Work, *, take_over: bool = False, mark_leased: bool = True
    ) -> None:
        """Drive one run: every save carries all the changes made since the previous one.

        Changes accumulate on an unsaved draft and are saved (conditionally on the stored
        version) only before something leaves the process: a dispatch, or letting go of the
        lease. Effects are applied only after the save that carries their transition; a lost
        race drops the draft and starts again from the stored run.
        """
        owner = f"{self._owner}/{next(self._drives)}"
        claimed = self._acquire(
            run_id, owner, take_over, work.take_known(run_id), mark_leased=mark_leased
        )
        invocations = 0
        while claimed is not None:
            stored, draft = claimed
            now = self.clock.now_ms()
            effects: list[Effect] = []
            if not draft.is_terminal and not self._wants_invocation(draft, now):
                # A run due for an invocation anyway takes what was stored when it next
                # waits, or after it lets go (see _look_again): one read less per invocation.
                draft = self._take_stored(draft, now, effects)
                tick = on_alarm(draft, now, self.settings)
                if tick.changed:
                    draft = tick.record
                    effects.extend(tick.effects)
            if self._wants_invocation(draft, now):
                if invocations < self.settings.inline_invocations and self._time_for_invocation(
                    now
                ):
                    more = self.settings.inline_invocations - invocations - 1
                    claimed, made = self._invoke(stored, draft, effects, owner, work, more=more)
                    invocations += made
                    continue
                self._handoff(run_id, now)
            claimed = self._let_go(stored, draft, effects, owner, work)

    def _take_stored(self, draft: RunRecord, now: int, effects: list[Effect]) -> RunRecord:
        """Take the run's stored deliveries into the draft; they are removed from the store
        once a save carries them (see :meth:`_save`)."""
        if self.pending is None:
            return draft
        stored = self.pending.pending(draft.id)
        if not stored:
            return draft
        taken = take(draft, stored, now, self.settings)
        if taken.refused:
            _log.warning(
                "run %s: inbox full, stored deliveries %s dropped", draft.id, taken.refused
            )
        self._settling(draft.id).update(taken.settled)
        effects.extend(taken.transition.effects)
        return taken.transition.record

    def _settling(self, run_id: str) -> set[str]:
        """Stored deliveries of ``run_id`` the next save of this thread's drive carries."""
        settling: dict[str, set[str]] | None = getattr(self._local, "settling", None)
        if settling is None:
            settling = self._local.settling = {}
        return settling.setdefault(run_id, set())

    def _settled(self, run_id: str, saved: bool) -> None:
        settling: dict[str, set[str]] = getattr(self._local, "settling", {})
        ids = settling.pop(run_id, set())
        if saved and ids and self.pending is not None:
            self.pending.remove(run_id, ids)

    def _look_again(self, released: RunRecord, owner: str) -> tuple[RunRecord, RunRecord] | None:
        """After letting go: a delivery stored while the run was held is taken now (it saw
        the lease, so it left the run to its holder). An ended run takes nothing more."""
        if self.pending is None or released.is_terminal:
            return None
        if not self.pending.pending(released.id):
            return None
        return self._acquire(released.id, owner, take_over=False)

    def _wants_invocation(self, record: RunRecord, now: int) -> bool:
        if record.is_terminal or record.status != "running":
            return False
        retry_at = record.dispatch_retry.next_attempt_at
        return retry_at is None or retry_at <= now

    def _save(self, old: RunRecord, new: RunRecord) -> RunRecord | None:
        """Save ``new`` over ``old``; None when the race was lost (or the save was refused
        for good, in which case the run has been failed)."""
        if new == old:
            self._settled(old.id, saved=True)
            return old
        try:
            saved = self.runs.save(new, expected_version=old.version)
        except StaleRunError:
            self._settled(old.id, saved=False)
            return None
        except RelayflowError as exc:
            self._settled(old.id, saved=False)
            if getattr(exc, "transient", False):
                raise
            self._fail_unsaveable(old, exc)
            return None
        self._settled(old.id, saved=True)
        self._observe(old, saved)
        return saved

    def _fail_unsaveable(self, stored: RunRecord, exc: RelayflowError) -> None:
        """The store refused a save for a reason no retry fixes: end the run ``failed`` from
        its last saved state, instead of leaving it leased and re-driven after every lease
        expiry. The code is the storage's own when it names what was refused (a permission,
        a size limit), else ``run_save_refused``."""
        rec = working_copy(stored)
        message = f"the run could not be saved: {exc.message}"
        code = exc.code if isinstance(exc, StorageRefusedError) else "run_save_refused"
        effects = finish(rec, "failed", self.clock.now_ms(), error=runtime_error(code, message))
        rec.lease = None
        rec.dirty = False
        try:
            saved = self.runs.save(rec, expected_version=stored.version)
        except StaleRunError:
            return
        _log.error("run %s failed: %s", stored.id, message)
        self._observe(stored, saved)
        self._apply_effects(effects, _Work(), driving=stored.id)

    def _let_go(
        self,
        stored: RunRecord,
        draft: RunRecord,
        effects: list[Effect],
        owner: str,
        work: _Work,
    ) -> tuple[RunRecord, RunRecord] | None:
        """Save the draft without the lease; if the run was marked dirty, look again instead."""
        if stored.dirty:
            saved = self._save(stored, draft.model_copy(update={"dirty": False}))
            if saved is None:
                return self._acquire(stored.id, owner, take_over=False)
            self._apply_effects(effects, work, driving=stored.id)
            return saved, saved
        saved = self._save(stored, draft.model_copy(update={"lease": None}))
        if saved is None:
            return self._acquire(stored.id, owner, take_over=False)
        self._apply_effects(effects, work, driving=stored.id)
        return self._look_again(saved, owner)

    def _invoke(
        self,
        stored: RunRecord,
        draft: RunRecord,
        effects: list[Effect],
        owner: str,
        work: _Work,
        *,
        more: int,
    ) -> tuple[tuple[RunRecord, RunRecord] | None, int]:
        """Save the draft with the invocation begun, dispatch it, and settle the answer; and
        the invocations made.

        ``more``: how many further invocations may follow at once. An answer that leaves the
        run due for one is saved together with the next invocation's beginning, so an
        invocation costs one save, not two.
        """
        if self.checkpoints is not None and draft.checkpoint_open:
            draft = self._fence(draft)
        begun = self._begin(draft, owner)
        saved = self._save(stored, begun.record)
        if saved is None:
            return self._acquire(stored.id, owner, take_over=False), 1
        self._apply_effects([*effects, *begun.effects], work, driving=stored.id)
        sent, limits, made = begun.sent, begun.limits, 1
        while sent is not None:
            settled = self._dispatch(saved, sent, limits, owner, work, then_begin=made <= more)
            if not isinstance(settled, _Begun):
                return settled, made
            saved, sent, limits = settled
            made += 1
        return (saved, saved), made

    def _begin(self, draft: RunRecord, owner: str) -> _Beginning:
        """The draft with an invocation begun and leased to ``owner`` for it."""
        now = self.clock.now_ms()
        limits = self._limits(now)
        lease_until = limits.lease_until
        start, sent = begin_invocation(draft, now, self.settings)
        # While leased, the run is due for the sweeper only once the lease has expired.
        wake_at = start.record.wake_at
        record = start.record.model_copy(
            update={
                "lease": Lease(owner=owner, expires_at=lease_until),
                "wake_at": None if wake_at is None else max(wake_at, lease_until),
                "checkpoint_open": self.checkpoints is not None,
            }
        )
        return _Beginning(record, sent, list(start.effects), limits)

    def _begin_next(self, record: RunRecord, now: int, owner: str) -> _Beginning | None:
        """The next invocation begun on a settled answer, if the run is due for one now (as
        the drive loop would find it); None otherwise."""
        effects: list[Effect] = []
        tick = on_alarm(record, now, self.settings)
        if tick.changed:
            record = tick.record
            effects.extend(tick.effects)
        if not self._wants_invocation(record, now) or not self._time_for_invocation(now):
            return None
        begun = self._begin(record, owner)
        return begun._replace(effects=[*effects, *begun.effects])

    def _dispatch(
        self,
        saved: RunRecord,
        sent: SentInvocation,
        limits: _Limits,
        owner: str,
        work: _Work,
        *,
        then_begin: bool,
    ) -> tuple[RunRecord, RunRecord] | _Begun | None:
        """Send the invocation ``saved`` began and settle the host's answer."""
        request = build_request(
            saved,
            sent.started_at,
            self.settings,
            deadline=limits.request_deadline,
            checkpoints=self.checkpoints is not None,
        ).to_wire()
        dispatcher = self.dispatchers.resolve(
            workflow_id=saved.workflow_id, tenant_script=saved.tenant_meta.tenant_script
        )
        answer: tuple[int, Any] | None = None
        failure: DispatchError | None = None
        with self._leases.hold(saved, limits.hold_until, self.settings.lease_ms) as held:
            try:
                with offering_checkpoints(self.checkpoints):
                    if isinstance(dispatcher, InProcessDispatcher):
                        answer = dispatcher.dispatch_in_process(request)
                    else:
                        answer = dispatcher.dispatch(request)
            except DispatchError as exc:
                failure = exc
            except Exception as exc:
                # An unexpected dispatcher failure is treated like an unreachable host:
                # retried with backoff, then the run fails with handler_error naming it.
                failure = DispatchError(
                    f"dispatcher failed: {type(exc).__name__}: {exc}", transient=True
                )
        if held.lost:
            # Another driver took the run (and fenced the host off): nothing here is saved.
            return None
        if answer is not None and ended_unavailable(answer[1]):
            self._interrupted(saved.id, UNAVAILABLE_REASON)
        return self._settle_answer(
            held.record, owner, sent, answer, failure, work, then_begin=then_begin
        )

    def _fence(self, draft: RunRecord) -> RunRecord:
        """Fold what the previous invocation's host made durable, then fence that host off.

        The previous answer was never applied (a crash, a lost lease, a transport failure):
        its host may still be writing. The fence takes the next free slot, so that host's
        next checkpoint is refused; entries it wrote before the fence are kept.
        """
        assert self.checkpoints is not None
        folded = working_copy(draft)
        for _ in range(_MAX_RACES):
            fold(folded, self.checkpoints.read(folded.id, folded.checkpoint_seq))
            fence = fence_entry(folded.checkpoint_seq + 1)
            try:
                self.checkpoints.append(folded.id, fence)
            except CheckpointSlotTakenError:
                continue
            folded.checkpoint_seq = fence.seq
            return folded
        raise StaleRunError(f"run {draft.id}: could not fence its checkpoint log")

    def _settle_answer(
        self,
        current: RunRecord | None,
        owner: str,
        sent: SentInvocation,
        answer: tuple[int, Any] | None,
        failure: DispatchError | None,
        work: _Work,
        *,
        then_begin: bool = False,
    ) -> tuple[RunRecord, RunRecord] | _Begun | None:
        """Save the host's answer; when nothing is left to do, let go of the lease with it.

        ``then_begin``: when the answer leaves the run due for another invocation, the same
        save begins it (see :meth:`_invoke`).
        """
        run_id = current.id if current is not None else ""
        if answer is not None and _is_fenced(answer):
            # Another driver fenced the host off: the run is theirs, nothing here is saved.
            return None
        for _ in range(_MAX_RACES):
            if current is None or not self._holds(current, owner):
                return None
            now = self.clock.now_ms()
            if answer is not None:
                transition = apply_response(current, answer[0], answer[1], sent, now, self.settings)
            else:
                assert failure is not None
                transition = dispatch_failed(
                    current,
                    sent,
                    str(failure),
                    transient=failure.transient,
                    now=now,
                    settings=self.settings,
                )
            new = transition.record
            done = (
                not current.dirty
                and not self._wants_invocation(new, now)
                and (new.is_terminal or not on_alarm(new, now, self.settings).changed)
            )
            if done:
                new = new.model_copy(update={"lease": None})
            following = self._begin_next(new, now, owner) if then_begin and not done else None
            saved = self._save(current, following.record if following is not None else new)
            if saved is None:
                current = self.runs.get(run_id)
                continue
            effects = [*transition.effects, *(following.effects if following else ())]
            self._apply_effects(effects, work, driving=current.id)
            if following is not None and following.sent is not None:
                return _Begun(saved, following.sent, following.limits)
            return self._look_again(saved, owner) if done else (saved, saved)
        raise StaleRunError(f"run {run_id} kept changing; gave up after {_MAX_RACES} attempts")

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


def _is_fenced(answer: tuple[int, Any]) -> bool:
    status, body = answer
    return status == 409 and isinstance(body, dict) and body.get("error") == "checkpoint_fenced"


def _error_of(exc: RelayflowError, code: str) -> SerializedError:
    return SerializedError(category="RUNTIME_ERROR", code=code, message=exc.message)
