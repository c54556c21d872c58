"""Operating schedules: reconcile on registration, list them with their next fire times,
pause, resume, trigger now, and handle the firings the host delivers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from relayflow.errors import StaleScheduleError, ValidationError
from relayflow.ports import Clock, ManifestStore, RunStore
from relayflow.protocol import ENVIRONMENTS
from relayflow.schedules.firing import FiringResult, QueuedFiringRelease, ScheduleFirer
from relayflow.schedules.reconcile import (
    ReconcileReport,
    ScheduleHost,
    ensure_state,
    hosted_form,
    reconcile,
)
from relayflow.schedules.spec import ScheduleSpec, manifest_schedules
from relayflow.schedules.state import ScheduleState, ScheduleStateStore
from relayflow.schedules.times import iso_utc, parse_iso_ms

NEXT_FIRE_TIMES = 5
_RACES = 50


@dataclass(frozen=True)
class LastRun:
    """The run the schedule's latest firing started, as it stands now."""

    run_id: str
    #: None while the run is not stored yet (its firing is under way).
    status: str | None
    #: Started by "trigger now", not by a firing of the schedule's own.
    manual: bool
    scheduled_time: str | None
    started_at: int | None

    def to_json(self) -> dict[str, Any]:
        """camelCase JSON."""
        return {
            "runId": self.run_id,
            "status": self.status,
            "manual": self.manual,
            "scheduledTime": self.scheduled_time,
            "startedAt": self.started_at,
        }


def last_run(runs: RunStore, state: ScheduleState | None) -> LastRun | None:
    """The run ``state`` names as its latest (the active run for states stored before they
    kept the latest), read from the run store: its status and how it was triggered."""
    run_id = (state.last_run_id or state.active_run_id) if state is not None else None
    if run_id is None:
        return None
    record = runs.get(run_id)
    if record is None:
        return LastRun(run_id, None, False, None, None)
    extra = record.triggered_by.model_extra or {}
    scheduled = extra.get("scheduledTime")
    return LastRun(
        run_id=run_id,
        status=record.status,
        manual=extra.get("manual") is True,
        scheduled_time=scheduled if isinstance(scheduled, str) else None,
        started_at=record.started_at,
    )


@dataclass(frozen=True)
class ScheduleView:
    """A schedule as ``GET /api/schedules`` shows it."""

    spec: ScheduleSpec
    state: ScheduleState | None
    next_fire_times: list[int]
    last_run: LastRun | None = None

    def to_json(self) -> dict[str, Any]:
        """camelCase JSON."""
        schedule = self.spec.schedule
        state = self.state
        return {
            "id": self.spec.schedule_id,
            "workflowId": self.spec.workflow_id,
            "environment": self.spec.environment,
            "name": schedule.name,
            "kind": schedule.kind,
            "declaration": schedule.to_manifest(),
            "timezone": schedule.timezone or "UTC",
            "overlap": schedule.overlap,
            "paused": bool(state and state.paused),
            "fired": bool(state and state.fired),
            "lastScheduledTime": (
                iso_utc(state.last_scheduled_ms)
                if state and state.last_scheduled_ms is not None
                else None
            ),
            "activeRunId": state.active_run_id if state else None,
            "lastRun": self.last_run.to_json() if self.last_run is not None else None,
            "queuedTime": iso_utc(state.queued_ms) if state and state.queued_ms else None,
            "schedulerName": self.spec.scheduler_name,
            "nextFireTimes": [iso_utc(ms) for ms in self.next_fire_times],
        }


