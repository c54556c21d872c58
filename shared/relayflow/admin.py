"""The admin interface (reference §6): lists, inspects, cancels and follows runs."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from relayflow.concurrency_admin import ConcurrencyAdmin
from relayflow.core.record import RunRecord
from relayflow.core.views import (
    TIMELINE_DEFAULT_LIMIT,
    JournalEvent,
    RunDetail,
    RunListPage,
    TimelineEntry,
    TimelinePage,
    UnavailableValue,
    cap_value,
    detail,
    journal_events,
    summary,
    timeline,
    timeline_page,
)
from relayflow.costs import PriceTable
from relayflow.engine import KEEP_INPUT, Engine
from relayflow.errors import RunNotFoundError
from relayflow.operations.audit import window_of
from relayflow.operations.ports import AuditPage, AuditQuery
from relayflow.operations.versions import VersionsReport, live_versions
from relayflow.payloads import resolve
from relayflow.ports import PayloadStore, RunQuery, RunWatcher
from relayflow.protocol import RetryOverride
from relayflow.run_history import RunHistory, history_of
from relayflow.run_views import read_for_view, resolve_detail
from relayflow.workflow_refs import WorkflowRef, workflow_id_of


class WorkflowAdmin:
    """Lists, inspects, cancels and follows runs.

    Args:
        engine: The engine (its run store is read; cancel goes through it).
        payloads: Where step hosts put values over the inline cap; run inputs and outputs
            that point there are resolved in run details.
        poll_interval_s: How often ``stream_run`` re-reads a store that cannot notify.
        sleep: Waits between polls (injectable).
        prices: What run details price a run's usage at (``RELAYFLOW_PRICE_TABLE``).
    """

    def __init__(
        self,
        *,
        engine: Engine,
        payloads: PayloadStore | None = None,
        poll_interval_s: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
        prices: PriceTable | None = None,
    ) -> None:
        self.engine = engine
        #: What run details price a run's usage at (AWS list prices when None).
        self.prices = prices
        #: Holders and queues of concurrency keys, and the release of a stuck slot.
        self.concurrency = ConcurrencyAdmin(engine)
        self._payloads = payloads
        self._poll = poll_interval_s
        self._sleep = sleep

    def _resolve(self, value: Any) -> Any:
        return resolve(value, self._payloads) if self._payloads is not None else value

    def _entries(self, record: RunRecord, values: bool) -> list[TimelineEntry] | None:
        if not values:
            return None
        return [cap_value(e, resolve=self._resolve) for e in timeline(record, values=True)]

    def describe(
        self,
        record: RunRecord,
        *,
        values: bool = False,
        unavailable: Sequence[UnavailableValue] = (),
    ) -> RunDetail:
        """The detail of ``record``, with inputs and outputs held in the payload store resolved.

        With ``values`` every timeline entry carries its checkpointed value (resolved from the
        payload store, capped per entry at ``TIMELINE_VALUE_CAP_BYTES``). A value the payload
        store cannot give is left out and listed in ``values_unavailable`` (with those in
        ``unavailable``, left out of ``record`` already).
        """
        occupancy = self.concurrency.occupancy(record)
        view = detail(record, self._entries(record, values), occupancy, self.prices)
        return resolve_detail(view, self._payloads, list(unavailable))

    def list_runs(
        self,
        *,
        environment: str | None = None,
        workflow: WorkflowRef | None = None,
        status: str | Sequence[str] | None = None,
        tag: str | None = None,
        started_after: int | None = None,
        started_before: int | None = None,
        code_version: str | None = None,
        parent_run_id: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> RunListPage:
        """Runs newest first, filtered (``code_version``: the build a run is on,
        ``parent_run_id``: only the children of that run); pass ``next_cursor`` back to get
        the next page."""
        statuses: tuple[str, ...] = ()
        if isinstance(status, str):
            statuses = (status,)
        elif status is not None:
            statuses = tuple(status)
        query = RunQuery(
            environment=environment,
            workflow_id=workflow_id_of(workflow) if workflow is not None else None,
            statuses=statuses,
            tag=tag,
            started_after=started_after,
            started_before=started_before,
            code_version=code_version,
            parent_run_id=parent_run_id,
            limit=limit,
            cursor=cursor,
        )
        page = self.engine.runs.list_runs(query)
        runs = [summary(r, page.unavailable.get(r.id, ())) for r in page.runs]
        return RunListPage(runs=runs, next_cursor=page.next_cursor)

    def get_run(self, run_id: str, *, values: bool = False) -> RunDetail | None:
        """The run's detail with its timeline, or None.

        Args:
            run_id: The run.
            values: Give every timeline entry its checkpointed value (step and group results,
                wait payloads, batch results, error data), resolved from the payload store
                and capped per entry (``TIMELINE_VALUE_CAP_BYTES``; larger ones are left out
                with ``value_truncated``).
        """
        record, unavailable = read_for_view(self.engine.runs, run_id)
        if record is None:
            return None
        return self.describe(record, values=values, unavailable=unavailable)

    def history(self, run_id: str) -> RunHistory:
        """The run's recorded history with every value (``relayflow.history/1``), what a
        replay check runs new code against.

        Raises:
            RunNotFoundError: No such run.
        """
        record = self.engine.runs.get(run_id)
        if record is None:
            raise RunNotFoundError(f"no run with id {run_id!r}")
        return history_of(record, self._payloads)

    def timeline(
        self,
        run_id: str,
        *,
        values: bool = False,
        cursor: str | None = None,
        limit: int = TIMELINE_DEFAULT_LIMIT,
    ) -> TimelinePage:
        """One page of the run's timeline; pass ``next_cursor`` back for the next page.

        A page holds at most ``limit`` entries (1 to ``TIMELINE_MAX_LIMIT``) and, with
        ``values``, at most ``TIMELINE_PAGE_VALUE_BUDGET_BYTES`` of values.

        Raises:
            RunNotFoundError: No such run.
            ValidationError: A bad cursor or limit.
        """
        record, unavailable = read_for_view(self.engine.runs, run_id)
        if record is None:
            raise RunNotFoundError(f"no run with id {run_id!r}")
        page = timeline_page(
            record,
            values=values,
            cursor=cursor,
            limit=limit,
            resolve=self._resolve,
            occupancy=self.concurrency.occupancy(record),
        )
        return page.model_copy(update={"values_unavailable": unavailable}) if unavailable else page

    def cancel_run(
        self,
        run_id: str,
        *,
        reason: str | None = None,
        compensate: bool = False,
        by: str = "api",
        action_id: str | None = None,
    ) -> RunDetail:
        """Cancel a run and its children; ``compensate`` runs compensations first (LIFO).

        Raises:
            RunNotFoundError: No such run.
            RunTerminalError: It already ended (code ``already_terminal``).
        """
        cancelled = self.engine.cancel(
            run_id, reason=reason, compensate=compensate, by=by, action_id=action_id
        )
        return self.describe(cancelled)

    def pause_run(
        self, run_id: str, *, by: str, action_id: str | None = None, reason: str | None = None
    ) -> RunDetail:
        """Pause a running or waiting run (docs/guides/operating-runs.md); ``action_id``
        makes a retry act once.

        Raises:
            RunNotFoundError: No such run.
            RunTerminalError: It ended (``already_terminal``).
            RunActionConflictError: ``already_paused`` or ``not_started``.
        """
        return self.describe(self.engine.pause(run_id, by=by, action_id=action_id, reason=reason))

    def resume_run(
        self, run_id: str, *, by: str, action_id: str | None = None, reason: str | None = None
    ) -> RunDetail:
        """Resume a paused run: it runs again at once.

        Raises:
            RunNotFoundError: No such run.
            RunTerminalError: It ended (``already_terminal``).
            RunActionConflictError: ``not_paused``.
        """
        return self.describe(self.engine.resume(run_id, by=by, action_id=action_id, reason=reason))

    def upgrade_run(
        self, run_id: str, *, by: str, action_id: str | None = None, reason: str | None = None
    ) -> RunDetail:
        """Move a run that has not ended to the current code; a run waiting for its pinned
        build is tried at once (docs/guides/operating-runs.md).

        Raises:
            RunNotFoundError: No such run.
            RunTerminalError: It ended (``already_terminal``).
        """
        return self.describe(self.engine.upgrade(run_id, by=by, action_id=action_id, reason=reason))

    def redrive_run(
        self,
        run_id: str,
        *,
        by: str,
        action_id: str | None = None,
        reason: str | None = None,
        retry: RetryOverride | None = None,
    ) -> RunDetail:
        """Continue a failed, cancelled or compensation_failed run from its failure point,
        with a fresh retry budget (``retry`` replaces the failed step's policy).

        Raises:
            RunNotFoundError: No such run.
            RunActionConflictError: ``not_redrivable``.
        """
        redriven = self.engine.redrive(
            run_id, by=by, action_id=action_id, reason=reason, retry=retry
        )
        return self.describe(redriven)

    def rerun_run(
        self,
        run_id: str,
        *,
        from_step: str,
        by: str,
        action_id: str | None = None,
        reason: str | None = None,
        input: Any = KEEP_INPUT,
    ) -> RunDetail:
        """Start a new run from the ended run's top-level step ``from_step`` (the steps
        before it are copied, not run); returns the new run. ``input`` replaces the input.

        Raises:
            RunNotFoundError: No such run.
            StepNotFoundError: No top-level step ``from_step``.
            RunActionConflictError: ``not_rerunnable``.
        """
        rerun = self.engine.rerun(
            run_id, from_step=from_step, by=by, action_id=action_id, reason=reason, input=input
        )
        return self.describe(rerun)

    def stream_run(
        self,
        run_id: str,
        *,
        follow: bool = True,
        timeout_s: float | None = None,
        values: bool = False,
    ) -> Iterator[JournalEvent]:
        """Yield the run's journal events as they happen, ending when the run ends.

        Step and wait events carry the operation's ``name`` (and a token's ``tokenId``) in
        their ``data``.

        Args:
            run_id: The run.
            follow: Keep waiting for new events until the run ends (False: only what exists).
            timeout_s: Stop following after this many seconds.
            values: Also put each step's or wait's checkpointed value in ``data`` (capped
                as in :meth:`get_run`).

        Raises:
            RunNotFoundError: No such run.
        """
        runs = self.engine.runs
        record = runs.get(run_id)
        if record is None:
            raise RunNotFoundError(f"no run with id {run_id!r}")
        return self._stream(record, follow, timeout_s, values)

    def _stream(
        self, record: RunRecord, follow: bool, timeout_s: float | None, values: bool
    ) -> Iterator[JournalEvent]:
        runs = self.engine.runs
        seen: set[tuple[str, str | None, int | None, str]] = set()
        waited = 0.0
        current: RunRecord | None = record
        while current is not None:
            for event in journal_events(current, self._entries(current, values)):
                if event.key() not in seen:
                    seen.add(event.key())
                    yield event
            if current.is_terminal or not follow:
                return
            if timeout_s is not None and waited >= timeout_s:
                return
            slice_s = self._poll if timeout_s is None else min(self._poll, timeout_s - waited)
            if isinstance(runs, RunWatcher):
                runs.wait_for_change(current.id, current.version, slice_s)
            else:
                self._sleep(slice_s)
            waited += slice_s
            current = runs.get(current.id)

    def live_versions(
        self, *, environment: str | None = None, workflow: WorkflowRef | None = None
    ) -> VersionsReport:
        """The code versions live runs are on, per workflow (see
        :func:`~relayflow.operations.versions.live_versions`)."""
        return live_versions(
            self.engine.runs,
            environment=environment,
            workflow_id=workflow_id_of(workflow) if workflow is not None else None,
        )

    def audit_log(self, query: AuditQuery) -> AuditPage:
        """Operator actions across runs matching ``query``, newest first; pass
        ``next_cursor`` back as ``cursor`` for the next page.

        Raises:
            ValidationError: A bad limit or cursor.
        """
        if self.engine.audit is None:
            # Nothing can have been recorded; the query is still checked as a store would.
            window_of(query, self.engine.clock.now_ms())
            return AuditPage(entries=[])
        return self.engine.audit.list(query)
