"""Runs that do not start when triggered: ``delayed`` ones (a trigger's ``delay``, a trailing
debounce) start at their time; ``queued`` ones are checked now and then; either ends with
``TTL_EXPIRED`` when its ``ttl`` passes first.

A debounced trigger joins the burst's run instead of creating one: the burst's state (its
run, start time and latest input) lives in the debouncer, and the run reads it when it is
due. A queued run's check repairs what a crash can leave behind: a slot it holds while still
stored ``queued`` (a release whose answer was lost), a queue place it never took (a crash
between its insert and its admission), or a slot kept by a holder that ended without
releasing it (a crash or an outage between its end and its release). Each check is a read of
its key, a read of each holder and one write.
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

from relayflow.core.deferred import expire, expired, queue_check_at, queued, started
from relayflow.core.effects import Transition
from relayflow.core.outcome import arm
from relayflow.core.record import RunRecord
from relayflow.core.trigger import TriggerSpec
from relayflow.engine._base import Work
from relayflow.engine._concurrency import ConcurrencyGate
from relayflow.flow.errors import FlowControlError
from relayflow.flow.keys import resolve_key
from relayflow.flow.ports import Debouncer, SlotScope
from relayflow.observability import FLOW_DEBOUNCED


class TrailingBurst(NamedTuple):
    """The trailing burst a trigger opened: its run starts at ``start_at_ms`` unless a join
    moves it; ``key`` is the burst's resolved debounce key."""

    start_at_ms: int
    key: str


class DeferredStarts(ConcurrencyGate):
    """Starts delayed and queued runs when their time or slot comes, and expires them."""

    # -- debounce ------------------------------------------------------------------------------

    def _debounced(
        self, spec: TriggerSpec, now: int
    ) -> tuple[RunRecord | None, TriggerSpec, TrailingBurst | None]:
        """Offer a debounced trigger to its burst.

        Returns:
            The burst's run when the trigger joined one (else None); the spec of the run to
            create (the burst's: its id and latest input); and, for a trailing burst, when
            its run starts and its key.
        """
        options = spec.flow
        debounce = None if options is None else options.debounce
        if debounce is None:
            return None, spec, None
        debouncer = self._require_debouncer()
        key = resolve_key(debounce.key, spec.input, spec.event, what="debounce key")
        decision = debouncer.offer(
            SlotScope(spec.workflow_id, key),
            spec.run_id,
            spec.input,
            delay_ms=debounce.delay_ms,
            mode=debounce.mode,
            max_wait_ms=debounce.max_wait_ms,
            now_ms=now,
        )
        trailing = debounce.mode == "trailing"
        burst = TrailingBurst(decision.start_at_ms, key) if trailing else None
        burst_spec = replace(spec, run_id=decision.run_id, input=decision.input)
        if decision.opened:
            return None, burst_spec, burst
        self._flow_event(FLOW_DEBOUNCED, decision.run_id, spec.workflow_id)
        return self.runs.get(decision.run_id), burst_spec, burst

    def _require_debouncer(self) -> Debouncer:
        if self.debouncer is None:
            raise FlowControlError("debounce needs a debouncer; this orchestrator has none")
        return self.debouncer

    # -- waking a run that has not started -------------------------------------------------------

    def _wake_unstarted(self, record: RunRecord) -> RunRecord | None:
        """A delayed or queued run came due: start it, expire it or put its next check.

        Returns:
            The run when it is now ``running`` (to be driven; a queued run's start is left to
            the drive's first save, see ``_start_unsaved``), else None.
        """
        now = self.clock.now_ms()
        if expired(record, now):
            self._mutate(record.id, _expiring, Work())
            return None
        if record.status == "delayed":
            return self._start_delayed(record, now)
        if record.status == "queued":
            return self._check_queued(record, now)
        return record

    def _start_delayed(self, record: RunRecord, now: int) -> RunRecord | None:
        if record.wake_at is not None and record.wake_at > now:
            self.alarms.arm(record.id, record.wake_at)
            return None
        later = self._end_burst(record, now)
        if later is not None:

            def wait_more(rec: RunRecord, _now: int) -> Transition:
                rec = rec.model_copy(update={"wake_at": later})
                return Transition(rec, (arm(rec, later),))

            self._change_while(record.id, ("delayed",), wait_more)
            return None

        def begin(rec: RunRecord, at: int) -> Transition:
            if rec.concurrency_key is None:
                return Transition(started(rec, at))
            rec = queued(rec, rec.concurrency_key, at)
            ttl = () if rec.start_deadline is None else (arm(rec, rec.start_deadline),)
            return Transition(rec, ttl)

        saved = self._admit(self._change_while(record.id, ("delayed",), begin))
        return saved if saved.status == "running" else None

    def _end_burst(self, record: RunRecord, now: int) -> int | None:
        """End the trailing burst whose run is due: None (start now), or the later start a
        join moved the run to. The burst's latest input is saved on the run before the burst
        is closed, so a crash between the two never starts the run on an older input."""
        if record.debounce_key is None or self.debouncer is None:
            return None
        scope = SlotScope(record.workflow_id, record.debounce_key)
        burst = self.debouncer.current(scope)
        if burst is not None and burst.run_id == record.id and burst.input != record.input:
            latest = burst.input
            self._change_while(
                record.id,
                ("delayed",),
                lambda rec, _now: Transition(rec.model_copy(update={"input": latest})),
            )
        return self.debouncer.close(scope, record.id, now_ms=now)

    def _check_queued(self, record: RunRecord, now: int) -> RunRecord | None:
        queue = self._queue_of(record)
        if queue is None:
            # No longer limited (the declaration was removed): start it.
            return self._start_unsaved(record, now)
        slots, declared, scope = queue
        holders = slots.holders(scope)
        if any(holder.run_id == record.id for holder in holders):
            saved = self._start_unsaved(record, now)
        elif any(waiting.run_id == record.id for waiting in slots.queue(scope)):
            if self._free_ended_holders(slots, scope, declared, holders, record.id):
                saved = self._start_unsaved(record, now)
            else:
                saved = self._next_check(record, now)
        else:
            saved = self._admit(record, save_start=False)
            if saved.status == "queued":
                saved = self._next_check(saved, now)
        return saved if saved.status == "running" else None

    def _next_check(self, record: RunRecord, now: int) -> RunRecord:
        check = queue_check_at(record, now)
        return self._change_while(
            record.id,
            ("queued",),
            lambda rec, _now: Transition(rec.model_copy(update={"wake_at": check})),
        )

    def _unstarted_alarm(self, record: RunRecord) -> RunRecord:
        """A new run's draft with its alarm marked armed (it is armed once inserted): a
        delayed run's at its start, a queued run's at its ttl. A queued run's checks are
        found by the sweeper, without an alarm."""
        if record.status == "delayed":
            at = record.wake_at
        elif record.status == "queued":
            at = record.start_deadline
        else:
            return record
        if at is None:
            return record
        return record.model_copy(update={"alarm_armed": True, "alarm_at": at})


def _expiring(record: RunRecord, now: int) -> tuple[Transition, None]:
    if not expired(record, now):
        return Transition(record, changed=False), None
    return expire(record, now), None
