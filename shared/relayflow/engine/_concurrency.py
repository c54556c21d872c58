"""Concurrency per key in the engine: a new run of a limited workflow is stored ``queued``,
takes a slot (or waits in its key's queue), and the end of a run hands its slot to the
next queued one at once.

The run is inserted ``queued`` before it asks for a slot, so a crash in between leaves a run
that never started, not one that runs without a slot. A run that ends (whatever its status)
releases its slot or queue place; the runs the release starts are marked ``running`` and
handed off to be driven.
"""

from __future__ import annotations

import logging

from relayflow.core.effects import Transition
from relayflow.core.record import RunRecord
from relayflow.engine._base import Work
from relayflow.engine._effects import EffectApplier
from relayflow.flow import admission
from relayflow.flow.declarations import Concurrency
from relayflow.flow.ports import ConcurrencySlots, SlotScope

_log = logging.getLogger("relayflow.engine")


class ConcurrencyGate(EffectApplier):
    """Admits new runs under their workflow's ``concurrency`` and starts queued runs."""

    def _concurrency(self, workflow_id: str) -> tuple[ConcurrencySlots, Concurrency] | None:
        if self.slots is None or self._concurrency_of is None:
            return None
        declared = self._concurrency_of(workflow_id)
        return None if declared is None else (self.slots, declared)

    def _queued_draft(self, record: RunRecord) -> RunRecord:
        """The new run as inserted: ``queued`` under its key when its workflow is limited.

        Raises:
            FlowKeyMissingError: The key's path finds nothing in the input (nothing stored).
        """
        gate = self._concurrency(record.workflow_id)
        if gate is None or record.parent is not None:
            return record
        scope = admission.concurrency_scope(record.workflow_id, gate[1], record.input)
        return record.model_copy(
            update={"status": "queued", "wake_at": None, "concurrency_key": scope.key}
        )

    def _admit(self, stored: RunRecord) -> RunRecord:
        """Take a slot for the just-inserted queued run: the run as it now is (``running``
        when it got one, still ``queued`` when it waits)."""
        gate = self._concurrency(stored.workflow_id)
        if gate is None or stored.status != "queued" or stored.concurrency_key is None:
            return stored
        slots, declared = gate
        scope = SlotScope(stored.workflow_id, stored.concurrency_key)
        decided = admission.admit(
            slots, scope, stored.id, declared, priority=0, now_ms=self.clock.now_ms()
        )
        if not decided.start:
            return stored
        return self._start_queued(stored.id, Work())

    def _start_queued(self, run_id: str, work: Work) -> RunRecord:
        """Mark a queued run that holds a slot ``running`` and due now."""

        def start(record: RunRecord, now: int) -> tuple[Transition, None]:
            if record.status != "queued":
                return Transition(record, changed=False), None
            return Transition(record.model_copy(update={"status": "running", "wake_at": now})), None

        saved, _ = self._mutate(run_id, start, work)
        return saved

    def _observe(self, before: RunRecord | None, after: RunRecord) -> None:
        super()._observe(before, after)
        if after.concurrency_key is None or not after.is_terminal:
            return
        if before is not None and before.is_terminal:
            return
        self._release_slot(after)

    def _release_slot(self, ended: RunRecord) -> None:
        """Give the ended run's slot (or queue place) to the next queued runs and hand them
        off to be driven. A failure here leaves them holding a slot while stored queued."""
        gate = self._concurrency(ended.workflow_id)
        if gate is None or ended.concurrency_key is None:
            return
        slots, declared = gate
        scope = SlotScope(ended.workflow_id, ended.concurrency_key)
        try:
            started = admission.release(
                slots, scope, ended.id, declared, now_ms=self.clock.now_ms()
            )
            for run_id in started:
                self._start_queued(run_id, Work())
                self.hand_off(run_id)
        except Exception:
            _log.exception("run %s ended but its concurrency slot could not be passed on", ended.id)