class ScheduleService:
    """Schedules of every environment, over a manifest store, a state store and a host.

    Args:
        manifests: Where the schedules are declared.
        states: Pause, progress and overlap state per schedule.
        host: Where the schedules are hosted (EventBridge Scheduler, or memory).
        firer: Starts the runs of firings.
        clock: Time source.
    """

    def __init__(
        self,
        *,
        manifests: ManifestStore,
        states: ScheduleStateStore,
        host: ScheduleHost,
        firer: ScheduleFirer,
        clock: Clock,
    ) -> None:
        self.manifests = manifests
        self.states = states
        self.host = host
        self.firer = firer
        self.clock = clock

    def reconcile(self, environment: str) -> ReconcileReport:
        """Make the host hold exactly the current manifest's schedules of ``environment``."""
        return reconcile(
            _environment(environment),
            manifests=self.manifests,
            states=self.states,
            host=self.host,
            clock=self.clock,
        )

    def list(self, environment: str, *, count: int = NEXT_FIRE_TIMES) -> list[ScheduleView]:
        """The environment's schedules with their next ``count`` fire times."""
        manifest = self.manifests.get_current(_environment(environment))
        now = self.clock.now_ms()
        views = []
        for spec in manifest_schedules(manifest, environment):
            state = self.states.get(environment, spec.schedule_id)
            views.append(
                ScheduleView(
                    spec,
                    state,
                    spec.fire_times(state, now, count),
                    last_run(self.firer.engine.runs, state),
                )
            )
        return views

    def get(self, environment: str, schedule_id: str) -> ScheduleView:
        """One schedule's view.

        Raises:
            ScheduleNotFoundError: Not declared for the environment.
        """
        spec = self.firer.spec(_environment(environment), schedule_id)
        state = self.states.get(environment, schedule_id)
        return ScheduleView(
            spec,
            state,
            spec.fire_times(state, self.clock.now_ms(), NEXT_FIRE_TIMES),
            last_run(self.firer.engine.runs, state),
        )

    def pause(self, environment: str, schedule_id: str) -> ScheduleView:
        """Stop firing (kept across re-registrations until :meth:`resume`)."""
        return self._set_paused(environment, schedule_id, True)

    def resume(self, environment: str, schedule_id: str) -> ScheduleView:
        """Fire again from the next scheduled time on (missed firings are not caught up)."""
        return self._set_paused(environment, schedule_id, False)

    def _set_paused(self, environment: str, schedule_id: str, paused: bool) -> ScheduleView:
        spec = self.firer.spec(_environment(environment), schedule_id)
        for _ in range(_RACES):
            state = ensure_state(self.states, spec, self.clock.now_ms())
            if state.paused == paused:
                break
            try:
                self.states.save(state.but(paused=paused), expected_version=state.version)
                break
            except StaleScheduleError:
                continue
        state = self.states.get(environment, schedule_id) or state
        hosted = hosted_form(spec, state, self.clock.now_ms())
        if hosted is not None:
            self.host.put(hosted)
        return self.get(environment, schedule_id)

    def trigger_now(self, environment: str, schedule_id: str) -> FiringResult:
        """Fire the schedule now (ignores a pause; follows the overlap policy)."""
        return self.firer.fire(
            _environment(environment), schedule_id, self.clock.now_ms(), manual=True
        )

    def handle_firing(self, payload: Mapping[str, Any]) -> FiringResult:
        """A firing delivered by the host: ``{"kind": "schedule", "environment",
        "scheduleId", "scheduledTime"}``.

        Raises:
            ValidationError: The payload is malformed.
            ScheduleNotFoundError: The schedule is no longer declared.
        """
        environment = payload.get("environment")
        schedule_id = payload.get("scheduleId")
        scheduled = payload.get("scheduledTime")
        if not isinstance(schedule_id, str) or not isinstance(scheduled, str):
            raise ValidationError(
                "a schedule firing needs scheduleId and scheduledTime strings, "
                f"got {dict(payload)!r}"
            )
        scheduled_ms = parse_iso_ms(scheduled)
        return self.firer.fire(_environment(environment), schedule_id, scheduled_ms)


def is_schedule_firing(payload: Mapping[str, Any]) -> bool:
    """Whether a drive-function payload is a schedule firing (not a run alarm)."""
    return payload.get("kind") == "schedule" and "scheduleId" in payload


def _environment(environment: object) -> str:
    if not isinstance(environment, str) or environment not in ENVIRONMENTS:
        raise ValidationError(
            f"environment must be one of {', '.join(ENVIRONMENTS)}, got {environment!r}"
        )
    return environment


def registered_tags(workflow_id: str) -> tuple[str, ...]:
    """The tags of the workflow registered in this process under ``workflow_id``."""
    from relayflow.sdk.registry import find_workflow

    found = find_workflow(workflow_id)
    return tuple(found.config.tags) if found is not None else ()


def attach_schedules(
    driver: Any, *, states: ScheduleStateStore, host: ScheduleHost
) -> ScheduleService:
    """Host ``driver``'s schedules: registering a manifest reconciles them onto ``host``,
    firings start runs, and a queued firing starts when the run it waited for ends.

    Args:
        driver: A ``relayflow.drivers.WorkflowDriver``.
        states: Where schedule states live.
        host: Where the schedules are hosted.
    """
    engine = driver.engine
    firer = ScheduleFirer(
        engine=engine,
        manifests=driver.manifests,
        states=states,
        tags_of=registered_tags,
        tenant_meta=driver.tenant_meta,
    )
    engine.add_observer(QueuedFiringRelease(firer))
    service = ScheduleService(
        manifests=driver.manifests, states=states, host=host, firer=firer, clock=engine.clock
    )
    driver.schedules = service
    return service
