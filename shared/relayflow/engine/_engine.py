"""The engine's entry points (trigger, deliver, cancel, drive, sweep) and the drive loop."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from relayflow.core.deferred import deferred
from relayflow.core.effects import Effect, Transition
from relayflow.core.inbox import Injection, InjectionResult
from relayflow.core.interventions import cancel, inject, on_alarm
from relayflow.core.operations import applied, note, pause, redrive, resume, upgrade
from relayflow.core.pending import result_in, take, waits_on_timers_only
from relayflow.core.record import NOT_STARTED, RunAction, RunRecord
from relayflow.core.trigger import TriggerSpec, new_run
from relayflow.costs.usage import RunUsage
from relayflow.engine._base import MAX_RACES, Work
from relayflow.engine._deferred import TrailingBurst
from relayflow.engine._invocation import InvocationCycle
from relayflow.engine._operations import RunOperations, action_at, linked_rerun
from relayflow.errors import (
    DriveAbandoned,
    InboxFullError,
    RelayflowError,
    RunAlreadyExistsError,
    RunNotFoundError,
    StaleRunError,
    ValidationError,
)
from relayflow.ports import PendingDeliveries
from relayflow.protocol import RetryOverride

_log = logging.getLogger("relayflow.engine")


#: ``input`` of :meth:`Engine.rerun` that keeps the original run's input.
KEEP_INPUT: Any = object()


class Engine(RunOperations, InvocationCycle):
    """Applies core transitions to stored runs and carries out their effects (see
    :class:`~relayflow.engine._base.EngineBase` for its arguments)."""

    def trigger(self, spec: TriggerSpec, *, drive: bool = True) -> tuple[RunRecord, bool]:
        """Insert a run atomically and drive it inline (bounded).

        Flow control applies first (see ``_deferred`` and ``_concurrency``): a debounced
        trigger joins its burst's run; a run with ``delay`` is inserted ``delayed``; a run of
        a workflow with ``concurrency`` is inserted ``queued`` and starts here only if it
        takes a slot; a run of a paused workflow is inserted ``paused``.

        Returns:
            The run as stored after the drive and whether this call created it. A run that
            already existed (same id, or the burst a debounced trigger joined) is returned
            untouched and not driven.
        """
        with self.usage.working_on(spec.run_id, invocation=True):
            stored, created = self._trigger(spec, drive=drive)
        if stored.id != spec.run_id:
            # A debounced trigger joined another run's burst: its work is that run's.
            self.usage.add(stored.id, self.usage.drop(spec.run_id))
        return stored, created

    def _trigger(self, spec: TriggerSpec, *, drive: bool) -> tuple[RunRecord, bool]:
        if spec.timeout_ms is None and self._workflow_timeout is not None:
            spec = replace(spec, timeout_ms=self._workflow_timeout(spec.workflow_id))
        now = self.clock.now_ms()
        if spec.flow is not None and spec.flow.debounce is not None:
            # An idempotency key wins over debounce: its run is answered as it is.
            existing = self.runs.get(spec.run_id) if spec.idempotency_key else None
            if existing is not None:
                return existing, False
        joined, spec, burst = self._debounced(spec, now)
        if joined is not None:
            return joined, False
        record = self._draft(spec, now, burst)
        try:
            stored = self.runs.try_insert(record)
        except RunAlreadyExistsError as exc:
            existing_run: RunRecord = exc.existing
            return existing_run, False
        self._observe(None, stored)
        if stored.alarm_armed and stored.alarm_at is not None:
            self.alarms.arm(stored.id, stored.alarm_at)
        if stored.status in ("delayed", "paused"):
            return stored, True
        inline = drive and not self._handing_off()
        stored = self._admit(stored, save_start=not inline)
        if stored.status != "running":
            return stored, True
        if drive and self._handing_off():
            self.hand_off(stored.id)
            return stored, True
        if not drive:
            return self._load(stored.id), True
        with self._watching(stored) as watched:
            self._run(Work([stored.id], known=[stored]))
            latest = watched[stored.id]
        # Nothing saved by this drive (another process holds the run): read what is stored.
        return (self._load(stored.id) if latest is stored else latest), True

    def _draft(self, spec: TriggerSpec, now: int, burst: TrailingBurst | None) -> RunRecord:
        """The new run as inserted: delayed, queued or running as its flow control says."""
        record = deferred(new_run(spec, now), spec.flow, now)
        if burst is not None:
            record = record.model_copy(
                update={
                    "status": "delayed",
                    "wake_at": max(burst.start_at_ms, record.wake_at or now),
                    "timeout_deadline": None,
                    "debounce_key": burst.key,
                }
            )
        record = self._limited_draft(record, spec)
        paused = self._paused_workflow_draft(record)
        return paused if paused is not None else self._unstarted_alarm(record)

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
        work = Work()
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
        held or running is marked dirty and left to its drive.

        The delivery is stored before the run is read, and one that sees the run leased
        marks it (``RunStore.mark_dirty``): the mark fails the holder's next save, and a
        holder that saw a mark reads the store after it lets go of the lease, so a delivery
        that sees the run leased is always found.
        """
        # A repeat finds its id stored already (its first attempt died before the id was
        # taken, or is still under way): it takes it all the same, so a delivery whose
        # process died mid-way is completed by the client's retry, never left stored.
        pending.post(run_id, injection.to_item(self.clock.now_ms()))
        work = Work()
        looked_again = False
        for _ in range(MAX_RACES):
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
                # The holder takes it (a running run nobody holds yet is due for a drive,
                # handed off or the sweeper's, whose holder takes it) before it lets go: the
                # mark fails the holder's next save, so it reads the run again and looks.
                # An unchanged version means the holder has not saved since the run was
                # read; a run marked already needs no second mark.
                if record.dirty or self.runs.mark_dirty(run_id, version=record.version):
                    return InjectionResult("buffered"), record
                continue
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
        raise StaleRunError(f"run {run_id} kept changing; gave up after {MAX_RACES} attempts")

    def cancel(
        self,
        run_id: str,
        *,
        reason: str | None = None,
        compensate: bool = False,
        by: str = "api",
        action_id: str | None = None,
    ) -> RunRecord:
        """Cancel a run (and its attached children), optionally compensating first.

        Raises:
            RunNotFoundError: No such run.
            RunTerminalError: The run already ended (code ``already_terminal``).
        """

        def change(rec: RunRecord, action: RunAction, now: int) -> Transition:
            if applied(rec, action.id):
                return Transition(rec, (), changed=False)
            transition = cancel(rec, reason, compensate, now)
            note(transition.record, action)
            return transition

        work = Work()
        saved, _ = self._act(run_id, action_at("cancel", by, action_id, reason), change, work)
        self._signal_host(saved)
        return self._go_on(run_id, work)

    def pause(
        self, run_id: str, *, by: str, action_id: str | None = None, reason: str | None = None
    ) -> RunRecord:
        """Pause a running or waiting run (see docs/guides/operating-runs.md).

        Raises:
            RunNotFoundError: No such run.
            RunTerminalError: The run ended (``already_terminal``).
            RunActionConflictError: ``already_paused`` or ``not_started``.
        """
        work = Work()
        action = action_at("pause", by, action_id, reason)
        saved, taken = self._act(run_id, action, lambda rec, act, _now: pause(rec, act), work)
        if taken is not None:
            self._signal_host(saved)
        return saved

    def resume(
        self, run_id: str, *, by: str, action_id: str | None = None, reason: str | None = None
    ) -> RunRecord:
        """Resume a paused run: it runs again at once.

        Raises:
            RunNotFoundError: No such run.
            RunTerminalError: The run ended (``already_terminal``).
            RunActionConflictError: ``not_paused``.
        """
        work = Work()
        self._act(run_id, action_at("resume", by, action_id, reason), resume, work)
        return self._go_on(run_id, work)

    def redrive(
        self,
        run_id: str,
        *,
        by: str,
        action_id: str | None = None,
        reason: str | None = None,
        retry: RetryOverride | None = None,
    ) -> RunRecord:
        """Continue a failed, cancelled or compensation_failed run from its failure point.

        Raises:
            RunNotFoundError: No such run.
            RunActionConflictError: ``not_redrivable``.
        """
        detail = {"retry": retry.to_wire()} if retry is not None else None
        work = Work()
        self._act(
            run_id,
            action_at("redrive", by, action_id, reason, detail),
            lambda rec, act, now: redrive(rec, act, now, retry),
            work,
        )
        return self._go_on(run_id, work)

    def upgrade(
        self, run_id: str, *, by: str, action_id: str | None = None, reason: str | None = None
    ) -> RunRecord:
        """Move a run that has not ended to the current code (see
        docs/guides/operating-runs.md): a run waiting for its pinned build is tried at once.

        Raises:
            RunNotFoundError: No such run.
            RunTerminalError: The run ended (``already_terminal``).
        """
        work = Work()
        self._act(run_id, action_at("upgrade", by, action_id, reason), upgrade, work)
        return self._go_on(run_id, work)

    def rerun(
        self,
        run_id: str,
        *,
        from_step: str,
        by: str,
        action_id: str | None = None,
        reason: str | None = None,
        input: Any = KEEP_INPUT,
    ) -> RunRecord:
        """Start a new run whose journal is this ended run's up to its top-level step
        ``from_step``; returns the new run.

        Raises:
            RunNotFoundError: No such run.
            StepNotFoundError: No top-level step ``from_step``.
            RunActionConflictError: ``not_rerunnable``.
        """
        original = self._load(run_id)
        chosen = action_id or f"act_{secrets.token_hex(8)}"
        new_input = original.input if input is KEEP_INPUT else input
        spec = self._rerun_spec(original, from_step, chosen, new_input)
        rerun, _ = self.trigger(spec)
        action = action_at(
            "rerun", by, chosen, reason, {"fromStep": from_step, "rerunId": rerun.id}
        )
        self._act(run_id, action, lambda rec, act, _now: linked_rerun(rec, act, rerun.id), Work())
        return rerun

    def _go_on(self, run_id: str, work: Work) -> RunRecord:
        """Drive (or hand off) what an action left due, then read the run."""
        if self._handing_off():
            self._hand_off_work(work)
            return self._load(run_id)
        self._run(work)
        return self._load(run_id)

    def drive(self, run_id: str, *, take_over: bool = False) -> RunRecord | None:
        """Drive a run until it parks, ends or the inline budget is spent.

        Args:
            run_id: The run.
            take_over: Take the lease even if another holder has it (crash recovery of a
                driver known to be dead).
        """
        self._run(Work([run_id]), take_over=run_id if take_over else None)
        return self.runs.get(run_id)

    def drive_from_event(
        self, event: Mapping[str, Any], *, delivery: RunUsage | None = None
    ) -> RunRecord | None:
        """Handle an alarm or hand-off payload ``{"runId", "wakeAt"}``.

        Early and duplicate alarms are harmless: a run with nothing due only gets its alarm
        re-armed at its wake time.

        Args:
            event: The payload.
            delivery: What delivering it cost (see ``relayflow.drive.delivery``), counted
                for the run with this drive's work.
        """
        run_id = event.get("runId")
        if not isinstance(run_id, str) or not run_id:
            raise ValidationError(f"alarm payload needs a runId string, got {dict(event)!r}")
        with self.usage.working_on(run_id, invocation=True):
            if delivery is not None:
                self.usage.add(run_id, delivery)
            return self._drive_event(run_id)

    def _drive_event(self, run_id: str) -> RunRecord | None:
        stored = self.runs.get(run_id)
        if stored is None or stored.is_terminal:
            return stored
        now = self.clock.now_ms()
        # A queued run is due at its queue check; before it, only a release's hand-off drives it.
        record = stored if self._due(stored, now) else self._started_by_release(stored, now)
        if not self._needs_attention(record, now):
            if record.wake_at is not None and record.lease is None:
                self.alarms.arm(run_id, record.wake_at)
            return record
        self._alarm_fired(stored, now)
        with self._watching(record) as watched:
            self._run(Work([run_id], known=[record]))
            latest = watched[run_id]
        # Nothing saved by this drive (another process holds the run): read what is stored.
        return self.runs.get(run_id) if latest is record else latest

    def _timers_tick(self, draft: RunRecord, now: int) -> Transition | None:
        """What time alone does to a run that waits on timers only (sleeps, retry delays),
        when that leaves it due for an invocation; None otherwise (its stored deliveries
        are taken first)."""
        if not waits_on_timers_only(draft):
            return None
        tick = on_alarm(draft, now, self.settings)
        return tick if tick.changed and self._wants_invocation(tick.record, now) else None

    def sweep(self, now: int | None = None, *, limit: int = 100) -> list[str]:
        """Drive again runs whose wake time passed (missed alarms, dead holders); returns ids.

        A run in flight is due only once its lease has expired (its wake time is the lease's
        end), so runs being driven never crowd out a run whose alarm was lost. A run found
        leased by a live holder is left alone (no dirty mark), judged from its header alone.
        Once the drive's budget is spent, the remaining due runs are handed off rather than
        driven here.
        """
        before = self.clock.now_ms() if now is None else now
        due = self.runs.due_runs(before, limit)
        for run_id in due:
            header = self._not_in_flight(run_id)
            if header is None:
                continue
            self._alarm_fired(header, self.clock.now_ms())
            if self._time_for_invocation(self.clock.now_ms()):
                self._run(Work([run_id]), mark_leased=False)
            else:
                self.hand_off(run_id)
        return due

    def _not_in_flight(self, run_id: str) -> RunRecord | None:
        """The run's header, unless it is leased by a live holder (or gone): judged from the
        header alone, so the sweeper does not read the whole of every run in flight (their
        wake entry may be due) on each pass."""
        header = self.runs.get_header(run_id)
        if header is None or header.is_terminal:
            return None
        lease = header.lease
        return None if lease is not None and lease.expires_at > self.clock.now_ms() else header

    def recover(self, run_id: str) -> RunRecord | None:
        """Drive again a run whose holder died, from its last saved record."""
        return self.drive(run_id, take_over=True)

    def _run(self, work: Work, *, take_over: str | None = None, mark_leased: bool = True) -> None:
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

    def _drive_one(
        self, run_id: str, work: Work, *, take_over: bool = False, mark_leased: bool = True
    ) -> None:
        """Drive one run: every save carries all the changes made since the previous one.

        Changes accumulate on an unsaved draft and are saved (conditionally on the stored
        version) only before something leaves the process: a dispatch, or letting go of the
        lease. Effects are applied only after the save that carries their transition; a lost
        race drops the draft and starts again from the stored run.
        """
        with self.usage.working_on(run_id):
            self._drive_held(run_id, work, take_over=take_over, mark_leased=mark_leased)

    def _drive_held(self, run_id: str, work: Work, *, take_over: bool, mark_leased: bool) -> None:
        owner = f"{self._owner}/{next(self._drives)}"
        known = work.take_known(run_id) or self.runs.get(run_id)
        if known is not None and known.status in NOT_STARTED:
            known = self._wake_unstarted(known) if self._due(known, self.clock.now_ms()) else None
            if known is None:
                return
        claimed = self._acquire(run_id, owner, take_over, known, mark_leased=mark_leased)
        invocations = 0
        while claimed is not None:
            stored, draft = claimed
            now = self.clock.now_ms()
            effects: list[Effect] = []
            if not draft.is_terminal and not self._wants_invocation(draft, now):
                # A run due for an invocation anyway takes what was stored when it next
                # waits, or after it lets go (see _look_again): one read less per invocation.
                # So does a run whose due timers alone make it run again, when it waits on
                # timers only: no stored delivery could resolve one of its waits first.
                tick = self._timers_tick(draft, now)
                if tick is None:
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
