"""Pausing and resuming a whole workflow in one environment.

A pause marks the workflow paused (its new runs are inserted ``paused``) and starts a bulk
job that pauses its runs in flight; a resume clears the mark, cancels that job if it is
still going, and starts a bulk job that resumes the workflow's paused runs at a bounded rate
(see docs/guides/operating-runs.md).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from relayflow.core.trigger import resolve_run_id
from relayflow.errors import RunActionConflictError, RunTerminalError, ValidationError
from relayflow.operations.bulk import BulkJob, BulkJobs
from relayflow.operations.bulk_models import BULK_WORKFLOW_ID, BulkFilter, BulkJobInput
from relayflow.operations.ports import AuditEntry, WorkflowPause, WorkflowPauses

#: How many paused runs a workflow's resume starts per second by default.
DEFAULT_RESUME_RATE = 50.0


@dataclass(frozen=True)
class WorkflowPauseChange:
    """A workflow paused or resumed: its mark and the bulk job acting on its runs."""

    mark: WorkflowPause
    job: BulkJob


class WorkflowPausing:
    """Pauses and resumes workflows through the engine's marks and bulk jobs."""

    def __init__(self, jobs: BulkJobs) -> None:
        self._jobs = jobs

    def _marks(self) -> WorkflowPauses:
        marks = self._jobs.engine.workflow_pauses
        if marks is None:
            raise ValidationError("this deployment keeps no workflow pause marks")
        return marks

    def paused(self, environment: str | None = None) -> list[WorkflowPause]:
        """The paused workflows (of one environment), as stored now."""
        return self._marks().list(environment)

    def pause(
        self, workflow_id: str, environment: str, *, by: str, reason: str | None = None
    ) -> WorkflowPauseChange:
        """Mark the workflow paused and start the job that pauses its runs in flight.

        Raises:
            RunActionConflictError: ``already_paused``.
        """
        clock = self._jobs.engine.clock
        mark = WorkflowPause(
            workflow_id=workflow_id,
            environment=environment,
            at=clock.now_ms(),
            by=by,
            reason=reason,
        )
        if not self._marks().pause(mark):
            raise RunActionConflictError(
                f"workflow {workflow_id} is paused already in {environment}",
                code="already_paused",
            )
        job, _ = self._jobs.start(
            BulkJobInput(
                action="pause",
                filter=BulkFilter(
                    environment=environment,
                    workflow_id=workflow_id,
                    statuses=["running", "waiting"],
                ),
                by=by,
                reason=reason or f"workflow {workflow_id} paused",
            ),
            key=_job_key("pause", mark),
        )
        self._audit("pause_workflow", mark, by, reason, job)
        return WorkflowPauseChange(mark, job)

    def resume(
        self,
        workflow_id: str,
        environment: str,
        *,
        by: str,
        reason: str | None = None,
        rate_per_second: float = DEFAULT_RESUME_RATE,
    ) -> WorkflowPauseChange:
        """Clear the mark, stop the pause's job if it still runs, and start the job that
        resumes the workflow's paused runs at ``rate_per_second``.

        Raises:
            RunActionConflictError: ``not_paused``.
        """
        mark = self._marks().resume(workflow_id, environment)
        if mark is None:
            raise RunActionConflictError(
                f"workflow {workflow_id} is not paused in {environment}", code="not_paused"
            )
        pausing = self._jobs.engine.runs.get(_job_run_id("pause", mark))
        if pausing is not None and not pausing.is_terminal:
            # It may end on its own meanwhile: then there is nothing to stop.
            with contextlib.suppress(RunTerminalError):
                self._jobs.cancel(pausing.id, by=by, reason="the workflow was resumed")
        job, _ = self._jobs.start(
            BulkJobInput(
                action="resume",
                filter=BulkFilter(
                    environment=environment, workflow_id=workflow_id, statuses=["paused"]
                ),
                rate_per_second=rate_per_second,
                by=by,
                reason=reason or f"workflow {workflow_id} resumed",
            ),
            key=_job_key("resume", mark),
        )
        self._audit("resume_workflow", mark, by, reason, job)
        return WorkflowPauseChange(mark, job)

    def _audit(
        self,
        kind: str,
        mark: WorkflowPause,
        by: str,
        reason: str | None,
        job: BulkJob,
    ) -> None:
        audit = self._jobs.engine.audit
        if audit is None:
            return
        audit.record(
            AuditEntry.model_validate(
                {
                    "id": f"{kind}:{mark.environment}:{mark.workflow_id}:{mark.at}",
                    "kind": kind,
                    "at": self._jobs.engine.clock.now_ms(),
                    "by": by,
                    "environment": mark.environment,
                    "workflowId": mark.workflow_id,
                    "reason": reason,
                    "detail": {"jobId": job.job_id},
                }
            )
        )


def _job_key(action: str, mark: WorkflowPause) -> str:
    """The idempotency key of the job a pause (or its resume) starts: one job per mark."""
    return f"workflow-{action}-{mark.environment}-{mark.workflow_id}-{mark.at}"


def _job_run_id(action: str, mark: WorkflowPause) -> str:
    """The run id of the job :func:`_job_key` names."""
    return resolve_run_id(
        BULK_WORKFLOW_ID, run_id=None, idempotency_key=_job_key(action, mark), generated=""
    )
