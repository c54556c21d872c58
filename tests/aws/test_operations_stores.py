"""The audit log and the workflow pause marks: the same tests on the DynamoDB stores (atomic
moto) and the in-memory ones, which must agree."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest

from relayflow.adapters.aws import tables
from relayflow.adapters.aws.clients import AwsClients
from relayflow.adapters.aws.operations import (
    DynamoDBAuditLog,
    DynamoDBWorkflowPauses,
    audit_partition,
)
from relayflow.adapters.memory.operations import InMemoryAuditLog, InMemoryWorkflowPauses
from relayflow.clock import VirtualClock
from relayflow.config import Settings
from relayflow.errors import ValidationError
from relayflow.operations.audit import DAY_MS, RETENTION_DAYS, utc_day
from relayflow.operations.paused import CACHE_TTL_MS, PausedWorkflows
from relayflow.operations.ports import (
    AuditEntry,
    AuditLog,
    AuditQuery,
    WorkflowPause,
    WorkflowPauses,
)
from tests.moto_support import REGION, moto_backend

#: 2026-12-05T12:00:00Z
NOON = 1_796_472_000_000


@dataclass
class Stores:
    audit: AuditLog
    pauses: WorkflowPauses
    clock: VirtualClock


@pytest.fixture(params=["dynamodb", "memory"])
def stores(request: pytest.FixtureRequest) -> Iterator[Stores]:
    clock = VirtualClock(NOON)
    if request.param == "memory":
        yield Stores(InMemoryAuditLog(clock), InMemoryWorkflowPauses(), clock)
        return
    with moto_backend():
        clients = AwsClients(region=REGION)
        tables.create_resources(clients, Settings(table_name="runs"))
        yield Stores(
            DynamoDBAuditLog("runs", client_factory=clients.dynamodb, clock=clock),
            DynamoDBWorkflowPauses("runs", client_factory=clients.dynamodb),
            clock,
        )


def entry(entry_id: str, at: int, **fields: Any) -> AuditEntry:
    values: dict[str, Any] = {"kind": "pause", "by": "ops", "environment": "production"}
    values.update(fields)
    return AuditEntry(id=entry_id, at=at, **values)


def ids(entries: list[AuditEntry]) -> list[str]:
    return [e.id for e in entries]


def walk(audit: AuditLog, **filters: Any) -> tuple[list[str], int]:
    """Every entry the listing gives page by page, and how many pages it took."""
    seen: list[str] = []
    cursor: str | None = None
    for pages in range(1, 100):
        page = audit.list(AuditQuery(cursor=cursor, **filters))
        seen.extend(ids(page.entries))
        if page.next_cursor is None:
            return seen, pages
        cursor = page.next_cursor
    raise AssertionError("the listing never ended")


def three_days(audit: AuditLog) -> None:
    """Entries over the last three days, in two environments, of two workflows."""
    rows = [
        ("a1", NOON - 2 * DAY_MS, "production", "resume", "billing", "r1"),
        ("a2", NOON - 2 * DAY_MS + 5, "preview", "pause", "billing", "r2"),
        ("b1", NOON - DAY_MS, "production", "cancel", "crm", "r3"),
        ("b2", NOON - DAY_MS, "preview", "pause", "crm", "r4"),
        ("c1", NOON - 10, "production", "pause", "billing", "r1"),
        ("c2", NOON - 5, "production", "redrive", "crm", "r5"),
        ("c3", NOON, "preview", "pause_workflow", "billing", None),
    ]
    for entry_id, at, env, kind, workflow, run in rows:
        audit.record(
            entry(entry_id, at, environment=env, kind=kind, workflow_id=workflow, run_id=run)
        )


def test_recording_the_same_entry_twice_keeps_one(stores: Stores) -> None:
    first = entry("act-1", NOON - 1000, run_id="r1", reason="stuck", detail={"fromStep": "s"})
    stores.audit.record(first)
    stores.audit.record(first.model_copy(update={"reason": "a retry"}))

    page = stores.audit.list(AuditQuery())

    assert page.entries == [first]
    assert page.next_cursor is None


def test_a_listing_walks_the_days_newest_first_across_environments(stores: Stores) -> None:
    three_days(stores.audit)

    everything = stores.audit.list(AuditQuery(limit=1000))
    paged, pages = walk(stores.audit, limit=2)

    # Ties in time order by id, then environment: b2 (preview) and b1 share a millisecond.
    assert ids(everything.entries) == ["c3", "c2", "c1", "b2", "b1", "a2", "a1"]
    assert paged == ids(everything.entries)
    assert pages == 4


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"environment": "production"}, ["c2", "c1", "b1", "a1"]),
        ({"kind": "pause"}, ["c1", "b2", "a2"]),
        ({"workflow_id": "billing"}, ["c3", "c1", "a2", "a1"]),
        ({"run_id": "r1"}, ["c1", "a1"]),
        ({"workflow_id": "crm", "environment": "preview"}, ["b2"]),
        ({"since": NOON - DAY_MS, "until": NOON}, ["c2", "c1", "b2", "b1"]),
    ],
)
def test_filters_hold_on_every_page(
    stores: Stores, filters: dict[str, Any], expected: list[str]
) -> None:
    three_days(stores.audit)

    assert walk(stores.audit, limit=1, **filters)[0] == expected
    assert ids(stores.audit.list(AuditQuery(**filters)).entries) == expected


def test_a_busy_day_is_listed_in_order_across_pages(stores: Stores) -> None:
    for n in range(25):
        stores.audit.record(entry(f"e{n:02d}", NOON - 1000 + n, environment="development"))
        stores.audit.record(entry(f"p{n:02d}", NOON - 1000 + n, kind="cancel"))
    newest_first = [f"{p}{n:02d}" for n in reversed(range(25)) for p in ("p", "e")]

    assert walk(stores.audit, limit=10) == (newest_first, 5)
    assert walk(stores.audit, limit=7, kind="cancel")[0] == newest_first[::2]


def test_a_listing_goes_back_ninety_days_unless_told(stores: Stores) -> None:
    stores.audit.record(entry("old", NOON - 91 * DAY_MS))
    stores.audit.record(entry("recent", NOON - 89 * DAY_MS))

    assert ids(stores.audit.list(AuditQuery()).entries) == ["recent"]
    assert ids(stores.audit.list(AuditQuery(since=NOON - 100 * DAY_MS)).entries) == [
        "recent",
        "old",
    ]


def test_the_last_full_page_has_no_cursor(stores: Stores) -> None:
    for n in range(3):
        stores.audit.record(entry(f"e{n}", NOON - n))

    page = stores.audit.list(AuditQuery(limit=3))

    assert ids(page.entries) == ["e0", "e1", "e2"]
    assert page.next_cursor is None


def test_a_cursor_resumes_after_its_entry_even_when_newer_ones_arrive(stores: Stores) -> None:
    for n in range(4):
        stores.audit.record(entry(f"e{n}", NOON - 4 + n))
    first = stores.audit.list(AuditQuery(limit=2))
    stores.audit.record(entry("newer", NOON))

    second = stores.audit.list(AuditQuery(limit=2, cursor=first.next_cursor))

    assert ids(first.entries) == ["e3", "e2"]
    assert ids(second.entries) == ["e1", "e0"]
    assert second.next_cursor is None


@pytest.mark.parametrize(
    "cursor",
    [
        "not-base64!",
        "",
        "eyJrIjoxfQ",  # {"k":1}
        "W10",  # []
        "eyJrIjoiMTIjeCIsImUiOiJwcm9kdWN0aW9uIn0",  # {"k":"12#x","e":"production"}
    ],
)
def test_a_cursor_the_log_did_not_give_is_refused(stores: Stores, cursor: str) -> None:
    with pytest.raises(ValidationError, match="cursor"):
        stores.audit.list(AuditQuery(cursor=cursor))


@pytest.mark.parametrize("limit", [0, 1001])
def test_a_limit_outside_its_range_is_refused(stores: Stores, limit: int) -> None:
    with pytest.raises(ValidationError, match="limit"):
        stores.audit.list(AuditQuery(limit=limit))


def test_an_audit_item_lives_in_its_days_partition_and_expires_after_400_days() -> None:
    with moto_backend():
        clients = AwsClients(region=REGION)
        tables.create_resources(clients, Settings(table_name="runs"))
        audit = DynamoDBAuditLog("runs", client_factory=clients.dynamodb, clock=VirtualClock(NOON))
        audit.record(entry("act-9", NOON - 3))

        item = clients.dynamodb().get_item(
            TableName="runs",
            Key={
                "pk": {"S": audit_partition("production", utc_day(NOON))},
                "sk": {"S": f"{NOON - 3:015d}#act-9"},
            },
        )["Item"]

    assert utc_day(NOON) == "2026-12-05"
    assert item[tables.TTL_ATTRIBUTE] == {"N": str((NOON - 3) // 1000 + RETENTION_DAYS * 86400)}


def mark(workflow_id: str = "billing", environment: str = "production", by: str = "ops") -> Any:
    return WorkflowPause(workflow_id=workflow_id, environment=environment, at=NOON, by=by)


def test_pausing_twice_keeps_the_first_mark(stores: Stores) -> None:
    assert stores.pauses.pause(mark(by="alice")) is True
    assert stores.pauses.pause(mark(by="bob")) is False

    assert stores.pauses.get("billing", "production") == mark(by="alice")
    assert stores.pauses.get("billing", "preview") is None


def test_resume_returns_the_mark_it_removed_once(stores: Stores) -> None:
    stores.pauses.pause(mark())

    assert stores.pauses.resume("billing", "production") == mark()
    assert stores.pauses.resume("billing", "production") is None
    assert stores.pauses.resume("never-paused", "production") is None
    assert stores.pauses.get("billing", "production") is None


def test_paused_workflows_are_listed_per_environment(stores: Stores) -> None:
    for workflow_id, env in [("crm", "preview"), ("billing", "production"), ("ads", "preview")]:
        stores.pauses.pause(mark(workflow_id, env))

    assert [(m.environment, m.workflow_id) for m in stores.pauses.list()] == [
        ("preview", "ads"),
        ("preview", "crm"),
        ("production", "billing"),
    ]
    assert [m.workflow_id for m in stores.pauses.list("preview")] == ["ads", "crm"]
    assert stores.pauses.list("development") == []


def test_of_fifty_concurrent_pauses_exactly_one_marks_the_workflow(stores: Stores) -> None:
    with ThreadPoolExecutor(max_workers=16) as pool:
        answers = list(pool.map(lambda n: stores.pauses.pause(mark(by=f"op{n}")), range(50)))

    assert answers.count(True) == 1
    winner = f"op{answers.index(True)}"
    paused = stores.pauses.get("billing", "production")
    assert paused is not None and paused.by == winner


class CountingPauses:
    """The in-memory marks, counting the reads that reach them."""

    def __init__(self) -> None:
        self.inner = InMemoryWorkflowPauses()
        self.reads = 0

    def pause(self, mark: WorkflowPause) -> bool:
        return self.inner.pause(mark)

    def resume(self, workflow_id: str, environment: str) -> WorkflowPause | None:
        return self.inner.resume(workflow_id, environment)

    def get(self, workflow_id: str, environment: str) -> WorkflowPause | None:
        self.reads += 1
        return self.inner.get(workflow_id, environment)

    def list(self, environment: str | None = None) -> list[WorkflowPause]:
        return self.inner.list(environment)


def test_the_cached_reader_reads_each_workflow_once_per_five_seconds() -> None:
    clock = VirtualClock(NOON)
    store = CountingPauses()
    paused = PausedWorkflows(store, clock)

    for _ in range(100):
        assert paused.get("billing", "production") is None
    store.inner.pause(mark())  # another process pauses it
    clock.advance(CACHE_TTL_MS - 1)
    stale = paused.get("billing", "production")
    clock.advance(1)
    fresh = paused.get("billing", "production")

    assert stale is None
    assert fresh == mark()
    assert store.reads == 2


def test_the_cached_readers_own_pause_and_resume_are_seen_at_once() -> None:
    clock = VirtualClock(NOON)
    store = CountingPauses()
    paused = PausedWorkflows(store, clock)
    assert paused.get("billing", "production") is None

    assert paused.pause(mark()) is True
    assert paused.get("billing", "production") == mark()
    assert paused.resume("billing", "production") == mark()
    assert paused.get("billing", "production") is None
    assert paused.get("billing", "preview") is None
    paused.invalidate("billing", "preview")
    assert paused.get("billing", "preview") is None
    assert store.reads == 5
