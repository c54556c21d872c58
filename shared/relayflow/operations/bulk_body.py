"""The body of the built-in workflow ``relayflow.bulk-action``: one step per page of matching
runs, each applying the action to the page's runs with bounded concurrency.

The job's run id is the action id of every action it applies, so a page run again after a
crash finds the runs it already acted on (they hold that id) and counts them ``skipped``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import TYPE_CHECKING, Any

from relayflow.core.record import RunRecord
from relayflow.errors import (
    RelayflowError,
    RunActionConflictError,
    RunNotFoundError,
    RunTerminalError,
)
from relayflow.operations.bulk_models import (
    BULK_WORKFLOW_ID,
    REASON_MESSAGE_CHARS,
    REASONS_PER_PAGE,
    BulkFilter,
    BulkJobInput,
    BulkProgress,
    BulkReason,
    PageOutcome,
)
from relayflow.ports import RunQuery
from relayflow.sdk.registry import Workflow, WorkflowConfig, register_builtin
from relayflow.sdk.retry import RetryPolicy

if TYPE_CHECKING:
    from relayflow.admin import WorkflowAdmin
    from relayflow.engine import Engine

#: The name under which a bulk job's host gives its body the process's admin.
ADMIN_SERVICE = "relayflow.admin"
#: A page that fails as a whole (the listing throttled, say) is tried again: acting on its
#: runs again is safe, the action id skips those already done.
PAGE_RETRY = RetryPolicy(max=5, backoff="exponential", initial="1s", max_delay="30s")


def run_query(job_filter: BulkFilter, *, limit: int, cursor: str | None) -> RunQuery:
    """The runs-list query of ``job_filter`` (``since`` inclusive, ``until`` exclusive)."""
    return RunQuery(
        environment=job_filter.environment,
        workflow_id=job_filter.workflow_id,
        statuses=tuple(job_filter.statuses),
        tag=job_filter.tag,
        started_after=job_filter.since,
        started_before=job_filter.until,
        code_version=job_filter.code_version,
        limit=limit,
        cursor=cursor,
    )


def matches(record: RunRecord) -> bool:
    """Whether a listed run may be acted on: bulk jobs never act on bulk jobs (a job
    cancelling every running run would otherwise cancel itself)."""
    return record.workflow_id != BULK_WORKFLOW_ID


def apply_action(engine: Engine, job: BulkJobInput, job_id: str, run_id: str) -> None:
    """Apply the job's action to one run, with the job's run id as the action id and the
    job as who asked (``bulk:<job id>``: the operator is the job's ``by``).

    The engine's own calls, not the admin's: a job needs no view of the runs it changes.
    """
    by, reason, options = f"bulk:{job_id}", job.reason, job.options
    if job.action == "cancel":
        engine.cancel(run_id, reason=reason, compensate=options.compensate, by=by, action_id=job_id)
    elif job.action == "pause":
        engine.pause(run_id, by=by, action_id=job_id, reason=reason)
    elif job.action == "resume":
        engine.resume(run_id, by=by, action_id=job_id, reason=reason)
    elif job.action == "redrive":
        engine.redrive(run_id, by=by, action_id=job_id, reason=reason, retry=options.retry)
    elif job.action == "upgrade":
        engine.upgrade(run_id, by=by, action_id=job_id, reason=reason)
    else:
        extra: dict[str, Any] = {} if options.keeps_input() else {"input": options.input}
        engine.rerun(
            run_id,
            from_step=str(options.from_step),
            by=by,
            action_id=job_id,
            reason=reason,
            **extra,
        )


def _reason(run_id: str, outcome: str, code: str, message: str) -> BulkReason:
    return BulkReason.model_validate(
        {
            "runId": run_id,
            "outcome": outcome,
            "code": code,
            "message": message[:REASON_MESSAGE_CHARS],
        }
    )


def act_on_run(
    engine: Engine, job: BulkJobInput, job_id: str, record: RunRecord
) -> BulkReason | None:
    """Act on one listed run; None when done, else why it was skipped or failed.

    The run is handed to the drive function rather than driven here (a redriven or resumed
    run's steps run where runs are driven, not in the job's invocation).
    """
    if any(action.id == job_id for action in record.actions):
        return _reason(record.id, "skipped", "already_applied", "acted on by this job before")
    try:
        with engine.handing_off():
            apply_action(engine, job, job_id, record.id)
    except (RunActionConflictError, RunTerminalError) as exc:
        return _reason(record.id, "skipped", exc.code, exc.message)
    except RunNotFoundError as exc:
        # Expired (retention) between the listing and the action.
        return _reason(record.id, "skipped", exc.code, exc.message)
    except RelayflowError as exc:
        return _reason(record.id, "failed", exc.code, exc.message)
    except Exception as exc:  # one run's failure must not lose the page's other outcomes
        return _reason(record.id, "failed", type(exc).__name__, str(exc))
    return None


def act_on_page(
    engine: Engine, job: BulkJobInput, job_id: str, cursor: str | None
) -> dict[str, Any]:
    """List one page of matches after ``cursor`` and act on each; the page's outcome."""
    page = engine.runs.list_runs(
        run_query(job.filter, limit=job.effective_page_size(), cursor=cursor)
    )
    chosen = [record for record in page.runs if matches(record)]
    act: Callable[[RunRecord], BulkReason | None] = partial(act_on_run, engine, job, job_id)
    if len(chosen) <= 1 or job.concurrency == 1:
        results = [act(record) for record in chosen]
    else:
        with ThreadPoolExecutor(max_workers=min(job.concurrency, len(chosen))) as pool:
            results = list(pool.map(act, chosen))
    reasons = [r for r in results if r is not None]
    outcome = PageOutcome(
        cursor=page.next_cursor,
        matched=len(chosen),
        done=sum(1 for r in results if r is None),
        skipped=sum(1 for r in reasons if r.outcome == "skipped"),
        failed=sum(1 for r in reasons if r.outcome == "failed"),
        reasons=reasons[:REASONS_PER_PAGE],
    )
    return outcome.to_document()


def rate_pause_ms(job: BulkJobInput, acted: int) -> int:
    """How long to wait after acting on ``acted`` runs to stay within the job's rate."""
    if job.rate_per_second is None or acted == 0:
        return 0
    return math.ceil(acted * 1000 / job.rate_per_second)


def run_bulk_job(input: Any, ctx: Any) -> dict[str, Any]:
    """The bulk job: page through the matches until the cursor runs out."""
    job = BulkJobInput.model_validate(input)
    admin: WorkflowAdmin = ctx.services.resolve(ADMIN_SERVICE)
    progress = BulkProgress()
    cursor: str | None = None
    number = 1
    while True:
        recorded = ctx.step(
            f"page-{number}",
            partial(act_on_page, admin.engine, job, ctx.run.id, cursor),
            retry=PAGE_RETRY,
        )
        page = PageOutcome.model_validate(recorded)
        progress.add(page)
        cursor = page.cursor
        if cursor is None:
            break
        pause_ms = rate_pause_ms(job, page.matched)
        if pause_ms:
            ctx.sleep(pause_ms)
        number += 1
    return progress.to_document()


BULK_WORKFLOW: Workflow[dict[str, Any]] = Workflow(
    BULK_WORKFLOW_ID,
    run_bulk_job,
    WorkflowConfig(description="Applies an operator action to every run a filter matches."),
)
register_builtin(BULK_WORKFLOW)
