"""What a schedule firing does: start the workflow's run with the idempotency key
``<schedule id>:<scheduled time>`` (so a duplicate delivery starts nothing), after applying
the schedule's pause and overlap policy; and the release of a queued firing when the run it
waited for ends.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from relayflow.core.record import RunRecord
from relayflow.core.trigger import TriggerSpec, resolve_run_id
from relayflow.engine import Engine
from relayflow.errors import ScheduleNotFoundError, StaleScheduleError
from relayflow.ports import ManifestStore
from relayflow.protocol import RunTrigger, TenantMeta
from relayflow.schedules.reconcile import ensure_state
from relayflow.schedules.spec import ScheduleSpec, find_schedule
from relayflow.schedules.state import ScheduleState, ScheduleStateStore
from relayflow.schedules.times import iso_utc

_log = logging.getLogger("relayflow.schedules")
_RACES = 50
#: A claimed run not stored yet counts as starting for this long (its firing may be mid-way).
CLAIM_GRACE_MS = 60_000

FiringStatus = Literal["started", "duplicate", "skipped", "queued", "paused", "superseded"]


@dataclass(frozen=True)
class FiringResult:
    """The outcome of one firing.

    ``status``: ``started`` (a run was created), ``duplicate`` (this scheduled time was
    handled before; ``run_id`` is its run when it started one), ``skipped`` (overlap
    ``skip``, or ``queue`` with a firing already waiting), ``queued`` (waits for the active
    run), ``paused``, ``superseded`` (a later scheduled time was already handled).
    """

    status: FiringStatus
    schedule_id: str
    scheduled_ms: int
    run_id: str | None = None

    def to_json(self) -> dict[str, object]:
        """The API's view."""
        out: dict[str, object] = {
            "status": self.status,
            "scheduleId": self.schedule_id,
            "scheduledTime": iso_utc(self.scheduled_ms),
        }
        if self.run_id is not None:
            out["runId"] = self.run_id
        return out


def idempotency_key(schedule_id: str, scheduled_ms: int) -> str:
    """``<schedule id>:<scheduled time>`` (ISO 8601 UTC)."""
    return f"{schedule_id}:{iso_utc(scheduled_ms)}"


