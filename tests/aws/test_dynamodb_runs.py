"""The DynamoDB run store: conditional writes, entry items, listing parity, due runs, TTL."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import pytest
from aws_fakes import DictStore

from relayflow.adapters.aws import tables
from relayflow.adapters.aws.clients import AwsClients
from relayflow.adapters.aws.run_items import item_size, write_units
from relayflow.adapters.aws.runs import DynamoDBRunStore
from relayflow.adapters.memory.runs import InMemoryRunStore
from relayflow.config import Settings
from relayflow.core.record import ChildLink, InboxItem, RunRecord
from relayflow.errors import RunAlreadyExistsError, StaleRunError, ValidationError
from relayflow.ports import RunQuery
from relayflow.protocol import StepAttempt, StepJournalEntry, StreamChunk, WaitpointResolution

TABLE = "runs"
T0 = 1_767_225_600_000


class FixedClock:
    def now_ms(self) -> int:
        return T0


@pytest.fixture
def clients(aws: None, fast_transactions: None) -> Iterator[AwsClients]:
    built = AwsClients(region="eu-west-1")
    tables.create_resources(built, Settings(table_name=TABLE))
    yield built


@pytest.fixture
def store(clients: AwsClients) -> DynamoDBRunStore:
    return DynamoDBRunStore(TABLE, client_factory=clients.dynamodb, clock=FixedClock())


def new_record(run_id: str = "run-1", **fields: Any) -> RunRecord:
    base: dict[str, Any] = {
        "id": run_id,
        "workflow_id": "orders.fulfil",
        "input": {"order": 42},
        "started_at": T0,
        "wake_at": T0,
    }
    base.update(fields)
    return RunRecord(**base)


def step(i: int, size: int = 40) -> StepJournalEntry:
    return StepJournalEntry(
        status="ok",
        output={"i": i, "pad": "x" * size},
        started_at=T0 + i,
        finished_at=T0 + i + 1,
        attempts=[StepAttempt(attempt=1, status="ok", started_at=T0 + i, finished_at=T0 + i + 1)],
    )


def with_step(record: RunRecord, i: int, size: int = 40) -> RunRecord:
    journal = record.journal.model_copy(deep=True)
    journal.step_results[f"step-{i}"] = step(i, size)
    return record.model_copy(
        update={"journal": journal, "invocation_count": i + 1, "wake_at": T0 + i}
    )


def rich_record() -> RunRecord:
    record = new_record(
        tags=["a", "b"],
        children=[ChildLink(run_id="run-1/invoke:c:0", waitpoint_id="invoke:c:0")],
        applied_metadata_ids=["m::0", "m::1"],
        seen_injection_ids=["evt_1", "evt_2"],
        inbox=[
            InboxItem(id="evt_9", kind="EVENT", key="paid", payload={"n": 1}, received_at=T0),
            InboxItem(id="sig_1", kind="SIGNAL", key="go", received_at=T0 + 1),
        ],
        streams={
            "log": [StreamChunk(stream_id="log", seq=i, chunk=f"line {i}") for i in range(3)],
            "empty": [],
        },
    )
    record.journal.step_results["charge"] = step(1)
    record.journal.step_results["a/very:long id " * 30] = step(2)
    record.journal.waitpoints_resolved["event:paid:0"] = WaitpointResolution(
        kind="EVENT", resolved_at=T0, payload={"ok": True}
    )
    record.journal.metadata_state.update({"progress": 3, "label": "ünï"})
    return record


def test_insert_then_get_round_trips_every_field(store: DynamoDBRunStore) -> None:
    record = rich_record()
    inserted = store.try_insert(record)
    assert inserted.version == 1
    fresh = DynamoDBRunStore(TABLE, client_factory=store._client_factory)
    loaded = fresh.get("run-1")
    assert loaded == record.model_copy(update={"version": 1})
    assert list(loaded.journal.step_results) == list(record.journal.step_results)  # type: ignore[union-attr]
    assert list(loaded.streams) == ["log", "empty"]  # type: ignore[union-attr]


def test_get_of_an_unknown_run_is_none(store: DynamoDBRunStore) -> None:
    assert store.get("nope") is None


def test_second_insert_returns_the_existing_run(store: DynamoDBRunStore) -> None:
    store.try_insert(new_record(input={"first": True}))
    with pytest.raises(RunAlreadyExistsError) as caught:
        store.try_insert(new_record(input={"second": True}))
    assert caught.value.existing.input == {"first": True}
    assert caught.value.existing.version == 1


def test_existing_run_comes_back_with_its_entries(store: DynamoDBRunStore) -> None:
    store.try_insert(rich_record())
    with pytest.raises(RunAlreadyExistsError) as caught:
        store.try_insert(new_record())
    assert "charge" in caught.value.existing.journal.step_results


def test_save_is_conditional_on_the_version(store: DynamoDBRunStore) -> None:
    record = store.try_insert(new_record())
    saved = store.save(with_step(record, 0), expected_version=1)
    assert saved.version == 2
    with pytest.raises(StaleRunError, match="version 2, not 1"):
        store.save(with_step(record, 1), expected_version=1)
    assert list(store.get("run-1").journal.step_results) == ["step-0"]  # type: ignore[union-attr]


def test_a_lost_race_between_two_processes_never_overwrites(clients: AwsClients) -> None:
    a = DynamoDBRunStore(TABLE, client_factory=clients.dynamodb)
    b = DynamoDBRunStore(TABLE, client_factory=clients.dynamodb)
    a.try_insert(new_record())
    seen_by_a = a.get("run-1")
    seen_by_b = b.get("run-1")
    assert seen_by_a is not None and seen_by_b is not None
    a.save(with_step(seen_by_a, 0), expected_version=1)
    with pytest.raises(StaleRunError):
        b.save(with_step(seen_by_b, 7), expected_version=1)
    final = DynamoDBRunStore(TABLE, client_factory=clients.dynamodb).get("run-1")
    assert final is not None
    assert list(final.journal.step_results) == ["step-0"]
    assert final.version == 2
    # B reloads and wins the next round.
    reloaded = b.get("run-1")
    assert reloaded is not None
    assert b.save(with_step(reloaded, 7), expected_version=2).version == 3


def test_removed_entries_disappear(store: DynamoDBRunStore) -> None:
    record = store.try_insert(rich_record())
    loaded = store.get("run-1")
    assert loaded is not None
    loaded.journal.metadata_state.pop("label")
    loaded.applied_metadata_ids.pop()
    store.save(loaded, expected_version=1)
    again = DynamoDBRunStore(TABLE, client_factory=store._client_factory).get("run-1")
    assert again is not None
    assert again.journal.metadata_state == {"progress": 3}
    assert again.applied_metadata_ids == ["m::0"]
    assert record.version == 1


def test_a_save_too_large_for_one_transaction_uses_bundles(store: DynamoDBRunStore) -> None:
    record = store.try_insert(new_record())
    for i in range(250):
        record = with_step(record, i)
    record = store.save(record, expected_version=1)
    fresh = DynamoDBRunStore(TABLE, client_factory=store._client_factory)
    loaded = fresh.get("run-1")
    assert loaded == record
    # Later changes to bundled entries, and removals, still win over the bundle.
    assert loaded is not None
    loaded.journal.step_results["step-3"].output = "changed"
    del loaded.journal.step_results["step-4"]
    loaded = fresh.save(loaded, expected_version=2)
    final = DynamoDBRunStore(TABLE, client_factory=store._client_factory).get("run-1")
    assert final == loaded
    assert final is not None and "step-4" not in final.journal.step_results


def test_an_entry_too_large_for_an_item_needs_a_payload_store(clients: AwsClients) -> None:
    bare = DynamoDBRunStore(TABLE, client_factory=clients.dynamodb)
    record = with_step(new_record(), 0, size=500_000)
    with pytest.raises(ValidationError, match="payload store"):
        bare.try_insert(record)
    payloads = DictStore()
    store = DynamoDBRunStore(TABLE, client_factory=clients.dynamodb, payload_store=payloads)
    store.try_insert(record)
    assert payloads.puts == 1
    loaded = DynamoDBRunStore(TABLE, client_factory=clients.dynamodb, payload_store=payloads).get(
        "run-1"
    )
    assert loaded == record.model_copy(update={"version": 1})


def test_finished_runs_expire_with_all_their_items(
    store: DynamoDBRunStore, clients: AwsClients
) -> None:
    record = store.try_insert(rich_record())
    done = record.model_copy(
        update={"status": "completed", "completed_at": T0 + 5_000, "wake_at": None, "output": 1}
    )
    store.save(done, expected_version=1)
    items = clients.dynamodb().query(
        TableName=TABLE,
        KeyConditionExpression="pk = :p",
        ExpressionAttributeValues={":p": {"S": "run-1"}},
    )["Items"]
    expected = str((T0 + 5_000) // 1000 + 30 * 86_400)
    assert len(items) > 5
    assert {item["expiresAt"]["N"] for item in items} == {expected}


def test_due_runs_come_from_the_sparse_wake_index(store: DynamoDBRunStore) -> None:
    memory = InMemoryRunStore()
    for i, wake in enumerate([T0 + 50, T0 + 10, None, T0 + 30, T0 + 999, T0 + 20]):
        record = new_record(f"run-{i}", wake_at=wake)
        store.try_insert(record)
        memory.try_insert(record)
    for before, limit in [(T0 + 30, 100), (T0 + 1000, 2), (T0, 10), (T0 + 1000, 100)]:
        assert store.due_runs(before, limit) == memory.due_runs(before, limit)
    assert store.due_runs(T0 + 30) == ["run-1", "run-5", "run-3"]


def _all_pages(store: Any, query: RunQuery) -> list[list[str]]:
    pages: list[list[str]] = []
    cursor = None
    while True:
        page = store.list_runs(RunQuery(**{**query.__dict__, "cursor": cursor}))
        pages.append([r.id for r in page.runs])
        cursor = page.next_cursor
        if cursor is None:
            return pages
        assert len(pages) < 50


QUERIES = [
    RunQuery(limit=4),
    RunQuery(limit=100),
    RunQuery(environment="production", limit=3),
    RunQuery(workflow_id="wf-1", limit=2),
    RunQuery(workflow_id="wf-1", statuses=("waiting", "completed"), limit=2),
    RunQuery(workflow_id="wf-2", environment="preview", limit=5),
    RunQuery(statuses=("failed",), limit=2),
    RunQuery(statuses=("waiting", "failed", "running"), environment="development", limit=3),
    RunQuery(tag="blue", limit=3),
    RunQuery(started_after=T0 + 5_000, limit=4),
    RunQuery(started_before=T0 + 5_000, limit=4),
    RunQuery(started_after=T0 + 3_000, started_before=T0 + 9_000, tag="red", limit=2),
    RunQuery(workflow_id="wf-3", limit=1, started_after=T0 + 100_000),
    RunQuery(started_before=0),
]


def test_listing_pages_match_the_in_memory_store(store: DynamoDBRunStore) -> None:
    memory = InMemoryRunStore()
    statuses = itertools.cycle(["running", "waiting", "completed", "failed"])
    environments = itertools.cycle(["production", "preview", "development"])
    tags = itertools.cycle([["blue"], ["red"], ["red", "blue"], []])
    for i in range(30):
        record = new_record(
            f"run-{i:02d}",
            workflow_id=f"wf-{i % 3}",
            status=next(statuses),
            environment=next(environments),
            tags=next(tags),
            # Several runs share a start time: ties are ordered by run id.
            started_at=T0 + (i // 2) * 1000,
        )
        store.try_insert(record)
        memory.try_insert(record)
    for query in QUERIES:
        assert _all_pages(store, query) == _all_pages(memory, query), query


def test_listed_records_carry_header_fields(store: DynamoDBRunStore) -> None:
    store.try_insert(rich_record())
    page = store.list_runs(RunQuery())
    assert [r.id for r in page.runs] == ["run-1"]
    listed = page.runs[0]
    assert (listed.workflow_id, listed.status, listed.tags) == (
        "orders.fulfil",
        "running",
        ["a", "b"],
    )
    assert listed.input == {"order": 42}
    assert listed.journal.step_results == {}


@pytest.mark.parametrize("cursor", ["not base64!", "W10", "bnVsbA"])
def test_a_bad_cursor_is_refused(store: DynamoDBRunStore, cursor: str) -> None:
    with pytest.raises(ValidationError, match="cursor"):
        store.list_runs(RunQuery(cursor=cursor))


def grow(store: DynamoDBRunStore, record: RunRecord, steps: int, chunk: int = 95) -> RunRecord:
    """Add steps up to ``steps`` in saves of ``chunk`` (moto copies the table per transaction)."""
    journal = record.journal.model_copy(deep=True)
    count = len(journal.step_results)
    while count < steps:
        for i in range(count, min(count + chunk, steps)):
            journal.step_results[f"step-{i}"] = step(i, size=300)
        count = min(count + chunk, steps)
        record = record.model_copy(update={"journal": journal.model_copy(deep=True)})
        record = store.save(record, expected_version=record.version)
    return record


def all_items(clients: AwsClients, run_id: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    params: dict[str, Any] = {
        "TableName": TABLE,
        "KeyConditionExpression": "pk = :p",
        "ExpressionAttributeValues": {":p": {"S": run_id}},
    }
    while True:
        page = clients.dynamodb().query(**params)
        items.extend(page["Items"])
        if "LastEvaluatedKey" not in page:
            return items
        params["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def test_a_1000_step_run_keeps_every_item_small(
    store: DynamoDBRunStore, clients: AwsClients
) -> None:
    record = grow(store, store.try_insert(new_record()), 1000)
    items = all_items(clients, "run-1")
    sizes = [item_size(item) for item in items]
    assert len(items) == 1001
    assert max(sizes) < 2_000, "neither the header nor an entry grows with the run"
    assert DynamoDBRunStore(TABLE, client_factory=clients.dynamodb).get("run-1") == record


class WriteMeter:
    """Counts DynamoDB write requests and the write units of what they carry."""

    def __init__(self) -> None:
        self.requests = 0
        self.units = 0
        self.items = 0

    def __call__(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        body = json.loads(params["body"])
        if model.name == "TransactWriteItems":
            self.requests += 1
            for action in body["TransactItems"]:
                self.items += 1
                item = action.get("Put", {}).get("Item")
                self.units += write_units(item, transactional=True) if item else 2
        elif model.name in ("PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem"):
            self.requests += 1
            for request in body.get("RequestItems", {}).get(TABLE, [{}]):
                self.items += 1
                item = request.get("PutRequest", {}).get("Item") or body.get("Item")
                self.units += write_units(item, transactional=False) if item else 1


def per_step_cost(
    store: DynamoDBRunStore, clients: AwsClients, run_id: str, steps: int
) -> tuple[float, float, float]:
    record = grow(store, store.try_insert(new_record(run_id)), steps - 10)
    meter = WriteMeter()
    clients.dynamodb().meta.events.register("before-call.dynamodb.*", meter)
    try:
        for i in range(steps - 10, steps):
            record = store.save(with_step(record, i, size=300), expected_version=record.version)
    finally:
        clients.dynamodb().meta.events.unregister("before-call.dynamodb.*", meter)
    return meter.requests / 10, meter.items / 10, meter.units / 10


def test_a_checkpoint_costs_the_same_at_step_100_and_step_1000(
    store: DynamoDBRunStore, clients: AwsClients
) -> None:
    at_100 = per_step_cost(store, clients, "short", 100)
    at_1000 = per_step_cost(store, clients, "long", 1000)
    assert at_100 == at_1000
    requests, items, units = at_1000
    assert (requests, items) == (1.0, 2.0), "one transaction: the header and the new entry"
    assert units <= 6


def test_trimming_the_oldest_ids_deletes_them_without_rewriting_the_rest(
    store: DynamoDBRunStore, clients: AwsClients
) -> None:
    record = store.try_insert(new_record(seen_injection_ids=[f"evt_{i}" for i in range(50)]))
    trimmed = record.model_copy(
        update={"seen_injection_ids": [*record.seen_injection_ids[10:], "evt_50"]}
    )
    meter = WriteMeter()
    clients.dynamodb().meta.events.register("before-call.dynamodb.*", meter)
    store.save(trimmed, expected_version=1)
    clients.dynamodb().meta.events.unregister("before-call.dynamodb.*", meter)
    assert (meter.requests, meter.items) == (1, 12), "header, one new id, ten deletions"
    loaded = DynamoDBRunStore(TABLE, client_factory=clients.dynamodb).get("run-1")
    assert loaded is not None
    assert loaded.seen_injection_ids == trimmed.seen_injection_ids
