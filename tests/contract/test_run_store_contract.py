"""The RunStore port contract: atomic inserts, version-conditional saves, real cursors,
the sweeper's due query. One factory per store; adding a backend is one entry."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from relayflow.adapters.aws import tables
from relayflow.adapters.aws.clients import AwsClients
from relayflow.adapters.aws.runstore import DynamoDBRunStore
from relayflow.adapters.memory import InMemoryRunStore
from relayflow.config import Settings
from relayflow.core.record import RunRecord
from relayflow.errors import RunAlreadyExistsError, StaleRunError, ValidationError
from relayflow.operations.versions import live_versions
from relayflow.ports import RunQuery, RunStore
from tests.moto_support import moto_backend, use_fake_credentials


def dynamodb_run_store() -> RunStore:
    """A DynamoDB run store on moto (call inside an active moto backend)."""
    clients = AwsClients(region="eu-west-1")
    tables.create_resources(clients, Settings(table_name="runs"))
    return DynamoDBRunStore("runs", client_factory=clients.dynamodb)


STORE_FACTORIES: dict[str, Callable[[], RunStore]] = {
    "memory": InMemoryRunStore,
    "dynamodb-moto": dynamodb_run_store,
}
ON_MOTO = {"dynamodb-moto"}


@pytest.fixture(params=sorted(STORE_FACTORIES))
def store(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[RunStore]:
    if request.param not in ON_MOTO:
        yield STORE_FACTORIES[request.param]()
        return
    use_fake_credentials(monkeypatch)
    with moto_backend():
        yield STORE_FACTORIES[request.param]()


def record(run_id: str, started_at: int = 1000, **fields: object) -> RunRecord:
    return RunRecord.model_validate(
        {"id": run_id, "workflowId": "wf", "startedAt": started_at, **fields}
    )


def test_insert_is_atomic_and_reports_the_existing_run(store: RunStore) -> None:
    first = store.try_insert(record("r", input=1))
    assert first.version == 1
    with pytest.raises(RunAlreadyExistsError) as info:
        store.try_insert(record("r", input=2))
    assert info.value.existing.input == 1


def test_saves_are_conditional_on_the_version(store: RunStore) -> None:
    stored = store.try_insert(record("r"))
    saved = store.save(stored.model_copy(update={"status": "waiting"}), expected_version=1)
    assert saved.version == 2
    with pytest.raises(StaleRunError):
        store.save(stored.model_copy(update={"status": "failed"}), expected_version=1)
    found = store.get("r")
    assert found is not None and found.status == "waiting" and found.version == 2


def test_a_delivery_mark_fails_the_next_save_of_a_record_read_before_it(
    store: RunStore,
) -> None:
    first = store.try_insert(record("r", input=1))
    assert store.mark_dirty("r", version=first.version)
    assert store.mark_dirty("r", version=first.version), "marks never fail each other"
    assert not store.mark_dirty("r", version=first.version + 1)
    assert not store.mark_dirty("missing", version=1)
    with pytest.raises(StaleRunError):
        store.save(first.model_copy(update={"input": 2}), expected_version=first.version)
    for read in (store.get("r"), store.get_header("r")):
        assert read is not None
        assert (read.version, read.dirty, read.delivery_mark) == (first.version, True, True)
    marked = store.get("r")
    assert marked is not None
    saved = store.save(
        marked.model_copy(update={"dirty": False, "input": 3}), expected_version=marked.version
    )
    assert not saved.delivery_mark
    again = store.get("r")
    assert again is not None
    assert (again.version, again.dirty, again.delivery_mark, again.input) == (
        saved.version,
        False,
        False,
        3,
    )
    assert not store.mark_dirty("r", version=first.version), "a version saved over stays"
    kept = store.save(again.model_copy(update={"input": 4}), expected_version=again.version)
    assert kept.input == 4


def test_a_record_round_trips_through_the_store(store: RunStore) -> None:
    original = record(
        "r",
        tags=["a"],
        inbox=[{"id": "e1", "kind": "EVENT", "key": "x", "receivedAt": 5, "payload": {"n": 1}}],
        lease={"owner": "me", "expiresAt": 9},
        journal={"stepResults": {"s": {"status": "ok", "output": [1, 2]}}},
    )
    store.try_insert(original)
    assert store.get("r") == original.model_copy(update={"version": 1})
    assert store.get("missing") is None


def test_listing_pages_newest_first_with_cursors_and_filters(store: RunStore) -> None:
    for n in range(5):
        store.try_insert(record(f"r{n}", started_at=1000 + n, tags=["even"] if n % 2 == 0 else []))
    pages: list[list[str]] = []
    cursor = None
    while True:
        page = store.list_runs(RunQuery(limit=2, cursor=cursor))
        pages.append([r.id for r in page.runs])
        cursor = page.next_cursor
        if cursor is None:
            break
    assert pages == [["r4", "r3"], ["r2", "r1"], ["r0"]]
    tagged = store.list_runs(RunQuery(tag="even", started_after=1001))
    assert [r.id for r in tagged.runs] == ["r4", "r2"]
    with pytest.raises(ValidationError):
        store.list_runs(RunQuery(cursor="%%%"))


def test_listing_filters_by_the_build_a_run_is_on_across_pages(store: RunStore) -> None:
    for n in range(7):
        build = "build-1" if n % 3 == 0 else "build-2"
        version = {"build": build, "function": f"fn:{n % 3 + 1}"}
        store.try_insert(record(f"r{n}", started_at=1000 + n, codeVersion=version))
    store.try_insert(record("unanswered", started_at=2000))
    seen: list[str] = []
    cursor = None
    while True:
        page = store.list_runs(RunQuery(code_version="build-1", limit=2, cursor=cursor))
        seen.extend(r.id for r in page.runs)
        assert all(r.code_version and r.code_version.build == "build-1" for r in page.runs)
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == ["r6", "r3", "r0"]
    live = store.list_runs(RunQuery(code_version="build-2", statuses=("running",)))
    assert [r.id for r in live.runs] == ["r5", "r4", "r2", "r1"]


def test_listing_the_children_of_a_run_across_pages(store: RunStore) -> None:
    store.try_insert(record("parent", started_at=1000))
    for n in range(5):
        link = {"runId": "parent" if n % 2 == 0 else "other", "waitpointId": f"invoke:c{n}"}
        store.try_insert(record(f"parent/c{n}", started_at=1001 + n, parent=link))
    seen: list[str] = []
    cursor = None
    while True:
        page = store.list_runs(RunQuery(parent_run_id="parent", limit=2, cursor=cursor))
        seen.extend(r.id for r in page.runs)
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == ["parent/c4", "parent/c2", "parent/c0"]
    assert store.list_runs(RunQuery(parent_run_id="parent/c0")).runs == []


def test_live_versions_count_the_runs_not_ended_per_workflow_and_build(store: RunStore) -> None:
    def on(build: str, n: int, **fields: object) -> RunRecord:
        version = {"build": build, "function": f"fn:{build}"}
        return record(f"{build}-{n}", started_at=1000 + n, codeVersion=version, **fields)

    for n in range(3):
        store.try_insert(on("b1", n, status="waiting"))
    store.try_insert(on("b1", 3, versionWait={"since": 5, "reason": "gone", "attempts": 2}))
    store.try_insert(on("b2", 4, status="paused"))
    store.try_insert(on("b2", 5, status="completed"))
    store.try_insert(record("fresh", started_at=1010, status="queued"))

    report = live_versions(store)
    capped = live_versions(store, max_runs=2)

    lines = [(v.key.build, v.key.function, v.runs, v.waiting_for_version) for v in report.versions]
    assert lines == [("b1", "fn:b1", 4, 1), (None, None, 1, 0), ("b2", "fn:b2", 1, 0)]
    assert (report.runs_read, report.truncated) == (6, False)
    assert (capped.runs_read, capped.truncated) == (2, True)


def test_due_runs_are_the_unfinished_ones_whose_wake_time_passed(store: RunStore) -> None:
    store.try_insert(record("late", wakeAt=500))
    store.try_insert(record("soon", wakeAt=2000))
    store.try_insert(record("done", status="completed"))
    assert store.due_runs(1000) == ["late"]
    assert store.due_runs(3000) == ["late", "soon"]
