"""The driver interface (reference §6) built on the engine and a set of adapters: manifests,
triggers, events and deliveries. The admin interface lives in :mod:`relayflow.admin`."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from relayflow._aliases import renamed
from relayflow.adapters.memory.deliveries import InMemoryDeliveryLog
from relayflow.admin import WorkflowAdmin
from relayflow.core.inbox import Injection, InjectionOutcome, InjectionResult
from relayflow.core.record import RecordModel, RunRecord
from relayflow.core.trigger import TriggerSpec, resolve_run_id
from relayflow.core.views import RunDetail
from relayflow.deliveries import (
    DAY_MS,
    DeliveryIdClaims,
    delivery_fingerprint,
    delivery_key,
    run_scope,
)
from relayflow.engine import Engine
from relayflow.errors import (
    DriverShutdownError,
    IdempotencyKeyReusedError,
    RelayflowError,
    RunNotFoundError,
    TokenNotFoundError,
    ValidationError,
    WorkflowNotFoundError,
)
from relayflow.flow.declarations import TriggerOptions
from relayflow.json_values import non_json_reason
from relayflow.operations.bulk_host import host_bulk_jobs
from relayflow.ports import ManifestStore, PayloadStore, WorkflowCatalog
from relayflow.protocol import MAX_JSON_DEPTH, RunTrigger, SerializedError, TenantMeta, json_depth
from relayflow.token_ids import locate
from relayflow.tracing.context import caller_trace
from relayflow.tracing.observer import RunTracer
from relayflow.version_locks import DEFAULT_WORKFLOW_VERSION, check_locked_version
from relayflow.workflow_refs import WorkflowRef, workflow_config_of, workflow_id_of


class DeliveryResult(RecordModel):
    """What one delivery (an event, signal or token outcome sent to one run) came to.

    ``status``: ``resolved`` (a wait took it), ``buffered`` (kept in the run's inbox for a
    later wait), ``duplicate`` (its id was seen before) or ``heartbeat``.
    """

    status: str
    waitpoint_id: str | None = None
    run: RunDetail


def replay_answer(delivery: DeliveryResult) -> dict[str, Any]:
    """What a delivery id's claim keeps for the driver to answer a repeat with."""
    return {"waitpointId": delivery.waitpoint_id}


def token_error(error: Any) -> SerializedError:
    """Normalise what a caller gives ``fail_token`` into a serialised error."""
    if isinstance(error, SerializedError):
        return error
    if isinstance(error, Mapping):
        data = dict(error)
        data.setdefault("code", "TOKEN_FAILED")
        return SerializedError.model_validate(data)
    if isinstance(error, RelayflowError):
        return SerializedError(code=error.code, message=error.message, name=type(error).__name__)
    if isinstance(error, BaseException):
        return SerializedError(code="TOKEN_FAILED", message=str(error), name=type(error).__name__)
    return SerializedError(code="TOKEN_FAILED", message=str(error))


def token_target(token_id: str, run_id: str | None) -> tuple[str, str]:
    """``(run id, token id within the run)`` of a token given with or without its run.

    A run-locating id (one relayflow generated) names its run; any other id needs
    ``run_id``. A run-locating id sent to another run's route is refused.
    """
    located = locate(token_id)
    if located is None:
        if run_id is None:
            raise TokenNotFoundError(
                f"token id {token_id!r} does not name its run (the workflow chose it); "
                "give the run id too"
            )
        return run_id, token_id
    owner, local_id = located
    if run_id is not None and run_id != owner:
        raise TokenNotFoundError(f"token {token_id!r} belongs to another run, not {run_id!r}")
    return owner, local_id


def _check_depth(what: str, value: Any) -> None:
    if json_depth(value) > MAX_JSON_DEPTH:
        raise ValidationError(f"{what} nests deeper than {MAX_JSON_DEPTH} levels")
    reason = non_json_reason(value)
    if reason is not None:
        raise ValidationError(f"{what} is not JSON: {reason}")


