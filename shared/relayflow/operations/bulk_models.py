"""What a bulk job is given and what it reports: its input, one page's outcome and the job's
progress, as stored in the job run (camelCase, like every stored model)."""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import Field, model_validator

from relayflow.core.record import RecordModel, RunStatus
from relayflow.protocol import ENVIRONMENTS, RetryOverride

#: The built-in workflow whose runs are bulk jobs.
BULK_WORKFLOW_ID = "relayflow.bulk-action"
BulkAction = Literal["cancel", "pause", "resume", "redrive", "rerun", "upgrade"]
BULK_ACTIONS: tuple[str, ...] = get_args(BulkAction)
MAX_CONCURRENCY = 32
DEFAULT_CONCURRENCY = 8
DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000
#: Reasons (skipped or failed runs) a page keeps: enough to diagnose, bounded in size.
REASONS_PER_PAGE = 20
#: Reasons a job's progress shows at most (the first ones, in page order).
REASONS_SHOWN = 100
#: A reason's message is cut to this many characters (the step's output stays small).
REASON_MESSAGE_CHARS = 300


class BulkFilter(RecordModel):
    """Which runs a bulk job acts on: the runs list's filters (every one optional, at least
    one given). ``since``/``until`` are epoch ms of the run's start (``until`` excluded)."""

    environment: str | None = None
    workflow_id: str | None = None
    statuses: list[RunStatus] = Field(default_factory=list)
    tag: str | None = None
    since: int | None = None
    until: int | None = None
    #: The build the runs are on (``codeVersion.build``).
    code_version: str | None = None

    @model_validator(mode="after")
    def _check(self) -> BulkFilter:
        if self.environment is not None and self.environment not in ENVIRONMENTS:
            raise ValueError(f"environment must be one of {', '.join(ENVIRONMENTS)}")
        if self.since is not None and self.until is not None and self.since >= self.until:
            raise ValueError("since must be before until")
        if not self.given():
            raise ValueError(
                "a bulk action needs a filter: give at least one of environment, workflowId, "
                "statuses, tag, since, until or codeVersion"
            )
        return self

    def given(self) -> bool:
        """Whether any criterion is set (an empty filter would match every run)."""
        given = (self.environment, self.workflow_id, self.statuses, self.tag, self.code_version)
        return any(given) or (self.since is not None or self.until is not None)


class BulkOptions(RecordModel):
    """Per-action options: ``compensate`` (cancel), ``retry`` (redrive), ``fromStep`` and
    ``input`` (rerun; ``input`` left out keeps each original's input, which ``keepInput``
    records once stored)."""

    compensate: bool = False
    retry: RetryOverride | None = None
    from_step: str | None = None
    input: Any = None
    keep_input: bool = True

    @model_validator(mode="before")
    @classmethod
    def _input_given(cls, data: Any) -> Any:
        if isinstance(data, dict) and "keepInput" not in data and "keep_input" not in data:
            return {**data, "keepInput": "input" not in data}
        return data

    def keeps_input(self) -> bool:
        """True when no ``input`` was given: each rerun keeps its original's input."""
        return self.keep_input


class BulkJobInput(RecordModel):
    """The input of a bulk job run."""

    action: BulkAction
    filter: BulkFilter
    concurrency: int = Field(default=DEFAULT_CONCURRENCY, ge=1, le=MAX_CONCURRENCY)
    page_size: int = Field(default=DEFAULT_PAGE_SIZE, ge=1, le=MAX_PAGE_SIZE)
    #: At most this many runs acted on per second (pages then hold one second's worth).
    rate_per_second: float | None = Field(default=None, gt=0)
    by: str = "api"
    reason: str | None = None
    options: BulkOptions = Field(default_factory=BulkOptions)

    @model_validator(mode="after")
    def _check(self) -> BulkJobInput:
        options = self.options
        if self.action == "rerun" and not options.from_step:
            raise ValueError("rerun needs options.fromStep")
        if self.action != "rerun" and (options.from_step is not None or not options.keeps_input()):
            raise ValueError("fromStep and input apply to rerun only")
        if self.action != "redrive" and options.retry is not None:
            raise ValueError("retry applies to redrive only")
        if self.action != "cancel" and options.compensate:
            raise ValueError("compensate applies to cancel only")
        return self

    def effective_page_size(self) -> int:
        """The page size: with a rate, at most one second's worth of runs per page."""
        if self.rate_per_second is None:
            return self.page_size
        return max(1, min(self.page_size, int(self.rate_per_second)))


class BulkReason(RecordModel):
    """Why a run was skipped (``code`` of the 409) or failed (the error's message)."""

    run_id: str
    outcome: Literal["skipped", "failed"]
    code: str
    message: str = ""


class PageOutcome(RecordModel):
    """What one page of a bulk job did (the output of its ``page-<n>`` step)."""

    #: Where the next page starts; None on the last page.
    cursor: str | None = None
    matched: int = 0
    done: int = 0
    skipped: int = 0
    failed: int = 0
    reasons: list[BulkReason] = Field(default_factory=list)


class BulkProgress(RecordModel):
    """A bulk job's totals so far, summed over its pages."""

    pages: int = 0
    matched: int = 0
    done: int = 0
    skipped: int = 0
    failed: int = 0
    reasons: list[BulkReason] = Field(default_factory=list)

    def add(self, page: PageOutcome) -> None:
        """Count ``page`` in (the first :data:`REASONS_SHOWN` reasons are kept)."""
        self.pages += 1
        self.matched += page.matched
        self.done += page.done
        self.skipped += page.skipped
        self.failed += page.failed
        self.reasons.extend(page.reasons[: max(0, REASONS_SHOWN - len(self.reasons))])
