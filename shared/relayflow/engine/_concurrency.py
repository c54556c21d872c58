"""Concurrency per key in the engine: a new run of a limited workflow is stored ``queued``,
takes a slot (or waits in its key's queue, or is refused, or replaces the oldest holder, as
the strategy says), and the end of a run hands its slot to the next queued one at once.

The run is inserted ``queued`` before it asks for a slot, so a crash in between leaves a run
that never started, not one that runs without a slot; the queued run's check (see
``_deferred``) asks again. A run that ends (whatever its status) releases its slot or queue
place; the runs the release gives slots to are handed off to be driven, and each is stored
``running`` by its drive's first save (see ``_started_by_release``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection

from relayflow.core.deferred import end_unstarted, queued, started
from relayflow.core.effects import Transition
from relayflow.core.interventions import cancel
from relayflow.core.record import NOT_STARTED, RunRecord
from relayflow.core.trigger import TriggerSpec
from relayflow.engine._base import Work
from relayflow.engine._effects import EffectApplier
from relayflow.errors import RelayflowError, RunNotFoundError, RunTerminalError
from relayflow.flow import admission
from relayflow.flow.declarations import Concurrency
from relayflow.flow.errors import CONCURRENCY_REPLACED
from relayflow.flow.ports import ConcurrencySlots, SlotHolder, SlotScope
from relayflow.observability import FLOW_DEQUEUED, FLOW_QUEUED, RUNS_STARTED

_log = logging.getLogger("relayflow.engine")


class ConcurrencyGate(EffectApplier):
    """Admits new runs under their workflow's ``concurrency`` and starts queued runs."""

    def _concurrency(self, run: RunRecord) -> tuple[ConcurrencySlots, Concurrency] | None:
        if self.slots is None or self._concurrency_of is None:
            return None
        declared = self._concurrency_of(run.workflow_id, run.environment)
        return None if declared is None else (self.slots, declared)

    def _limited_draft(self, record: RunRecord, spec: TriggerSpec) -> RunRecord:
        """The new run as inserted: its concurrency key set and, unless it is ``delayed``,
        ``queued`` under it, when its workflow is limited.

        A child run of its parent's own workflow runs under its parent's slot (so recursion
        with ``limit=1`` cannot deadlock); a child of another limited workflow is limited.

        Raises:
            FlowKeyMissingError: The key's path finds nothing in the input (nothing stored).
        """
        gate = self._concurrency(record)
        if gate is None or spec.parent_workflow_id == record.workflow_id:
            return record
        scope = admission.concurrency_scope(
            record.workflow_id, gate[1], record.input, spec.flow, spec.event
        )
        if record.status == "delayed":
            return record.model_copy(update={"concurrency_key": scope.key})
        return queued(record, scope.key, self.clock.now_ms())

    def _admit(self, stored: RunRecord, *, save_start: bool = True) -> RunRecord:
        """Take a slot for the queued run, as its workflow's strategy says: the run as it now
        is (``running`` when it got one, ``queued`` when it waits, ``cancelled`` when
        ``cancel-newest`` refused it). Safe to repeat.

        Without ``save_start`` a run that got its slot comes back started but unsaved (see
        ``_start_unsaved``)."""
        gate = self._concurrency(stored)
        if gate is None or stored.status != "queued" or stored.concurrency_key is None:
            return stored
        slots, declared = gate
        scope = SlotScope(stored.workflow_id, stored.concurrency_key)
        decided = admission.admit(
            slots, scope, stored.id, declared, priority=stored.priority, now_ms=self.clock.now_ms()
        )
        if decided.refused is not None:
            message = (
                f"not started: {decided.describe()}, and the workflow's concurrency strategy "
                "is cancel-newest"
            )
            return self._end_unstarted(stored.id, decided.refused, message)
        if decided.replaces is not None:
            self._replace(decided.replaces, stored.id)
        if not decided.start:
            self._flow_event(FLOW_QUEUED, stored.id, stored.workflow_id, queued_at=decided.position)
            return stored
        if not save_start:
            return self._start_unsaved(stored, self.clock.now_ms())
        return self._start_queued(stored.id, Work())

    def _start_unsaved(self, record: RunRecord, now: int) -> RunRecord:
        """``record`` started at ``now`` but unsaved (at its stored version): the caller drives
        it at once, and the drive's first save writes the start with what it saves anyway.
        If that save never comes, the run is stored ``queued`` holding its slot, due for its
        queue check, which starts it."""
        # Its save shows it running already: the observers learn of the start here.
        self._flow_event(RUNS_STARTED, record.id, record.workflow_id)
        return started(record, now)

    def _replace(self, holder_id: str, newer_id: str) -> None:
        """``cancel-in-progress``: cancel the oldest holder; its release starts ``newer_id``
        (first in line). A holder that ended meanwhile has released already."""
        reason = f"replaced by run {newer_id} (concurrency strategy cancel-in-progress)"

        def replace(record: RunRecord, now: int) -> tuple[Transition, None]:
            return cancel(record, reason, False, now, code=CONCURRENCY_REPLACED), None

        try:
            saved, _ = self._mutate(holder_id, replace, Work())
        except (RunNotFoundError, RunTerminalError):
            return
        self._signal_host(saved)

    def _change_while(
        self,
        run_id: str,
        statuses: Collection[str],
        change: Callable[[RunRecord, int], Transition],
        work: Work | None = None,
    ) -> RunRecord:
        """Apply ``change`` to the stored run if it is still in one of ``statuses``; a run
        that moved on meanwhile (started, ended) is left as it is. Returns the run as stored."""

        def step(record: RunRecord, now: int) -> tuple[Transition, None]:
            if record.status not in statuses:
                return Transition(record, changed=False), None
            return change(record, now), None

        saved, _ = self._mutate(run_id, step, work or Work())
        return saved

    def _end_unstarted(self, run_id: str, code: str, message: str) -> RunRecord:
        """End a run that never started ``cancelled`` with ``code``."""
        return self._change_while(
            run_id, NOT_STARTED, lambda record, now: end_unstarted(record, now, code, message)
        )

    def _start_queued(self, run_id: str, work: Work) -> RunRecord:
        """Mark a queued run that holds a slot ``running`` and due now."""
        return self._change_while(
            run_id, ("queued",), lambda record, now: Transition(started(record, now)), work
        )

    def _observe(self, before: RunRecord | None, after: RunRecord) -> None:
        super()._observe(before, after)
        if after.concurrency_key is None or not after.is_terminal:
            return
        if before is not None and before.is_terminal:
            return
        self._release_slot(after)

    def _release_slot(self, ended: RunRecord) -> None:
        """Give the ended run's slot (or queue place) to the next queued runs and hand them
        off to be driven. A failure here leaves them holding a slot while stored queued:
        their queue check starts them."""
        if ended.concurrency_key is None:
            return
        try:
            self.release_slot(
                ended.workflow_id, ended.concurrency_key, ended.id, environment=ended.environment
            )
        except Exception:
            _log.exception("run %s ended but its concurrency slot could not be passed on", ended.id)

    def _pass_on(self, workflow_id: str, run_ids: list[str], *, kept: str | None = None) -> bool:
        """Start the queued runs a release gave slots to and hand them off to be driven,
        except ``kept``, which the caller starts; True when ``kept`` was among them."""
        got_slot = False
        for run_id in run_ids:
            self._flow_event(FLOW_DEQUEUED, run_id, workflow_id)
            if run_id == kept:
                got_slot = True
                continue
            self._hand_off_to_start(run_id)
        return got_slot

    def _hand_off_to_start(self, run_id: str) -> None:
        """Hand off a queued run a release gave a slot to: its drive starts it. A hand-off that
        fails saves the start instead, so that the run is due now and the sweeper drives it
        (rather than its queue check, a minute to an hour later)."""
        try:
            self.hand_off_or_raise(run_id)
        except RelayflowError:
            _log.exception("run %s got a slot but could not be handed off", run_id)
            self._start_queued(run_id, Work())

    def _started_by_release(self, record: RunRecord, now: int) -> RunRecord:
        """A queued run not yet due that holds its slot (a release gave it one and handed it
        off) as its drive starts it (see ``_start_unsaved``). A queued run without a slot, or
        any other run, comes back as stored. A read of the key's holders. (A run past its ttl
        is due: its alarm expires it.)"""
        queue = self._queue_of(record) if record.status == "queued" else None
        if queue is None:
            return record
        slots, _, scope = queue
        if all(holder.run_id != record.id for holder in slots.holders(scope)):
            return record
        return self._start_unsaved(record, now)

    def _queue_of(
        self, record: RunRecord
    ) -> tuple[ConcurrencySlots, Concurrency, SlotScope] | None:
        """The slots, the declared concurrency and the stored scope the run's key is limited
        by (None when its workflow is no longer limited)."""
        gate = self._concurrency(record)
        if gate is None or record.concurrency_key is None:
            return None
        slots, declared = gate
        key_scope = SlotScope(record.workflow_id, record.concurrency_key)
        return slots, declared, admission.stored_scope(key_scope, declared)

    def _free_ended_holders(
        self,
        slots: ConcurrencySlots,
        scope: SlotScope,
        declared: Concurrency,
        holders: list[SlotHolder],
        waiting: str,
    ) -> bool:
        """Release the slots still held by runs that ended (their release failed, or their
        process died between their end and the release) and start the runs those slots go
        to; True when ``waiting`` got one (the caller starts it). A read of each holder."""
        got_slot = False
        for holder in holders:
            header = self.runs.get_header(holder.run_id)
            if header is not None and not header.is_terminal:
                continue
            given = admission.release(
                slots, scope, holder.run_id, declared, now_ms=self.clock.now_ms()
            )
            got_slot = self._pass_on(scope.workflow_id, given, kept=waiting) or got_slot
        return got_slot

    def declared_concurrency(self, workflow_id: str, environment: str) -> Concurrency | None:
        """The ``concurrency`` this engine enforces for ``workflow_id`` in ``environment``
        (None: unlimited)."""
        if self.slots is None or self._concurrency_of is None:
            return None
        return self._concurrency_of(workflow_id, environment)

    def release_slot(
        self, workflow_id: str, key: str, run_id: str, *, environment: str
    ) -> list[str]:
        """Free ``run_id``'s slot (or queue place) under ``key`` and hand the queued runs that
        take the freed slots off to be driven, which starts them; answers their ids. The
        end of a run calls it, and so does an operator freeing a stuck slot."""
        declared = self.declared_concurrency(workflow_id, environment)
        if self.slots is None or declared is None:
            return []
        scope = SlotScope(workflow_id, key)
        now = self.clock.now_ms()
        started_ids = admission.release(self.slots, scope, run_id, declared, now_ms=now)
        self._pass_on(workflow_id, started_ids)
        return started_ids
