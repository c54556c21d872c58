"""Bulk jobs as operators see them: count a filter's matches (dry run), start a job, read
its progress from the job run's pages, list and cancel jobs, and record each in the audit log."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field

from relayflow.core.record import RecordModel
from relayflow.core.trigger import TriggerSpec, resolve_run_id
from relayflow.errors import RunNotFoundError
from relayflow.operations.bulk_body import matches, run_query
from relayflow.operations.bulk_models import (
    BULK_WORKFLOW_ID,
    BulkFilter,
    BulkJobInput,
    BulkProgress,
    BulkReason,
    PageOutcome,
)
from relayflow.operations.ports import AuditEntry
from relayflow.ports import RunQuery
from relayflow.protocol import RunTrigger

if TYPE_CHECKING:
    from relayflow.admin import WorkflowAdmin
    from relayflow.core.views import RunDetail
    from relayflow.engine import Engine

#: The environment of a job whose filter names none (the job spans every environment).
DEFAULT_JOB_ENVIRONMENT = "production"
#: Runs read per listing while a dry run counts.
COUNT_PAGE = 1000
_PAGE_PREFIX = "page-"


class BulkJob(RecordModel):
    """A bulk job and its progress, summed from the pages its run has recorded."""

    job_id: str
    #: The job run's status (``running``, ``waiting`` between rate-limited pages, then
    #: ``completed``, ``cancelled`` or ``failed``).
    status: str
    action: str
    filter: BulkFilter
    by: str
    reason: str | None = None
    concurrency: int
    pages: int = 0
    matched: int = 0
    done: int = 0
    skipped: int = 0
    failed: int = 0
    reasons: list[BulkReason] = Field(default_factory=list)
    started_at: int
    completed_at: int | None = None


def job_environment(job_filter: BulkFilter) -> str:
    """The environment a job runs in: its filter's, else :data:`DEFAULT_JOB_ENVIRONMENT`."""
    return job_filter.environment or DEFAULT_JOB_ENVIRONMENT


class BulkJobs:
    """Starts and reads bulk jobs over one admin (and its engine)."""

    def __init__(self, admin: WorkflowAdmin) -> None:
        self.admin = admin

    @property
    def engine(self) -> Engine:
        """The admin's engine (read when used: an API built over a stand-in admin that
        has none still serves its other routes)."""
        return self.admin.engine

    def count(self, job_filter: BulkFilter) -> int:
        """How many runs ``job_filter`` matches now (a dry run: nothing changes)."""
        total = 0
        cursor: str | None = None
        while True:
            page = self.engine.runs.list_runs(
                run_query(job_filter, limit=COUNT_PAGE, cursor=cursor)
            )
            total += sum(1 for record in page.runs if matches(record))
            cursor = page.next_cursor
            if cursor is None:
                return total

    def start(self, job: BulkJobInput, *, key: str | None = None) -> tuple[BulkJob, bool]:
        """Start a job for ``job``; returns it and whether this call created it.

        With ``key`` (an ``Idempotency-Key``) the job's run id derives from it, so the same
        key never starts two jobs: a repeat gets the first job back, untouched. The job is
        handed to the drive function (this call does not run its pages).
        """
        engine = self.engine
        run_id = resolve_run_id(
            BULK_WORKFLOW_ID, run_id=None, idempotency_key=key, generated=engine.new_run_id()
        )
        spec = TriggerSpec(
            workflow_id=BULK_WORKFLOW_ID,
            input=job.to_document(),
            run_id=run_id,
            environment=job_environment(job.filter),
            triggered_by=RunTrigger.model_validate({"kind": "api", "by": job.by}),
            idempotency_key=key,
        )
        record, created = engine.trigger(spec, drive=False)
        if created:
            if record.status == "running":
                engine.hand_off(record.id)
            self._audit(record.id, job, record.started_at)
        return self.get(record.id), created

    def _audit(self, job_id: str, job: BulkJobInput, at: int) -> None:
        audit = self.engine.audit
        if audit is None:
            return
        audit.record(
            AuditEntry(
                id=job_id,
                kind="bulk",
                at=at,
                by=job.by,
                environment=job_environment(job.filter),
                workflow_id=job.filter.workflow_id,
                run_id=job_id,
                reason=job.reason,
                detail={
                    "action": job.action,
                    "filter": job.filter.to_document(),
                    "concurrency": job.concurrency,
                    "options": job.options.to_document(),
                },
            )
        )

    def get(self, job_id: str) -> BulkJob:
        """The job and its progress.

        Raises:
            RunNotFoundError: No bulk job has that id.
        """
        detail = self.admin.get_run(job_id, values=True)
        if detail is None or detail.workflow_id != BULK_WORKFLOW_ID:
            raise RunNotFoundError(f"no bulk job with id {job_id!r}")
        return job_view(detail)

    def list(
        self, *, limit: int = 20, cursor: str | None = None
    ) -> tuple[list[BulkJob], str | None]:
        """Jobs newest first; pass the cursor back for the next page."""
        page = self.engine.runs.list_runs(
            RunQuery(workflow_id=BULK_WORKFLOW_ID, limit=limit, cursor=cursor)
        )
        jobs: list[BulkJob] = []
        for record in page.runs:
            try:
                jobs.append(self.get(record.id))
            except RunNotFoundError:  # expired between the listing and the read
                continue
        return jobs, page.next_cursor

    def cancel(self, job_id: str, *, by: str, reason: str | None = None) -> BulkJob:
        """Cancel the job's run: the page in flight finishes, no other page starts.

        Raises:
            RunNotFoundError: No bulk job has that id.
            RunTerminalError: The job already ended.
        """
        self.get(job_id)
        with self.engine.handing_off():
            self.admin.cancel_run(job_id, reason=reason, by=by)
        return self.get(job_id)


def job_view(detail: RunDetail) -> BulkJob:
    """A job's view from its run's detail (read with values): its input, and the totals of
    the pages its timeline holds (each page's completed step once)."""
    job = BulkJobInput.model_validate(detail.input)
    pages: dict[str, Any] = {}
    for entry in detail.timeline or []:
        name = entry.name or entry.id
        if entry.type != "step" or not name.startswith(_PAGE_PREFIX) or entry.error is not None:
            continue
        if isinstance(entry.value, dict) and "matched" in entry.value:
            pages[name] = entry.value
    progress = BulkProgress()
    for name in sorted(pages, key=lambda n: int(n[len(_PAGE_PREFIX) :])):
        progress.add(PageOutcome.model_validate(pages[name]))
    return BulkJob(
        job_id=detail.id,
        status=detail.status,
        action=job.action,
        filter=job.filter,
        by=job.by,
        reason=job.reason,
        concurrency=job.concurrency,
        pages=progress.pages,
        matched=progress.matched,
        done=progress.done,
        skipped=progress.skipped,
        failed=progress.failed,
        reasons=progress.reasons,
        started_at=detail.started_at,
        completed_at=detail.completed_at,
    )