class WorkflowDriver:
    """Registers manifests, triggers runs, routes events and delivers injections.

    Args:
        engine: The engine that stores and drives runs.
        manifests: Manifest storage per environment.
        tenant_meta: Owner given to runs this driver starts.
        workflow_timeout: Looks up a workflow's timeout (ms) when triggered by id.
        payloads: Where step hosts put values over the inline cap (resolved in run details).
        host_catalog: Says whether the step host of a workflow has it (True/False), or cannot
            tell (None); by default the run's dispatcher is asked, when it can answer.
        deliveries: Where delivery ids (signal and event ids) are remembered for the run's
            life (in memory by default).
    """

    def __init__(
        self,
        *,
        engine: Engine,
        manifests: ManifestStore,
        tenant_meta: TenantMeta | None = None,
        workflow_timeout: Callable[[str], int | None] | None = None,
        payloads: PayloadStore | None = None,
        host_catalog: Callable[[str], bool | None] | None = None,
        deliveries: DeliveryIdClaims | None = None,
    ) -> None:
        self.engine = engine
        # Each run's spans, when a tracer provider is installed (see docs/guides/tracing.md).
        engine.add_observer(RunTracer())
        self.host_catalog = host_catalog
        self.manifests = manifests
        self.deliveries = deliveries or DeliveryIdClaims(
            InMemoryDeliveryLog(), engine.clock, hold_ms=15_000, memory_ms=400 * DAY_MS
        )
        self.tenant_meta = tenant_meta or TenantMeta()
        self._workflow_timeout = workflow_timeout
        self._shut = threading.Event()
        self.admin = WorkflowAdmin(engine=engine, payloads=payloads)
        host_bulk_jobs(engine, self.admin)
        #: The schedule service (``relayflow.schedules.ScheduleService``) when schedules are
        #: hosted; registering a manifest then reconciles its schedules.
        self.schedules: Any = None
        #: Where the hourly rollups of finished runs live
        #: (``relayflow.stats.RunStatistics``), when recorded; the statistics route reads it.
        self.statistics: Any = None

    def _check_open(self) -> None:
        if self._shut.is_set():
            raise DriverShutdownError("the driver was shut down; it accepts no new work")

    def shutdown(self) -> None:
        """Refuse new work from now on; reads and admin keep working."""
        self._shut.set()

    def register_manifest(self, environment: str, manifest: Mapping[str, Any]) -> str:
        """Store ``manifest`` as the environment's current one; returns its ``versionId``.

        With schedules hosted, the environment's schedules are then reconciled onto the host.
        """
        self._check_open()
        version_id = self.manifests.register(environment, dict(manifest))
        if self.schedules is not None:
            self.schedules.reconcile(environment)
        return version_id

    def get_manifest(self, environment: str) -> dict[str, Any] | None:
        """The environment's current manifest, or None."""
        return self.manifests.get_current(environment)

    def check_runnable(self, workflow_id: str, environment: str) -> None:
        """Refuse a workflow this deployment knows it cannot run, before any run is created.

        Known from the manifest registered for ``environment`` (when there is one, it must
        list the workflow) and from the step host, when it can tell. With neither, the
        trigger goes ahead as the reference allows.

        Raises:
            WorkflowNotFoundError: The manifest does not list it, or its host does not have it.
        """
        manifest = self.manifests.get_current(environment)
        if manifest is not None:
            listed = [
                str(w.get("id")) for w in manifest.get("workflows", []) if isinstance(w, Mapping)
            ]
            if workflow_id not in listed:
                shown = ", ".join(listed[:10]) + (", ..." if len(listed) > 10 else "")
                raise WorkflowNotFoundError(
                    f"workflow {workflow_id!r} is not in the manifest registered for "
                    f"{environment!r} (it lists: {shown or 'no workflows'}); register one that "
                    "includes it (relayflow manifest push --app MODULE)"
                )
        if self._hosts_workflow(workflow_id) is False:
            raise WorkflowNotFoundError(
                f"workflow {workflow_id!r} is not registered on its step host"
            )

    def _hosts_workflow(self, workflow_id: str) -> bool | None:
        if self.host_catalog is not None:
            return self.host_catalog(workflow_id)
        dispatcher = self.engine.dispatchers.resolve(
            workflow_id=workflow_id, tenant_script=self.tenant_meta.tenant_script
        )
        if isinstance(dispatcher, WorkflowCatalog):
            return dispatcher.hosts_workflow(workflow_id)
        return None

    def trigger(
        self,
        workflow: WorkflowRef,
        input: Any = None,
        *,
        idempotency_key: str | None = None,
        tags: Sequence[str] = (),
        environment: str = "development",
        run_id: str | None = None,
        timeout_ms: int | None = None,
        triggered_by: Mapping[str, Any] | None = None,
        options: TriggerOptions | None = None,
        lock_to_version: str | None = None,
    ) -> RunDetail:
        """Start a run and drive it inline (bounded); returns the run as it then stands.

        A second trigger with the same idempotency key (or run id) returns the first run
        untouched: same id, original input, not driven again. ``options`` are the trigger's
        flow controls (``delay``, ``debounce``, ``ttl``, ``priority``, ``concurrency_key``):
        the run may come back ``delayed`` or ``queued``, or be the run a debounced trigger
        joined. ``lock_to_version`` is the run's workflow version (default ``v1``); with a
        manifest registered for ``environment`` it must be the version the manifest lists.

        Raises:
            VersionNotFoundError: The manifest lists the workflow under another version (no
                run is created).
        """
        run, _ = self.start(
            workflow,
            input,
            idempotency_key=idempotency_key,
            tags=tags,
            environment=environment,
            run_id=run_id,
            timeout_ms=timeout_ms,
            triggered_by=triggered_by,
            options=options,
            lock_to_version=lock_to_version,
        )
        return run

    def start(
        self,
        workflow: WorkflowRef,
        input: Any = None,
        *,
        idempotency_key: str | None = None,
        tags: Sequence[str] = (),
        environment: str = "development",
        run_id: str | None = None,
        timeout_ms: int | None = None,
        triggered_by: Mapping[str, Any] | None = None,
        drive: bool = True,
        options: TriggerOptions | None = None,
        lock_to_version: str | None = None,
    ) -> tuple[RunDetail, bool]:
        """Like :meth:`trigger`, and whether this call's insert created the run.

        Of concurrent calls with one idempotency key exactly one gets True: the one whose
        conditional insert won. ``drive=False`` only inserts (the caller hands the drive off).
        """
        self._check_open()
        record, created = self._trigger(
            workflow,
            input,
            idempotency_key=idempotency_key,
            tags=tags,
            environment=environment,
            run_id=run_id,
            timeout_ms=timeout_ms,
            triggered_by=triggered_by,
            drive=drive,
            options=options,
            lock_to_version=lock_to_version,
        )
        return self.admin.describe(record), created

    def _trigger(
        self,
        workflow: WorkflowRef,
        input: Any,
        *,
        idempotency_key: str | None,
        tags: Sequence[str],
        environment: str,
        run_id: str | None,
        timeout_ms: int | None,
        triggered_by: Mapping[str, Any] | None,
        drive: bool = True,
        options: TriggerOptions | None = None,
        event: Any = None,
        lock_to_version: str | None = None,
    ) -> tuple[RunRecord, bool]:
        _check_depth("run input", input)
        workflow_id = workflow_id_of(workflow)
        if lock_to_version is not None:
            manifest = self.manifests.get_current(environment)
            check_locked_version(manifest, workflow_id, environment, lock_to_version)
        config_timeout, config_tags = workflow_config_of(workflow)
        if timeout_ms is None:
            timeout_ms = config_timeout
        if timeout_ms is None and self._workflow_timeout is not None:
            timeout_ms = self._workflow_timeout(workflow_id)
        spec = TriggerSpec(
            workflow_id=workflow_id,
            input=input,
            run_id=resolve_run_id(
                workflow_id,
                run_id=run_id,
                idempotency_key=idempotency_key,
                generated=self.engine.new_run_id(),
            ),
            workflow_version=lock_to_version or DEFAULT_WORKFLOW_VERSION,
            environment=environment,
            tags=tuple(dict.fromkeys([*config_tags, *tags])),
            tenant_meta=self.tenant_meta,
            triggered_by=RunTrigger.model_validate(dict(triggered_by or {"kind": "api"})),
            idempotency_key=idempotency_key,
            timeout_ms=timeout_ms,
            flow=options,
            event=event,
            trace_parent=caller_trace(),
        )
        return self.engine.trigger(spec, drive=drive)

    def ingest_event(
        self,
        environment: str,
        envelope: Mapping[str, Any],
        idempotency_key: str | None = None,
        *,
        on_created: Callable[[str], None] | None = None,
    ) -> dict[str, Any]:
        """Route an event through the environment's manifest and trigger each match.

        ``on_created`` is told the id of each run this call's insert created (a match whose
        run already existed is queued too, but created nothing).

        Returns:
            ``{ok, eventId, matches[]}`` or ``{ok: False, reason, message}`` (reference §4.6).
        """
        self._check_open()
        from relayflow.events.ingest import TriggerRequest, ingest_event

        def start(request: TriggerRequest) -> str:
            record, created = self._trigger(
                request.workflow_id,
                request.input,
                idempotency_key=request.idempotency_key,
                tags=(),
                environment=request.environment,
                run_id=request.run_id,
                timeout_ms=None,
                triggered_by=request.triggered_by,
                event=request.event,
            )
            if created and on_created is not None:
                on_created(record.id)
            return record.id

        manifest = self.manifests.get_current(environment)
        return ingest_event(
            manifest, environment, dict(envelope), idempotency_key=idempotency_key, trigger=start
        )

    def _deliver(
        self, run_id: str, injection: Injection, *, given_id: bool = False, claimed: bool = False
    ) -> DeliveryResult:
        """Inject into the run; an id the caller chose is claimed first, for the run's life.

        ``claimed``: the caller holds the id's claim already (``delivery_key`` and
        ``delivery_fingerprint`` in ``run_scope``) and stores the answer on it, so the
        delivery costs one claim, not two.

        Raises:
            IdempotencyKeyReusedError: The id was delivered before with other content.
            RequestInProgressError: The first delivery with the id is still under way.
        """
        self._check_open()
        _check_depth("payload", injection.payload)
        if not given_id or claimed:
            return self._inject(run_id, injection)
        scope, key = run_scope(run_id), delivery_key(injection.kind, injection.id)
        digest = delivery_fingerprint(
            injection.kind, injection.key, injection.payload, injection.outcome
        )
        # The run deduplicates ids it still holds atomically (inbox, recent ids), so a
        # delivery whose first attempt died mid-way is redone at once, not refused.
        replay = self.deliveries.begin(scope, key, digest, share_unanswered=True, lifelong=True)
        if replay is not None:
            waitpoint = replay.answer.get("waitpointId")
            return self._duplicate(run_id, waitpoint if isinstance(waitpoint, str) else None)
        try:
            delivery = self._inject(run_id, injection)
        except RelayflowError:
            self.deliveries.abandon(scope, key, digest)
            raise
        self.deliveries.finish(
            scope,
            key,
            digest,
            {"status": delivery.status, **replay_answer(delivery)},
            lifelong=True,
        )
        return delivery

    def _inject(self, run_id: str, injection: Injection) -> DeliveryResult:
        result: InjectionResult
        result, record = self.engine.inject(run_id, injection)
        return DeliveryResult(
            status=result.status, waitpoint_id=result.waitpoint_id, run=self.admin.describe(record)
        )

    def send_event(
        self,
        run_id: str,
        event_type: str,
        payload: Any = None,
        *,
        event_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        claimed: bool = False,
    ) -> DeliveryResult:
        """Deliver an event to one run (resolving a matching wait, or into its inbox).

        ``claimed``: the caller holds the claim of ``event_id`` (see ``_deliver``).
        """
        meta = dict(metadata or {})
        given = event_id or meta.get("eventId")
        injection = Injection(
            kind="EVENT",
            key=event_type,
            id=str(given) if given else f"evt_{secrets.token_hex(8)}",
            payload=payload,
            metadata=meta,
        )
        return self._deliver(run_id, injection, given_id=bool(given), claimed=claimed)

    def send_signal(
        self,
        run_id: str,
        name: str,
        payload: Any = None,
        *,
        signal_id: str | None = None,
        claimed: bool = False,
    ) -> DeliveryResult:
        """Deliver a signal to one run.

        ``claimed``: the caller holds the claim of ``signal_id`` (see ``_deliver``).
        """
        injection = Injection(
            kind="SIGNAL", key=name, id=signal_id or f"sig_{secrets.token_hex(8)}", payload=payload
        )
        return self._deliver(run_id, injection, given_id=signal_id is not None, claimed=claimed)

    def complete_token(
        self, token_id: str, payload: Any = None, *, run_id: str | None = None
    ) -> DeliveryResult:
        """Complete a token: its wait returns ``payload`` (a token resolves once).

        ``run_id`` is needed only for a token id the workflow chose itself; generated ids
        locate their run.
        """
        return self._settle_token(token_id, run_id, "complete", payload=payload)

    def fail_token(self, token_id: str, error: Any, *, run_id: str | None = None) -> DeliveryResult:
        """Fail a token: its wait raises ``TokenFailedError`` carrying ``error``."""
        return self._settle_token(token_id, run_id, "fail", error=token_error(error))

    def heartbeat_token(self, token_id: str, *, run_id: str | None = None) -> DeliveryResult:
        """Push the heartbeat deadline of a token wait."""
        return self._settle_token(token_id, run_id, "heartbeat")

    def _settle_token(
        self,
        token_id: str,
        run_id: str | None,
        outcome: InjectionOutcome,
        *,
        payload: Any = None,
        error: SerializedError | None = None,
    ) -> DeliveryResult:
        """Deliver a token outcome. A completion or failure is claimed in the delivery log
        for the run's whole life (``token:<id>``): its repeat gets the first answer, and
        another outcome for a settled token answers ``duplicate``. Heartbeats repeat by
        design and are not logged."""
        run, key = token_target(token_id, run_id)
        heartbeat = outcome == "heartbeat"
        injection = Injection(
            kind="MANUAL",
            key=key,
            id=f"{'hb' if heartbeat else 'token'}:{key}",
            payload=payload,
            outcome=outcome,
            error=error,
        )
        if heartbeat:
            return self._deliver(run, injection)
        try:
            return self._deliver(run, injection, given_id=True)
        except IdempotencyKeyReusedError:
            # A token settles once: another outcome changes nothing, as it always answered.
            return self._duplicate(run, None)

    def _duplicate(self, run_id: str, waitpoint_id: str | None) -> DeliveryResult:
        """The answer to a delivery whose id was delivered before: the run as it stands."""
        record = self.engine.runs.get(run_id)
        if record is None:
            raise RunNotFoundError(f"no run with id {run_id!r}")
        return DeliveryResult(
            status="duplicate", waitpoint_id=waitpoint_id, run=self.admin.describe(record)
        )


__all__ = [
    "DeliveryResult",
    "WorkflowAdmin",
    "WorkflowDriver",
    "WorkflowRef",
    "replay_answer",
    "token_error",
    "token_target",
]

#: Names this module had before they were renamed (they warn, then resolve).
__getattr__ = renamed(__name__, {"Delivery": ("relayflow.drivers", "DeliveryResult")})