class ScheduleFirer:
    """Starts the runs of schedule firings.

    Args:
        engine: The engine that inserts and drives runs.
        manifests: The manifests the schedules are declared in.
        states: Schedule states.
        tags_of: The tags a workflow's runs get (its ``@workflow(tags=...)``).
        tenant_meta: Owner of the runs started.
    """

    def __init__(
        self,
        *,
        engine: Engine,
        manifests: ManifestStore,
        states: ScheduleStateStore,
        tags_of: Callable[[str], tuple[str, ...]] = lambda _: (),
        tenant_meta: TenantMeta | None = None,
    ) -> None:
        self.engine = engine
        self.manifests = manifests
        self.states = states
        self._tags_of = tags_of
        self._tenant_meta = tenant_meta or TenantMeta()

    def spec(self, environment: str, schedule_id: str) -> ScheduleSpec:
        """The schedule as the environment's current manifest declares it.

        Raises:
            ScheduleNotFoundError: Not declared there (or not for this environment).
        """
        found = find_schedule(self.manifests.get_current(environment), environment, schedule_id)
        if found is None:
            raise ScheduleNotFoundError(
                f"no schedule {schedule_id!r} in the current {environment} manifest"
            )
        return found

    def run_id_of(self, spec: ScheduleSpec, scheduled_ms: int) -> str:
        """The id of the run the firing at ``scheduled_ms`` starts."""
        return resolve_run_id(
            spec.workflow_id,
            run_id=None,
            idempotency_key=idempotency_key(spec.schedule_id, scheduled_ms),
            generated="",
        )

    def fire(
        self, environment: str, schedule_id: str, scheduled_ms: int, *, manual: bool = False
    ) -> FiringResult:
        """Handle the firing of ``schedule_id`` scheduled at ``scheduled_ms``.

        Args:
            environment: The environment.
            schedule_id: The schedule.
            scheduled_ms: The time the firing was scheduled for (its idempotency key).
            manual: "Trigger now": ignores the pause and does not move the schedule's
                progress, but follows its overlap policy.

        Raises:
            ScheduleNotFoundError: The schedule is not declared for the environment.
        """
        spec = self.spec(environment, schedule_id)
        self.release(spec)
        run_id = self.run_id_of(spec, scheduled_ms)
        for _ in range(_RACES):
            state = ensure_state(self.states, spec, self.engine.clock.now_ms())
            decided = self._decide(spec, state, scheduled_ms, run_id, manual=manual)
            if isinstance(decided, FiringResult):
                return decided
            to_save, outcome = decided
            if to_save is not state:
                try:
                    self.states.save(to_save, expected_version=state.version)
                except StaleScheduleError:
                    continue  # another firing or an operator changed it: decide again
            if outcome is not None:
                return outcome
            return self._start(spec, scheduled_ms, run_id, drive=True, manual=manual)
        raise StaleScheduleError(self.states.get(environment, schedule_id))

    def _decide(
        self,
        spec: ScheduleSpec,
        state: ScheduleState,
        scheduled_ms: int,
        run_id: str,
        *,
        manual: bool,
    ) -> FiringResult | tuple[ScheduleState, FiringResult | None]:
        """What a firing does: a result with nothing to save, or the state to save first and
        the result to answer after it (None: start the run)."""

        def result(status: FiringStatus, rid: str | None = None) -> FiringResult:
            return FiringResult(status, spec.schedule_id, scheduled_ms, rid)

        if state.paused and not manual:
            return result("paused")
        last = state.last_scheduled_ms
        if not manual and last is not None and scheduled_ms <= last:
            if self.engine.runs.get(run_id) is not None:
                return result("duplicate", run_id)
            if scheduled_ms == last and state.active_run_id == run_id:
                return state, None  # claimed by a delivery that stopped before the run began
            return result("duplicate" if scheduled_ms == last else "superseded")
        progress: dict[str, object] = {}
        if not manual:
            progress["last_scheduled_ms"] = scheduled_ms
            if spec.schedule.kind == "at":
                progress["fired"] = True
        overlap = spec.schedule.overlap
        if overlap != "allow" and self._active(state):
            if overlap == "queue" and state.queued_ms is None and not manual:
                return state.but(queued_ms=scheduled_ms, **progress), result("queued")
            return state.but(**progress), result("skipped")
        if overlap != "allow":
            progress["active_run_id"] = run_id
            progress["claimed_at_ms"] = self.engine.clock.now_ms()
        return state.but(last_run_id=run_id, **progress), None

    def _active(self, state: ScheduleState) -> bool:
        """Whether the run the schedule last started is still going (or still starting)."""
        if state.active_run_id is None:
            return False
        record = self.engine.runs.get(state.active_run_id)
        if record is None:
            claimed = state.claimed_at_ms or 0
            return self.engine.clock.now_ms() - claimed < CLAIM_GRACE_MS
        return not record.is_terminal

    def release(self, spec: ScheduleSpec, *, drive: bool = True) -> FiringResult | None:
        """Start the queued firing of ``spec`` if the run it waited for has ended."""
        for _ in range(_RACES):
            state = self.states.get(spec.environment, spec.schedule_id)
            if state is None or state.queued_ms is None or self._active(state):
                return None
            queued = state.queued_ms
            run_id = self.run_id_of(spec, queued)
            claimed = state.but(
                queued_ms=None,
                active_run_id=run_id,
                claimed_at_ms=self.engine.clock.now_ms(),
                last_run_id=run_id,
            )
            try:
                self.states.save(claimed, expected_version=state.version)
            except StaleScheduleError:
                continue
            return self._start(spec, queued, run_id, drive=drive)
        return None

    def _start(
        self,
        spec: ScheduleSpec,
        scheduled_ms: int,
        run_id: str,
        *,
        drive: bool,
        manual: bool = False,
    ) -> FiringResult:
        # The run's trigger tells a "trigger now" from a firing of the schedule's own.
        fields: dict[str, object] = {
            "kind": "schedule",
            "scheduleId": spec.schedule_id,
            "scheduledTime": iso_utc(scheduled_ms),
        }
        if manual:
            fields["manual"] = True
        trigger = RunTrigger.model_validate(fields)
        input_value = spec.schedule.input
        run_spec = TriggerSpec(
            workflow_id=spec.workflow_id,
            input=input_value if input_value is not None else {},
            run_id=run_id,
            environment=spec.environment,
            tags=self._tags_of(spec.workflow_id),
            tenant_meta=self._tenant_meta,
            triggered_by=trigger,
            idempotency_key=idempotency_key(spec.schedule_id, scheduled_ms),
        )
        record, created = self.engine.trigger(run_spec, drive=drive)
        if created and not drive:
            # Started from inside another run's save: the alarm path drives it.
            self.engine.alarms.arm(record.id, self.engine.clock.now_ms())
        status: FiringStatus = "started" if created else "duplicate"
        _log.info(
            "schedule %s fired for %s: %s %s",
            spec.schedule_id,
            iso_utc(scheduled_ms),
            status,
            record.id,
        )
        return FiringResult(status, spec.schedule_id, scheduled_ms, record.id)


class QueuedFiringRelease:
    """A run observer that starts a schedule's queued firing when the schedule's run ends."""

    def __init__(self, firer: ScheduleFirer) -> None:
        self._firer = firer

    def on_saved(self, before: RunRecord | None, after: RunRecord) -> None:
        """Release the queued firing of the schedule that started ``after``, if it ended."""
        if not after.is_terminal or (before is not None and before.is_terminal):
            return
        trigger = after.triggered_by
        schedule_id = (trigger.model_extra or {}).get("scheduleId")
        if trigger.kind != "schedule" or not isinstance(schedule_id, str):
            return
        try:
            spec = self._firer.spec(after.environment, schedule_id)
            self._firer.release(spec, drive=False)
        except Exception:  # an observer never breaks the drive; the next firing releases it
            _log.exception("releasing the queued firing of %s failed", schedule_id)

    def on_interrupted(self, run_id: str, reason: str) -> None:
        """Nothing to release: the run goes on."""
