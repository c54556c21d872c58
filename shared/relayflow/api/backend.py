"""The operations the HTTP API performs, over a ``WorkflowDriver`` and its ``WorkflowAdmin``.

Routes speak only to :class:`Backend`; it turns request models into driver calls.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from relayflow.admin import WorkflowAdmin
from relayflow.api.action_models import RedriveRunRequest, RerunRunRequest
from relayflow.api.models import TriggerRunRequest
from relayflow.concurrency_admin import KeyState, SlotRelease
from relayflow.core.trigger import resolve_run_id
from relayflow.core.views import RunDetail, RunListPage, TimelinePage
from relayflow.drivers import DeliveryResult, WorkflowDriver
from relayflow.errors import InvalidEventError, RelayflowError, RunNotFoundError
from relayflow.events.ingest import validate_ingest_body
from relayflow.events.manifest import validate_environment
from relayflow.operations.ports import AuditPage, AuditQuery
from relayflow.operations.versions import VersionsReport
from relayflow.run_history import RunHistory


class Triggered(NamedTuple):
    """What ``Backend.trigger`` did: the run, whether this call created it, and the
    transient error that interrupted its first drive once it was stored."""

    run: RunDetail
    created: bool
    interrupted: RelayflowError | None


class Backend:
    """Driver calls of the API routes."""

    def __init__(self, driver: WorkflowDriver, admin: WorkflowAdmin) -> None:
        """Wrap a driver and its admin."""
        self.driver = driver
        self.admin = admin

    # -- runs --------------------------------------------------------------------------------

    def trigger(self, request: TriggerRunRequest, *, hand_off: bool = False) -> Triggered:
        """Start a run; returns it after the inline drive and whether this call created it.

        With ``hand_off`` the run is only stored here and handed to the drive function.

        A keyed trigger (idempotency key or explicit run id) whose run already exists gets
        that run back untouched; ``created`` is the engine's word (the insert that won).

        Flow-control options (``delay``, ``debounce``, ``ttl``, ``priority``,
        ``concurrencyKey``) go to the orchestrator: the run may be stored ``delayed`` or
        ``queued``, or the answer may be the run a debounced trigger joined (not created).

        A backing service failing transiently once the run is stored (arming its alarm,
        saving a step) does not undo the run: it is returned as stored, with the error in
        ``interrupted``; the sweeper drives it when it is due.
        """
        options = request.flow_options()
        run_id = resolve_run_id(
            request.workflow_id,
            run_id=request.run_id,
            idempotency_key=request.idempotency_key,
            generated="",
        )
        existing = self.admin.get_run(run_id) if run_id else None
        if existing is None:
            # Refused at once (404), rather than a run that fails at its first step.
            self.driver.check_runnable(request.workflow_id, request.environment)
        # The id is chosen here, so that a run stored before a failure can be found.
        run_id = run_id or self.driver.engine.new_run_id()
        try:
            run, created = self.driver.start(
                request.workflow_id,
                request.input,
                idempotency_key=request.idempotency_key,
                tags=tuple(request.tags),
                environment=request.environment,
                run_id=run_id,
                drive=not hand_off,
                options=options if options.given() else None,
                lock_to_version=request.lock_to_version,
            )
            if created and hand_off and run.status == "running":
                self.driver.engine.hand_off_or_raise(run_id)
        except RelayflowError as exc:
            stored = self.admin.get_run(run_id) if getattr(exc, "transient", False) else None
            if stored is None or existing is not None:
                raise
            return Triggered(stored, True, exc)
        return Triggered(run, created, None)

    def get_run(self, run_id: str) -> RunDetail:
        """The run; raises ``RunNotFoundError``."""
        run = self.admin.get_run(run_id)
        if run is None:
            raise RunNotFoundError(f"no run with id {run_id!r}")
        return run

    def timeline(
        self, run_id: str, *, values: bool, cursor: str | None, limit: int
    ) -> TimelinePage:
        """One page of the run's timeline; raises ``RunNotFoundError``/``ValidationError``."""
        page: TimelinePage = self.admin.timeline(run_id, values=values, cursor=cursor, limit=limit)
        return page

    def history(self, run_id: str) -> RunHistory:
        """The run's history with its values; raises ``RunNotFoundError``."""
        return self.admin.history(run_id)

    def list_runs(
        self,
        *,
        environment: str | None,
        workflow_id: str | None,
        statuses: tuple[str, ...],
        tag: str | None,
        started_after: int | None,
        started_before: int | None,
        limit: int,
        cursor: str | None,
        code_version: str | None = None,
        parent_run_id: str | None = None,
    ) -> RunListPage:
        """One page of runs, newest first."""
        return self.admin.list_runs(
            environment=environment,
            workflow=workflow_id,
            status=statuses or None,
            tag=tag,
            started_after=started_after,
            started_before=started_before,
            code_version=code_version,
            parent_run_id=parent_run_id,
            limit=limit,
            cursor=cursor,
        )

    def cancel(
        self, run_id: str, reason: str | None, compensate: bool, *, by: str, action_id: str
    ) -> RunDetail:
        """Cancel a run; returns it after the cancel."""
        return self.admin.cancel_run(
            run_id, reason=reason, compensate=compensate, by=by, action_id=action_id
        )

    def pause(self, run_id: str, reason: str | None, *, by: str, action_id: str) -> RunDetail:
        """Pause a running or waiting run; returns it paused."""
        return self.admin.pause_run(run_id, by=by, action_id=action_id, reason=reason)

    def resume(self, run_id: str, reason: str | None, *, by: str, action_id: str) -> RunDetail:
        """Resume a paused run; returns it after the resume's drive."""
        return self.admin.resume_run(run_id, by=by, action_id=action_id, reason=reason)

    def upgrade(self, run_id: str, reason: str | None, *, by: str, action_id: str) -> RunDetail:
        """Move a run that has not ended to the current code; returns it after the drive."""
        return self.admin.upgrade_run(run_id, by=by, action_id=action_id, reason=reason)

    def redrive(
        self, run_id: str, request: RedriveRunRequest, *, by: str, action_id: str
    ) -> RunDetail:
        """Redrive a failed, cancelled or compensation_failed run from its failure point."""
        retry = request.retry.override() if request.retry is not None else None
        return self.admin.redrive_run(
            run_id, by=by, action_id=action_id, reason=request.reason, retry=retry
        )

    def rerun(self, run_id: str, request: RerunRunRequest, *, by: str, action_id: str) -> RunDetail:
        """Start a new run from a top-level step of an ended run; returns the new run."""
        # Without ``input`` the admin keeps the original's (its default).
        given: dict[str, Any] = {"input": request.input} if request.gives_input else {}
        return self.admin.rerun_run(
            run_id,
            from_step=request.from_step,
            by=by,
            action_id=action_id,
            reason=request.reason,
            **given,
        )

    def send_event(
        self,
        run_id: str,
        event_type: str,
        payload: Any,
        event_id: str | None,
        *,
        claimed: bool = False,
    ) -> DeliveryResult:
        """Deliver an event to one run (``claimed``: the request holds the id's claim)."""
        return self.driver.send_event(
            run_id, event_type, payload, event_id=event_id, claimed=claimed
        )

    def send_signal(
        self,
        run_id: str,
        name: str,
        payload: Any,
        signal_id: str | None = None,
        *,
        claimed: bool = False,
    ) -> DeliveryResult:
        """Deliver a signal to one run (``claimed``: the request holds the id's claim)."""
        return self.driver.send_signal(run_id, name, payload, signal_id=signal_id, claimed=claimed)

    def complete_token(self, run_id: str | None, token_id: str, payload: Any) -> DeliveryResult:
        """Complete a token (``run_id`` None: the token id locates its run)."""
        return self.driver.complete_token(token_id, payload, run_id=run_id)

    def fail_token(
        self, run_id: str | None, token_id: str, code: str | None, message: str
    ) -> DeliveryResult:
        """Fail a token with ``{code?, message}``."""
        error: dict[str, Any] = {"message": message}
        if code is not None:
            error["code"] = code
        return self.driver.fail_token(token_id, error, run_id=run_id)

    def heartbeat_token(self, run_id: str | None, token_id: str) -> DeliveryResult:
        """Heartbeat a token."""
        return self.driver.heartbeat_token(token_id, run_id=run_id)

    # -- concurrency ------------------------------------------------------------------------

    def concurrency_key(self, workflow_id: str, key: str | None, environment: str) -> KeyState:
        """A key's holders and queue; raises ``WorkflowNotFoundError`` (unknown workflow),
        ``NotConcurrencyLimitedError`` or ``ValidationError`` (no key for a keyed limit)."""
        self.driver.check_runnable(workflow_id, environment)
        return self.admin.concurrency.key_state(workflow_id, key, environment=environment)

    def release_slot(
        self, workflow_id: str, run_id: str, key: str | None, environment: str
    ) -> SlotRelease:
        """Free an ended run's slot and start the queued runs that take it."""
        self.driver.check_runnable(workflow_id, environment)
        return self.admin.concurrency.release(workflow_id, run_id, key, environment=environment)

    # -- audit ------------------------------------------------------------------------------

    def live_versions(self, environment: str | None, workflow_id: str | None) -> VersionsReport:
        """The code versions live runs are on, per workflow."""
        return self.admin.live_versions(environment=environment, workflow=workflow_id)

    def audit_log(self, query: AuditQuery) -> AuditPage:
        """One page of the audit log (ValidationError on a bad cursor)."""
        return self.admin.audit_log(query)

    # -- events and manifests ---------------------------------------------------------------

    def ingest(self, body: Any) -> tuple[dict[str, Any], int]:
        """Validate an ingest body (reference order and messages) and ingest the event;
        returns the result and the number of runs it created."""
        request = validate_ingest_body(body)
        created: list[str] = []
        result = self.driver.ingest_event(
            request.environment,
            request.envelope,
            idempotency_key=request.idempotency_key,
            on_created=created.append,
        )
        return result, len(created)

    def register_manifest(self, body: Any) -> str:
        """Validate ``{environment, manifest}`` and register; returns the ``versionId``."""
        if not isinstance(body, dict):
            raise InvalidEventError("expected JSON object")
        environment = validate_environment(body.get("environment"))
        manifest = body.get("manifest")
        if not isinstance(manifest, dict):
            raise InvalidEventError('"manifest" must be an object')
        return self.driver.register_manifest(environment, manifest)

    def get_manifest(self, environment: str) -> tuple[str, dict[str, Any]] | None:
        """The current ``(versionId, manifest)`` of ``environment``, or None."""
        manifest = self.driver.get_manifest(environment)
        if manifest is None:
            return None
        return str(manifest.get("versionId", "")), manifest


def raw_json_body(router: Any) -> Any:
    """The request body exactly as parsed from JSON (None when empty).

    Bodies the events module validates are read here rather than from the route parameter,
    which Powertools normalises (a one-item list would arrive as its item).
    """
    return router.current_event.json_body
