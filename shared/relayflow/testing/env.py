"""``WorkflowTestEnv``: the in-memory orchestrator, the in-process step host and a virtual
clock, wired together for users' own tests."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NoReturn

from relayflow.adapters.memory import (
    InMemoryAlarmClock,
    InMemoryCheckpointLog,
    InMemoryRunStore,
    VirtualClock,
)
from relayflow.adapters.memory.flow import InMemoryConcurrencySlots, InMemoryDebouncer
from relayflow.adapters.memory.operations import InMemoryAuditLog, InMemoryWorkflowPauses
from relayflow.adapters.memory.pending import InMemoryPendingDeliveries
from relayflow.adapters.memory.stats import InMemoryRunStatistics
from relayflow.admin import WorkflowAdmin
from relayflow.core.settings import CoreSettings
from relayflow.core.views import JournalEvent, RunDetail, RunListPage
from relayflow.core.waits import reconcile_time
from relayflow.dispatch.inline import InlineDispatcher
from relayflow.drivers import DeliveryResult, WorkflowDriver
from relayflow.engine import Engine
from relayflow.errors import HostCrashSignal, RelayflowError, RunNotFoundError, ValidationError
from relayflow.flow.declarations import Concurrency
from relayflow.flow.ports import ConcurrencySlots, Debouncer
from relayflow.operations.paused import PausedWorkflows
from relayflow.operations.ports import AuditLog, WorkflowPauses
from relayflow.ports import (
    CheckpointLog,
    DispatcherResolver,
    ManifestStore,
    PayloadStore,
    PendingDeliveries,
    RunQuery,
    RunStore,
)
from relayflow.schedules import FiringResult, InMemoryScheduleHost, InMemoryScheduleStateStore
from relayflow.schedules.service import attach_schedules
from relayflow.stats import RunStatistics, attach_statistics
from relayflow.testing.alarms import FiredAlarms
from relayflow.testing.schedule_clock import VirtualScheduleClock
from relayflow.token_ids import locate

#: The virtual clock's default start: 2023-11-14T22:13:20Z.
DEFAULT_START_MS = 1_700_000_000_000
_MAX_ALARMS = 1_000_000


def crash() -> NoReturn:
    """Kill the step host here, as if its process died (call it inside a step).

    The invocation ends without answering and nothing it did is saved; the run stays
    leased by the dead driver until ``env.recover(run_id)`` drives it again, or until that
    driver's lease ends (``CoreSettings.lease_ms`` after it last renewed it) and
    ``env.sweep()`` finds it due.
    """
    raise HostCrashSignal("simulated step host crash")


def _duration_ms(duration: int | str) -> int:
    from relayflow.sdk.durations import parse_duration

    return parse_duration(duration)


def _register(workflows: Iterable[Any]) -> dict[str, Any]:
    """Make sure each given workflow is the one registered under its id."""
    from relayflow.sdk.registry import find_workflow, workflow

    by_id: dict[str, Any] = {}
    for wf in workflows:
        if find_workflow(wf.id) is not wf:
            config = wf.config
            workflow(
                id=wf.id,
                retry=config.retry,
                timeout=config.timeout_ms,
                tags=config.tags,
                description=config.description,
                schedule=list(config.schedules),
                checkpoint=config.checkpoint,
                concurrency=config.concurrency,
            )(wf.fn)
        by_id[wf.id] = find_workflow(wf.id)
    return by_id


def _host_options(
    clock: VirtualClock, step_mocks: Mapping[str, Any] | None, checkpoints: CheckpointLog
) -> dict[str, Any]:
    """Executor options: in-process retry waits move the virtual clock instead of sleeping."""
    from relayflow.worker import ExecutorOptions

    def sleep(seconds: float) -> None:
        clock.advance(max(0, round(seconds * 1000)))

    fields: dict[str, Any] = {"sleep": sleep}
    if "rate_limiter" in ExecutorOptions.__dataclass_fields__:
        from relayflow.adapters.memory.flow import InMemoryRateLimiter

        # One limiter for every run the environment hosts: a limit is shared by all runs.
        fields["rate_limiter"] = InMemoryRateLimiter()
    if step_mocks:
        if "step_mocks" not in ExecutorOptions.__dataclass_fields__:
            raise ValidationError(
                "step_mocks needs a step host that supports them "
                "(ExecutorOptions.step_mocks is missing)"
            )
        fields["step_mocks"] = dict(step_mocks)
    return {"options": ExecutorOptions(**fields), "checkpoints": checkpoints}


def _cached(store: WorkflowPauses, clock: VirtualClock) -> PausedWorkflows:
    return store if isinstance(store, PausedWorkflows) else PausedWorkflows(store, clock)


def _memory_manifests(clock: VirtualClock) -> ManifestStore:
    from relayflow.adapters.memory.manifests import InMemoryManifestStore

    store: ManifestStore = InMemoryManifestStore(clock=clock)
    return store


class WorkflowTestEnv:
    """An orchestrator with a virtual clock, hosting ``workflows`` in process.

    Every adapter is in memory unless given: pass AWS ones (on moto, say) to run the same
    tests against them; give them the same ``clock``.

    Args:
        workflows: The ``@workflow`` objects to host.
        services: What ``ctx.services`` resolves in their bodies.
        step_mocks: Step id -> callable replacing that step's function.
        settings: Core limits (operations limit, inbox size...).
        start_ms: Initial virtual time (epoch ms) of a new clock; not with ``clock``.
        environment: Default environment of triggered runs.
        clock: The virtual clock (a new one at ``start_ms`` by default).
        runs: The run store.
        alarms: The alarm clock, whose due alarms :meth:`advance` fires (e.g.
            :class:`~relayflow.testing.alarms.EmulatedScheduler` for Scheduler on moto).
        manifests: The manifest store.
        payloads: Where large values are kept (read back by the run views).
        checkpoints: The runs' checkpoint log (in memory by default), written by the
            in-process step host for workflows that checkpoint per step.
        pending: Where events and signals wait for the run's record to take them (in
            memory by default).
        slots: The concurrency slots of workflows declaring ``concurrency`` (in memory by
            default).
        debouncer: The open bursts of debounced triggers (in memory by default).
        audit: Where operator actions are recorded across runs (in memory by default).
        workflow_pauses: Which workflows are paused (in memory by default), read through
            a :class:`~relayflow.operations.paused.PausedWorkflows` cache as deployed: a mark
            written to this store directly is seen within 5 s of virtual time, one written
            through the engine at once.
        statistics: Where the hourly rollups of finished runs go (in memory by default).

    Example:
        >>> env = WorkflowTestEnv(workflows=[fulfil], services={"mailer": FakeMailer()})
        >>> run = env.trigger("orders.fulfil", {"id": "o1"}, idempotency_key="o1")
        >>> env.advance("10m")
        >>> env.get_run(run.id).status
        'waiting'
    """

    def __init__(
        self,
        workflows: Sequence[Any] = (),
        services: Mapping[str, object] | None = None,
        *,
        step_mocks: Mapping[str, Any] | None = None,
        settings: CoreSettings | None = None,
        start_ms: int | None = None,
        environment: str = "development",
        clock: VirtualClock | None = None,
        runs: RunStore | None = None,
        alarms: FiredAlarms | None = None,
        manifests: ManifestStore | None = None,
        payloads: PayloadStore | None = None,
        checkpoints: CheckpointLog | None = None,
        pending: PendingDeliveries | None = None,
        slots: ConcurrencySlots | None = None,
        debouncer: Debouncer | None = None,
        audit: AuditLog | None = None,
        workflow_pauses: WorkflowPauses | None = None,
        statistics: RunStatistics | None = None,
    ) -> None:
        if clock is not None and start_ms is not None:
            raise ValidationError("pass start_ms or clock, not both")
        self._workflows = _register(workflows)
        self.clock = clock or VirtualClock(DEFAULT_START_MS if start_ms is None else start_ms)
        self.runs: RunStore = runs or InMemoryRunStore()
        self.alarms: FiredAlarms = alarms or InMemoryAlarmClock()
        self.checkpoints: CheckpointLog = checkpoints or InMemoryCheckpointLog()
        self.dispatcher = InlineDispatcher(
            services=services,
            clock=self.clock,
            handler_options=_host_options(self.clock, step_mocks, self.checkpoints),
        )
        self.engine = Engine(
            runs=self.runs,
            alarms=self.alarms,
            dispatchers=DispatcherResolver(default=self.dispatcher),
            clock=self.clock,
            settings=settings,
            workflow_timeout=self._timeout_of,
            checkpoints=self.checkpoints,
            pending=pending or InMemoryPendingDeliveries(),
            slots=slots or InMemoryConcurrencySlots(),
            concurrency_of=self._concurrency_of,
            debouncer=debouncer or InMemoryDebouncer(),
            audit=audit or InMemoryAuditLog(self.clock),
            workflow_pauses=_cached(workflow_pauses or InMemoryWorkflowPauses(), self.clock),
        )
        self.environment = environment
        self.driver = WorkflowDriver(
            engine=self.engine,
            manifests=manifests or _memory_manifests(self.clock),
            payloads=payloads,
        )
        self.admin: WorkflowAdmin = self.driver.admin
        self.statistics: RunStatistics = statistics or InMemoryRunStatistics()
        attach_statistics(self.driver, self.statistics)
        self.schedule_host = InMemoryScheduleHost(self.clock)
        self.schedules = attach_schedules(
            self.driver, states=InMemoryScheduleStateStore(), host=self.schedule_host
        )
        self._schedule_clock = VirtualScheduleClock(self.schedule_host)
        if any(getattr(wf.config, "schedules", ()) for wf in self._workflows.values()):
            from relayflow.events.manifest import build_manifest

            self.register_manifest(
                build_manifest(environment=environment, workflows=self._workflows.values())
            )

    def _concurrency_of(self, workflow_id: str, environment: str) -> Concurrency | None:
        from relayflow.sdk.registry import find_workflow

        found = self._workflows.get(workflow_id) or find_workflow(workflow_id)
        declared = getattr(getattr(found, "config", None), "concurrency", None)
        return declared if isinstance(declared, Concurrency) else None

    def _timeout_of(self, workflow_id: str) -> int | None:
        from relayflow.sdk.registry import find_workflow

        found = self._workflows.get(workflow_id) or find_workflow(workflow_id)
        timeout = getattr(getattr(found, "config", None), "timeout_ms", None)
        return timeout if isinstance(timeout, int) else None

    # ----- time ---------------------------------------------------------------------------

    def now(self) -> int:
        """The virtual time in epoch milliseconds."""
        return self.clock.now_ms()

    def advance(self, duration: int | str) -> None:
        """Move time forward, firing every alarm that falls due on the way, in order."""
        self._fire_until(self.now() + _duration_ms(duration))

    def run_until_idle(self) -> None:
        """Jump to each next alarm and fire it, until no alarm is left.

        Alarms that only look again do not count as work left: a parent's periodic check on
        its live children (a run whose child is blocked on an event leaves
        ``run_until_idle`` idle rather than spinning), and a run's next try of the code
        version it is pinned to while another build answers.
        """
        self._fire_until(None)

    def _only_looks_again(self, run_id: str, wake_at: int) -> bool:
        record = self.runs.get(run_id)
        if record is None:
            return False
        if record.version_wait is not None:
            return True
        if reconcile_time(record) != wake_at:
            return False
        return all(w.kind == "RUN" for w in record.pending_waitpoints)

    def _fire_until(self, target: int | None) -> None:
        for _ in range(_MAX_ALARMS):
            upcoming = self.alarms.next_alarm()
            horizon = upcoming[1] if upcoming is not None else None
            if target is not None:
                horizon = target if horizon is None else min(horizon, target)
            firing = self._schedule_clock.next_firing()
            if firing is not None and horizon is not None and firing[0] <= horizon:
                # A schedule falls due before the next alarm: fire it first, in time order.
                self.clock.set(max(self.now(), firing[0]))
                self._schedule_clock.mark(firing[1], firing[0])
                self.schedules.handle_firing(firing[2])
                continue
            if upcoming is None or (target is not None and upcoming[1] > target):
                break
            if target is None and all(
                self._only_looks_again(*alarm) for alarm in self.alarms.pending()
            ):
                break
            run_id, wake_at = upcoming
            self.clock.set(wake_at)
            self.fire_alarm(run_id, wake_at)
        else:
            raise RelayflowError(f"more than {_MAX_ALARMS} alarms fired; a run never settles")
        if target is not None:
            self.clock.set(target)

    def fire_alarm(self, run_id: str, wake_at: int | None = None) -> None:
        """Deliver the run's alarm now (also usable to send an early or duplicate alarm)."""
        armed = self.alarms.armed(run_id)
        if wake_at is None:
            wake_at = armed if armed is not None else self.now()
        # Consumes the alarm of exactly this wake (a run may have an older one still armed).
        self.alarms.take(run_id, wake_at)
        self.engine.drive_from_event({"runId": run_id, "wakeAt": wake_at})

    def fire_schedule(self, schedule_id: str, scheduled_time: str) -> FiringResult:
        """Deliver a schedule firing now for ``scheduled_time`` (ISO 8601), as Scheduler
        would (also usable to send a duplicate or late firing)."""
        return self.schedules.handle_firing(
            {
                "kind": "schedule",
                "environment": self.environment,
                "scheduleId": schedule_id,
                "scheduledTime": scheduled_time,
            }
        )

    def armed_alarm(self, run_id: str) -> int | None:
        """When the run's alarm is armed, or None."""
        return self.alarms.armed(run_id)

    # ----- runs ---------------------------------------------------------------------------

    def trigger(self, workflow: Any, input: Any = None, **options: Any) -> RunDetail:
        """Start a run (``idempotency_key=``, ``tags=``, ``environment=``, ``run_id=``,
        ``options=TriggerOptions(...)`` for delay, debounce, ttl, priority and concurrency
        key)."""
        options.setdefault("environment", self.environment)
        return self.driver.trigger(workflow, input, **options)

    def get_run(self, run_id: str, *, values: bool = False) -> RunDetail:
        """The run's detail: ``status``, ``output``, ``error``, ``timeline``, ``metadata``...

        With ``values`` each timeline entry carries its checkpointed value (capped).
        """
        found = self.admin.get_run(run_id, values=values)
        if found is None:
            raise RunNotFoundError(f"no run with id {run_id!r}")
        return found

    def list_runs(self, **filters: Any) -> RunListPage:
        """Runs newest first (see ``WorkflowAdmin.list_runs``)."""
        return self.admin.list_runs(**filters)

    def stream_run(
        self, run_id: str, *, follow: bool = False, values: bool = False
    ) -> list[JournalEvent]:
        """The run's journal events so far (or, with ``follow``, until it ends)."""
        return list(self.admin.stream_run(run_id, follow=follow, values=values))

    def cancel(self, run_id: str, reason: str | None = None, compensate: bool = False) -> RunDetail:
        """Cancel a run (and its children), compensating first when asked."""
        return self.admin.cancel_run(run_id, reason=reason, compensate=compensate)

    def recover(self, run_id: str) -> RunDetail:
        """Drive again a run whose host crashed, from its last saved record (like the sweeper)."""
        self.engine.recover(run_id)
        return self.get_run(run_id)

    def sweep(self) -> list[str]:
        """Drive again every run whose wake time passed and whose lease is free or expired."""
        return self.engine.sweep()

    # ----- events and manifests -------------------------------------------------------------

    def register_manifest(self, manifest: Mapping[str, Any], environment: str | None = None) -> str:
        """Register a manifest for event routing; returns its version id."""
        return self.driver.register_manifest(environment or self.environment, manifest)

    def ingest_event(
        self,
        envelope: Mapping[str, Any],
        *,
        environment: str | None = None,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        """Route an event through the registered manifest (``{ok, eventId, matches}``)."""
        return self.driver.ingest_event(
            environment or self.environment, envelope, idempotency_key=idempotency_key
        )

    # ----- injections -----------------------------------------------------------------------

    def send_event(
        self, run_id: str, event_type: str, payload: Any = None, **options: Any
    ) -> DeliveryResult:
        """Send an event to a run (``event_id=``, ``metadata=``)."""
        return self.driver.send_event(run_id, event_type, payload, **options)

    def signal(self, run_id: str, name: str, payload: Any = None) -> DeliveryResult:
        """Send a signal to a run."""
        return self.driver.send_signal(run_id, name, payload)

    def complete_token(
        self, token_id: str, payload: Any = None, *, run_id: str | None = None
    ) -> DeliveryResult:
        """Complete a token; a generated id locates its run, an authored one is looked up
        among pending waits unless ``run_id`` is given."""
        return self.driver.complete_token(
            token_id, payload, run_id=self._token_run(token_id, run_id)
        )

    def fail_token(self, token_id: str, error: Any, *, run_id: str | None = None) -> DeliveryResult:
        """Fail a token with ``error`` (an exception, a message or an error dict)."""
        return self.driver.fail_token(token_id, error, run_id=self._token_run(token_id, run_id))

    def heartbeat_token(self, token_id: str, *, run_id: str | None = None) -> DeliveryResult:
        """Heartbeat a token wait."""
        return self.driver.heartbeat_token(token_id, run_id=self._token_run(token_id, run_id))

    def _token_run(self, token_id: str, run_id: str | None) -> str | None:
        if run_id is not None or locate(token_id) is not None:
            return run_id
        owners: list[str] = []
        cursor: str | None = None
        while True:
            page = self.runs.list_runs(
                RunQuery(statuses=("waiting", "running"), limit=500, cursor=cursor)
            )
            owners.extend(
                r.id
                for r in page.runs
                if any(
                    w.kind == "MANUAL" and w.meta.get("tokenId") == token_id
                    for w in r.pending_waitpoints
                )
            )
            cursor = page.next_cursor
            if cursor is None:
                break
        if len(owners) != 1:
            found = "no run" if not owners else f"{len(owners)} runs"
            raise ValidationError(
                f"{found} waiting on token {token_id!r}; pass run_id= to say which run"
            )
        return owners[0]
