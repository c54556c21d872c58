"""The DynamoDB run store: conditional writes, round trips, listing parity, due runs, TTL."""

from __future__ import annotations

import itertools
import json
import zlib
from collections.abc import Iterator
from typing import Any

import pydantic_core
import pytest
from aws_fakes import DictStore
from run_store_support import (
    T0,
    TABLE,
    FixedClock,
    Metered,
    all_items,
    fresh_get,
    new_record,
    page_items,
    step,
    with_paged_step,
    with_step,
    with_steps,
)

from relayflow.adapters.aws import attributes, tables
from relayflow.adapters.aws.clients import AwsClients
from relayflow.adapters.aws.runstore import DynamoDBRunStore, _codec
from relayflow.adapters.memory.runs import InMemoryRunStore
from relayflow.config import Settings
from relayflow.core.record import ChildLink, InboxItem, Lease, RunRecord
from relayflow.errors import RunAlreadyExistsError, StaleRunError, ValidationError
from relayflow.ports import RunQuery
from relayflow.protocol import StreamChunk, WaitpointResolution

EXPIRES = str((T0 + 5_000) // 1000 + 30 * 86_400)


@pytest.fixture
def clients(aws: None) -> Iterator[AwsClients]:
    built = AwsClients(region="eu-west-1")
    tables.create_resources(built, Settings(table_name=TABLE))
    yield built


@pytest.fixture
def store(clients: AwsClients) -> DynamoDBRunStore:
    return DynamoDBRunStore(TABLE, client_factory=clients.dynamodb, clock=FixedClock())


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


def finished(record: RunRecord, **fields: Any) -> RunRecord:
    return record.model_copy(
        update={
            "status": "completed",
            "completed_at": T0 + 5_000,
            "wake_at": None,
            "output": 1,
            **fields,
        }
    )


def test_insert_then_get_round_trips_every_field(
    store: DynamoDBRunStore, clients: AwsClients
) -> None:
    record = rich_record()
    inserted = store.try_insert(record)
    assert inserted.version == 1
    loaded = fresh_get(clients)
    assert loaded == record.model_copy(update={"version": 1})
    assert list(loaded.journal.step_results) == list(record.journal.step_results)
    assert list(loaded.streams) == ["log", "empty"]
    assert store.get("run-1") == loaded


def test_a_run_stored_in_the_earlier_header_layout_reads_back(clients: AwsClients) -> None:
    """Headers holding every field in their document, and blobs compressed without the
    preset dictionary, as earlier versions wrote them."""
    record = rich_record().model_copy(update={"version": 3})
    body = (
        b"["
        + b",".join(
            attributes.encode_json([part[0], part[1], json.loads(attributes.encode(obj))]).encode()
            for part, obj in _codec.iter_parts(record)
        )
        + b"]"
    )
    commit = "000000000003.0a0b0c0d"
    page = {
        "pk": {"S": "run-1"},
        "sk": {"S": f"g#{commit}#0000"},
        "n": {"N": "1"},
        "z": {"B": zlib.compress(body)},
    }
    doc = pydantic_core.to_json(record, by_alias=True, exclude=_codec.HEADER_EXCLUDE)
    header = {
        "pk": {"S": "run-1"},
        "sk": {"S": "#run"},
        "runId": {"S": "run-1"},
        "workflowId": {"S": record.workflow_id},
        "status": {"S": record.status},
        "environment": {"S": record.environment},
        "tags": {"L": [{"S": tag} for tag in record.tags]},
        "startedAt": {"N": str(record.started_at)},
        "version": {"N": "3"},
        "gTime": {"S": f"{record.started_at:015d}#run-1"},
        "gWorkflow": {"S": record.workflow_id},
        "gStatus": {"S": "live"},
        "gEnvironment": {"S": record.environment},
        "z": {"B": zlib.compress(doc)},
        "w": {"S": "0a0b0c0d"},
        "head": {"S": commit},
    }
    for item in (page, header):
        clients.dynamodb().put_item(TableName=TABLE, Item=item)
    loaded = fresh_get(clients)
    assert loaded == record
    store = DynamoDBRunStore(TABLE, client_factory=clients.dynamodb)
    again = store.get("run-1")
    assert again is not None
    saved = store.save(with_step(again, 9), expected_version=3)
    assert fresh_get(clients) == saved


def test_get_of_an_unknown_run_is_none(store: DynamoDBRunStore) -> None:
    assert store.get("nope") is None


def test_second_insert_returns_the_existing_run(store: DynamoDBRunStore) -> None:
    store.try_insert(new_record(input={"first": True}))
    with pytest.raises(RunAlreadyExistsError) as caught:
        store.try_insert(new_record(input={"second": True}))
    assert caught.value.existing.input == {"first": True}
    assert caught.value.existing.version == 1


def test_existing_run_comes_back_with_its_entries(
    store: DynamoDBRunStore, clients: AwsClients
) -> None:
    store.try_insert(with_paged_step(rich_record(), 1))
    with pytest.raises(RunAlreadyExistsError) as caught:
        store.try_insert(with_paged_step(new_record(), 7))
    assert "charge" in caught.value.existing.journal.step_results
    assert "step-7" not in caught.value.existing.journal.step_results
    # The refused insert's own pages are gone: only the first run's remain.
    assert len(page_items(clients, "run-1")) == 1


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
    a.save(with_paged_step(seen_by_a, 0), expected_version=1)
    with pytest.raises(StaleRunError):
        b.save(with_paged_step(seen_by_b, 7), expected_version=1)
    final = fresh_get(clients)
    assert final is not None
    assert list(final.journal.step_results) == ["step-0"]
    assert final.version == 2
    # B's pages were removed with its failed write; B reloads and wins the next round.
    assert len(page_items(clients, "run-1")) == 1
    reloaded = b.get("run-1")
    assert reloaded is not None
    assert b.save(with_step(reloaded, 7), expected_version=2).version == 3
    assert list(fresh_get(clients).journal.step_results) == ["step-0", "step-7"]  # type: ignore[union-attr]


def test_changed_and_removed_entries_win_over_older_pages(
    store: DynamoDBRunStore, clients: AwsClients
) -> None:
    store.try_insert(rich_record())
    loaded = store.get("run-1")
    assert loaded is not None
    loaded.journal.metadata_state.pop("label")
    loaded.journal.metadata_state["progress"] = 4
    loaded.applied_metadata_ids.pop()
    loaded.journal.step_results["charge"] = step(9)
    saved = store.save(loaded, expected_version=1)
    again = fresh_get(clients)
    assert again == saved
    assert again is not None
    assert again.journal.metadata_state == {"progress": 4}
    assert again.applied_metadata_ids == ["m::0"]
    # A changed entry keeps its place; one removed and added again goes last.
    assert next(iter(again.journal.step_results)) == "charge"
    readded = again.model_copy(deep=True)
    readded.journal.metadata_state["label"] = "back"
    readded.journal.metadata_state["progress"] = 5
    saved = store.save(readded, expected_version=2)
    assert list(fresh_get(clients).journal.metadata_state.items()) == [  # type: ignore[union-attr]
        ("progress", 5),
        ("label", "back"),
    ]


def test_a_record_handed_out_is_a_copy(store: DynamoDBRunStore) -> None:
    store.try_insert(rich_record())
    first = store.get("run-1")
    assert first is not None
    first.journal.step_results["extra"] = step(5)
    first.inbox.clear()
    first.tags.append("c")
    assert first.lease is None
    again = store.get("run-1")
    assert again is not None
    assert "extra" not in again.journal.step_results
    assert len(again.inbox) == 2
    assert again.tags == ["a", "b"]


def test_an_entry_too_large_for_an_item_needs_a_payload_store(clients: AwsClients) -> None:
    bare = DynamoDBRunStore(TABLE, client_factory=clients.dynamodb)
    record = with_step(new_record(), 0, size=500_000)
    with pytest.raises(ValidationError, match="payload store"):
        bare.try_insert(record)
    payloads = DictStore()
    store = DynamoDBRunStore(TABLE, client_factory=clients.dynamodb, payload_store=payloads)
    store.try_insert(record)
    assert payloads.puts == 1
    loaded = fresh_get(clients, payload_store=payloads)
    assert loaded == record.model_copy(update={"version": 1})


def test_a_large_output_is_uploaded_once(clients: AwsClients) -> None:
    payloads = DictStore()
    store = DynamoDBRunStore(TABLE, client_factory=clients.dynamodb, payload_store=payloads)
    record = store.try_insert(new_record(input={"blob": "i" * 100_000}))
    assert payloads.puts == 1
    for owner in ("a", "b", "c"):
        record = store.save(
            record.model_copy(update={"lease": Lease(owner=owner, expires_at=T0)}),
            expected_version=record.version,
        )
    done = store.save(finished(record, output={"blob": "o" * 100_000}), expected_version=4)
    released = store.save(done.model_copy(update={"lease": None}), expected_version=5)
    assert payloads.puts == 2, "the input and the output, each once"
    header = next(i for i in all_items(clients, "run-1") if i["sk"]["S"] == "#run")
    assert len(header["z"]["B"]) < 1_000
    assert fresh_get(clients, payload_store=payloads) == released
    # A new process uploads nothing for fields it read back unchanged.
    other = DynamoDBRunStore(TABLE, client_factory=clients.dynamodb, payload_store=payloads)
    loaded = other.get("run-1")
    assert loaded is not None
    other.save(loaded.model_copy(update={"tags": ["x"]}), expected_version=6)
    assert payloads.puts == 2


def test_finished_runs_expire_with_all_their_items_stamped_once(
    store: DynamoDBRunStore, clients: AwsClients
) -> None:
    record = store.try_insert(rich_record())
    record = store.save(with_paged_step(record, 1), expected_version=1)
    record = store.save(with_paged_step(record, 2), expected_version=2)
    with Metered(clients) as meter:
        done = store.save(finished(record), expected_version=3)
    # The header, then the two pages written before the end, stamped in one request; the
    # run took deliveries, so its delivery ids are looked for too (none are logged here).
    assert record.inbox or record.seen_injection_ids
    assert dict(meter.calls) == {"PutItem": 1, "Query": 2, "BatchWriteItem": 1}
    assert meter.items == 1 + 2
    items = all_items(clients, "run-1")
    assert {item["expiresAt"]["N"] for item in items} == {EXPIRES}
    assert "xp" in next(i for i in items if i["sk"]["S"] == "#run")
    with Metered(clients) as meter:
        store.save(done.model_copy(update={"lease": None}), expected_version=4)
    assert dict(meter.calls) == {"PutItem": 1}, "releasing the lease stamps nothing again"
    header = next(i for i in all_items(clients, "run-1") if i["sk"]["S"] == "#run")
    assert "xp" not in header and header["expiresAt"]["N"] == EXPIRES


def test_a_run_ending_in_its_first_page_write_needs_no_stamping(
    store: DynamoDBRunStore, clients: AwsClients
) -> None:
    record = store.try_insert(new_record())
    with Metered(clients) as meter:
        store.save(finished(with_steps(record, range(20), 300, noisy=True)), expected_version=1)
    assert dict(meter.calls) == {"BatchWriteItem": 1, "PutItem": 1}
    assert {item["expiresAt"]["N"] for item in all_items(clients, "run-1")} == {EXPIRES}


def test_expiry_left_unfinished_by_a_crash_is_finished_by_the_next_reader(
    store: DynamoDBRunStore, clients: AwsClients
) -> None:
    record = store.save(with_paged_step(store.try_insert(new_record()), 1), expected_version=1)

    class Crash(BaseException):
        pass

    def die(**_: Any) -> None:
        raise Crash

    client = clients.dynamodb()
    client.meta.events.register("before-call.dynamodb.Query", die)
    try:
        with pytest.raises(Crash):
            store.save(finished(record), expected_version=2)
    finally:
        client.meta.events.unregister("before-call.dynamodb.Query", die)
    assert any("expiresAt" not in item for item in page_items(clients, "run-1"))
    assert fresh_get(clients) is not None
    items = all_items(clients, "run-1")
    assert {item["expiresAt"]["N"] for item in items} == {EXPIRES}
    assert all("xp" not in item for item in items)


def test_due_runs_come_from_the_sparse_wake_index(store: DynamoDBRunStore) -> None:
    memory = InMemoryRunStore()
    for i, wake in enumerate([T0 + 50, T0 + 10, None, T0 + 30, T0 + 999, T0 + 20]):
        record = new_record(f"run-{i}", wake_at=wake)
        store.try_insert(record)
        memory.try_insert(record)
    for before, limit in [(T0 + 30, 100), (T0 + 1000, 2), (T0, 10), (T0 + 1000, 100)]:
        assert store.due_runs(before, limit) == memory.due_runs(before, limit)
    assert store.due_runs(T0 + 30) == ["run-1", "run-5", "run-3"]


def test_a_run_parked_again_is_due_at_its_new_wake_time(store: DynamoDBRunStore) -> None:
    record = store.try_insert(new_record(wake_at=T0 + 10))
    assert store.due_runs(T0 + 10) == ["run-1"]
    later = store.save(record.model_copy(update={"wake_at": T0 + 500}), expected_version=1)
    assert store.due_runs(T0 + 10) == [], "the header's wake time decides, not the index"
    assert store.due_runs(T0 + 500) == ["run-1"]
    store.save(later.model_copy(update={"wake_at": None}), expected_version=2)
    assert store.due_runs(T0 + 10**9) == []


class _MovingClock:
    def __init__(self, now: int) -> None:
        self.now = now

    def now_ms(self) -> int:
        return self.now


def _wake_bucket(clients: AwsClients, run_id: str) -> int:
    item = clients.dynamodb().get_item(
        TableName=TABLE, Key={"pk": {"S": run_id}, "sk": {"S": "#run"}}, ConsistentRead=True
    )["Item"]
    return int(item[tables.WAKE_BUCKET]["N"])


def test_a_run_of_short_sleeps_keeps_its_wake_entry_and_is_due_by_each_wake(
    clients: AwsClients,
) -> None:
    minute = 60_000
    clock = _MovingClock(T0)
    store = DynamoDBRunStore(TABLE, client_factory=clients.dynamodb, clock=clock)
    record = store.try_insert(new_record(wake_at=T0 + minute))
    first = _wake_bucket(clients, "run-1")
    for n in range(1, 40):  # one-minute sleeps across two bucket boundaries
        clock.now = T0 + n * minute
        wake = clock.now + minute
        record = store.save(
            record.model_copy(update={"wake_at": wake}), expected_version=record.version
        )
        assert store.due_runs(wake - 1) == []
        assert store.due_runs(wake) == ["run-1"]
    assert _wake_bucket(clients, "run-1") == first, "short sleeps write no index entry"
    # A sleep longer than a bucket moves the entry to its wake time's bucket.
    wake = clock.now + 60 * minute
    store.save(record.model_copy(update={"wake_at": wake}), expected_version=record.version)
    assert _wake_bucket(clients, "run-1") == wake - wake % tables.WAKE_BUCKET_MS
    assert store.due_runs(wake - 1) == []
    assert store.due_runs(wake) == ["run-1"]


def test_runs_in_flight_never_crowd_out_a_due_run(store: DynamoDBRunStore) -> None:
    """Runs taken by a driver keep the wake entry they had; their headers say they are not
    due (their wake time is their lease's end), however many of them come first."""
    hour = 3_600_000
    for i in range(30):
        record = store.try_insert(new_record(f"flight-{i:02}", wake_at=T0))
        leased = record.model_copy(
            update={
                "lease": Lease(owner="driver", expires_at=T0 + 2 * hour),
                "wake_at": T0 + 2 * hour,
            }
        )
        store.save(leased, expected_version=1)
    store.try_insert(new_record("lost", wake_at=T0 + hour))
    assert store.due_runs(T0 + hour, limit=3) == ["lost"]
    # Once their leases have ended they are due too: the sweeper takes them, a page at a time.
    assert len(store.due_runs(T0 + 2 * hour, limit=3)) == 3


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


def test_listed_records_carry_header_fields(clients: AwsClients) -> None:
    payloads = DictStore()
    store = DynamoDBRunStore(TABLE, client_factory=clients.dynamodb, payload_store=payloads)
    store.try_insert(rich_record())
    store.try_insert(new_record("run-2", started_at=T0 + 1, input={"blob": "b" * 50_000}))
    page = store.list_runs(RunQuery())
    assert [r.id for r in page.runs] == ["run-2", "run-1"]
    big, listed = page.runs
    assert (listed.workflow_id, listed.status, listed.tags) == (
        "orders.fulfil",
        "running",
        ["a", "b"],
    )
    assert listed.input == {"order": 42}
    assert listed.journal.step_results == {}
    assert big.input == {"blob": "b" * 50_000}


@pytest.mark.parametrize("cursor", ["not base64!", "W10", "bnVsbA"])
def test_a_bad_cursor_is_refused(store: DynamoDBRunStore, cursor: str) -> None:
    with pytest.raises(ValidationError, match="cursor"):
        store.list_runs(RunQuery(cursor=cursor))


def test_every_collection_changed_and_saved_reads_back(
    store: DynamoDBRunStore, clients: AwsClients
) -> None:
    store.try_insert(rich_record())
    loaded = store.get("run-1")
    assert loaded is not None
    changed = loaded.model_copy(deep=True)
    changed.streams["log"].append(StreamChunk(stream_id="log", seq=3, chunk="line 3"))
    changed.streams["new"] = [StreamChunk(stream_id="new", seq=0, chunk="first")]
    del changed.streams["empty"]
    changed.inbox.pop(0)
    changed.seen_injection_ids.append("evt_1")
    changed.children.append(ChildLink(run_id="run-1/invoke:d:1", waitpoint_id="invoke:d:1"))
    changed.journal.waitpoints_resolved.clear()
    saved = store.save(changed, expected_version=1)
    again = fresh_get(clients)
    assert again == saved
    assert again is not None
    assert list(again.streams) == ["log", "new"]
    assert again.seen_injection_ids == ["evt_1", "evt_2", "evt_1"]
    assert store.get("run-1") == saved
