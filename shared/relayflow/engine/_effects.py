"""The engine's effects: conditional changes of a stored run and what a saved transition asks
for next (alarms, child runs, resuming a parent, cancelling children)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import replace
from functools import partial
from typing import TypeVar

from relayflow.core.checkpoints import cancel_entry, pause_entry
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
from relayflow.core.interventions import cancel, child_ended
from relayflow.core.record import RunRecord
from relayflow.core.trigger import TriggerSpec, new_run
from relayflow.engine._base import MAX_RACES, EngineBase, Work
from relayflow.errors import (
    CheckpointSlotTakenError,
    RelayflowError,
    RunAlreadyExistsError,
    RunNotFoundError,
    RunTerminalError,
    StaleRunError,
    ValidationError,
)
from relayflow.protocol import SerializedError

_log = logging.getLogger("relayflow.engine")
T = TypeVar("T")


class EffectApplier(EngineBase):
    """Changes stored runs with conditional saves and carries out the effects of the saved
    transitions."""

    def _mutate(
        self,
        run_id: str,
        step: Callable[[RunRecord, int], tuple[Transition, T]],
        work: Work,
    ) -> tuple[RunRecord, T]:
        """Apply ``step`` to the stored run with a conditional save, retrying lost races."""
        for _ in range(MAX_RACES):
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
        raise StaleRunError(f"run {run_id} kept changing; gave up after {MAX_RACES} attempts")

    def _hand_off_work(self, work: Work) -> None:
        """Hand off every queued run that is not leased by a live holder (whose holder looks
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
        self, effects: Iterable[Effect], work: Work, *, driving: str | None = None
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

    def _apply_effect(self, effect: Effect, work: Work, driving: str | None) -> None:
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

    def _start_child(self, effect: StartChild, work: Work) -> None:
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
            inserted = self.runs.try_insert(self._limited_draft(child, spec))
        except RunAlreadyExistsError as exc:
            self._child_exists(effect, exc.existing, work)
            return
        self._observe(None, inserted)
        if self._admit(inserted).status == "running":
            work.add(spec.run_id)

    def _child_exists(self, effect: StartChild, existing: RunRecord, work: Work) -> None:
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

    def _limited_draft(self, record: RunRecord, spec: TriggerSpec) -> RunRecord:
        """The new run under its workflow's concurrency (see ``ConcurrencyGate``)."""
        return record

    def _admit(self, stored: RunRecord, *, save_start: bool = True) -> RunRecord:
        """Take a concurrency slot for a just-inserted run (see ``ConcurrencyGate``)."""
        return stored

    def _resume_parent(self, effect: ResumeParent, work: Work) -> None:
        def step(rec: RunRecord, now: int) -> tuple[Transition, None]:
            return child_ended(rec, effect.waitpoint_id, effect.outcome, now), None

        try:
            self._mutate(effect.parent_run_id, step, work)
        except RunNotFoundError:
            return

    def _cancel_children(self, effect: CancelChildren, work: Work) -> None:
        for child_id in effect.run_ids:
            try:
                self._mutate(
                    child_id,
                    lambda rec, now: (cancel(rec, effect.reason, effect.compensate, now), None),
                    work,
                )
            except (RunNotFoundError, RunTerminalError):
                continue

    def _signal_host(self, record: RunRecord) -> None:
        """Tell a host running the run, at its next checkpoint, that the run was cancelled
        or paused.

        The entry takes the next free slot of the log, so the host's next checkpoint fails
        its condition and the host stops the body there (and compensates when asked; for a
        pause it ends the invocation with what it did). A plain cancel ends the run at once;
        the entry stops the host from running steps whose results nobody will keep.
        """
        if self.checkpoints is None or not record.checkpoint_open:
            return
        directive = record.cancel_request
        if directive is not None:
            entry = partial(cancel_entry, reason=directive.reason, compensate=directive.compensate)
        elif record.status == "cancelled":
            message = record.error.message if record.error else None
            entry = partial(cancel_entry, reason=message, compensate=False)
        elif record.status == "paused" and record.pause is not None:
            entry = partial(pause_entry, reason=record.pause.reason)
        else:
            return
        seq = record.checkpoint_seq + 1
        for _ in range(MAX_RACES):
            seq += len(self.checkpoints.read(record.id, seq - 1))
            try:
                self.checkpoints.append(record.id, entry(seq))
                return
            except CheckpointSlotTakenError:
                continue


def _error_of(exc: RelayflowError, code: str) -> SerializedError:
    return SerializedError(category="RUNTIME_ERROR", code=code, message=exc.message)
