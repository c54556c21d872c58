"""The code versions live runs are on: how many runs of each workflow each build holds, to
tell when an old build can be retired and which runs wait for one that is gone.

Read through the run listing of the live statuses (an index query per status, newest first),
never a scan of the table, and bounded: past ``max_runs`` the report says it is truncated.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from relayflow.core.record import TERMINAL_STATUSES, RunRecord, RunStatus
from relayflow.ports import RunQuery, RunStore

#: The statuses of a run that has not ended, in the order the listing reads them.
LIVE_STATUSES: tuple[RunStatus, ...] = ("delayed", "queued", "paused", "running", "waiting")
#: The most live runs one report reads.
MAX_RUNS_READ = 5000
_PAGE = 1000

assert not TERMINAL_STATUSES & set(LIVE_STATUSES)


@dataclass(frozen=True, order=True)
class VersionKey:
    """One line of the report: a workflow's runs on one build and function."""

    workflow_id: str
    environment: str
    build: str | None
    function: str | None


@dataclass(frozen=True)
class VersionCount:
    """The live runs of one :class:`VersionKey`, and how many of them wait for it."""

    key: VersionKey
    runs: int
    waiting_for_version: int


@dataclass(frozen=True)
class VersionsReport:
    """The counts, most runs first; ``truncated`` when more live runs exist than were read."""

    versions: list[VersionCount]
    runs_read: int
    truncated: bool


def _key_of(record: RunRecord) -> VersionKey:
    version = record.code_version
    return VersionKey(
        workflow_id=record.workflow_id,
        environment=record.environment,
        build=version.build if version is not None else None,
        function=version.function if version is not None else None,
    )


def live_versions(
    runs: RunStore,
    *,
    environment: str | None = None,
    workflow_id: str | None = None,
    max_runs: int = MAX_RUNS_READ,
) -> VersionsReport:
    """Count the live runs (newest first, at most ``max_runs``) per workflow and version."""
    counts: Counter[VersionKey] = Counter()
    waiting: Counter[VersionKey] = Counter()
    read = 0
    cursor: str | None = None
    truncated = False
    while True:
        page = runs.list_runs(
            RunQuery(
                environment=environment,
                workflow_id=workflow_id,
                statuses=LIVE_STATUSES,
                limit=min(_PAGE, max_runs - read),
                cursor=cursor,
            )
        )
        for record in page.runs:
            key = _key_of(record)
            counts[key] += 1
            if record.version_wait is not None:
                waiting[key] += 1
        read += len(page.runs)
        cursor = page.next_cursor
        if cursor is None:
            break
        if read >= max_runs:
            truncated = True
            break
    ordered = sorted(counts, key=lambda k: (-counts[k], k.workflow_id, k.build or ""))
    return VersionsReport(
        versions=[VersionCount(k, counts[k], waiting[k]) for k in ordered],
        runs_read=read,
        truncated=truncated,
    )
