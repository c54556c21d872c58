"""The DynamoDB run store's pages: what a save writes and costs, large saves, compaction, and
the write order that keeps a failed or interrupted save invisible to readers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import pytest
from run_store_support import (
    T0,
    TABLE,
    FixedClock,
    Metered,
    all_items,
    fresh_get,
    grow,
    new_record,
    page_items,
    step,
    with_paged_step,
    with_step,
    with_steps,
)

from relayflow.adapters.aws import attributes, tables
from relayflow.adapters.aws.attributes import ITEM_BUDGET, item_size
from relayflow.adapters.aws.clients import AwsClients
from relayflow.adapters.aws.runstore import DynamoDBRunStore
from relayflow.config import Settings
from relayflow.core.record import Lease, RunRecord
from relayflow.errors import StaleRunError


@pytest.fixture
def clients(aws: None) -> Iterator[AwsClients]:
    built = AwsClients(region="eu-west-1")
    tables.create_resources(built, Settings(table_name=TABLE))
    yield built


@pytest.fixture
def store(clients: AwsClients) -> DynamoDBRunStore:
    return DynamoDBRunStore(TABLE, client_factory=clients.dynamodb, clock=FixedClock())


class Crash(BaseException):
    """The process died at this point (nothing after it runs)."""


class CrashAt:
    """Kills the process before the next DynamoDB call named ``operation``."""

    def __init__(self, clients: AwsClients, operation: str) -> None:
        self.client = clients.dynamodb()
        self.event = f"before-call.dynamodb.{operation}"

    def __call__(self, **_: Any) -> None:
        raise Crash

    def __enter__(self) -> None:
        self.client.meta.events.register(self.event, self)

    def __exit__(self, *exc: object) -> None:
        self.client.meta.events.unregister(self.event, self)


def test_a_checkpoint_costs_the_same_at_step_100_and_step_1000(
    store: DynamoDBRunStore, clients: AwsClients
) -> None:
    costs = []
    for run_id, steps in (("short", 100), ("long", 1000)):
        record = grow(store, store.try_insert(new_record(run_id)), steps - 11)
        # The first page written also takes along what the last growing save left inline.
        record = store.save(with_paged_step(record, steps - 11), expected_version=record.version)
        with Metered(clients) as meter:
            for i in range(steps - 10, steps):
                record = store.save(with_paged_step(record, i), expected_version=record.version)
        costs.append((dict(meter.calls), meter.units))
    assert costs[0] == costs[1]
    calls, units = costs[1]
    assert calls == {"BatchWriteItem": 10, "PutItem": 10}, "one page, then the header"
    assert units == 30, "a page of 2 write units (the step is 1.5 KB), then the header"


def test_small_entries_ride_in_the_header_until_it_fills(
    store: DynamoDBRunStore, clients: AwsClients
) -> None:
    record = store.try_insert(new_record())
    calls: list[dict[str, int]] = []
    for i in range(8):
        with Metered(clients) as meter:
            record = store.save(with_step(record, i, 200, noisy=True), expected_version=i + 1)
        calls.append(dict(meter.calls))
        header = next(item for item in all_items(clients, "run-1") if item["sk"]["S"] == "#run")
        assert item_size(header) <= 1024, "the header stays within one write unit"
        assert fresh_get(clients) == record
    assert calls[0] == {"PutItem": 1}, "the first small step rides in the header"
    flushes = [i for i, made in enumerate(calls) if made.get("BatchWriteItem")]
    assert flushes and all(calls[i] == {"PutItem": 1, "BatchWriteItem": 1} for i in flushes)
    assert len(flushes) < len(calls) / 2, "a page holds the entries of several saves"
    assert len(page_items(clients, "run-1")) == len(flushes)


def test_a_save_with_no_new_entry_is_one_conditional_put(
    store: DynamoDBRunStore, clients: AwsClients
) -> None:
    record = grow(store, store.try_insert(new_record()), 300)
    with Metered(clients) as meter:
        leased = store.save(
            record.model_copy(update={"lease": Lease(owner="me", expires_at=T0)}),
            expected_version=record.version,
        )
    assert dict(meter.calls) == {"PutItem": 1}
    assert meter.units == 1, "the header stays under 1 KB"
    assert fresh_get(clients) == leased


def test_ten_thousand_steps_in_one_save_fit_in_small_pages(
    store: DynamoDBRunStore, clients: AwsClients
) -> None:
    record = store.try_insert(new_record())
    with Metered(clients) as meter:
        record = store.save(with_steps(record, range(10_000)), expected_version=1)
    assert meter.calls["PutItem"] == 1
    pages = page_items(clients, "run-1")
    assert 2 <= len(pages) <= 25
    assert max(item_size(item) for item in pages) < ITEM_BUDGET
    assert meter.units < 1_000, "well under one write unit per step"
    loaded = fresh_get(clients)
    assert loaded == record
    assert list(loaded.journal.step_results)[:3] == ["step-0", "step-1", "step-2"]


def test_later_changes_win_over_a_large_save(store: DynamoDBRunStore, clients: AwsClients) -> None:
    record = store.save(with_steps(store.try_insert(new_record()), range(250)), expected_version=1)
    loaded = fresh_get(clients)
    assert loaded == record
    assert loaded is not None
    changed = loaded.model_copy(deep=True)
    changed.journal.step_results["step-3"] = step(3, size=7)
    del changed.journal.step_results["step-4"]
    saved = store.save(changed, expected_version=2)
    final = fresh_get(clients)
    assert final == saved
    assert final is not None and "step-4" not in final.journal.step_results


def test_a_1000_step_run_keeps_every_item_small(
    store: DynamoDBRunStore, clients: AwsClients
) -> None:
    record = grow(store, store.try_insert(new_record()), 1000)
    pages = page_items(clients, "run-1")
    assert len(pages) == 11, "one page per save of 95 steps"
    assert max(item_size(item) for item in pages) < 10_000
    assert fresh_get(clients) == record


def test_trimming_the_oldest_ids_writes_only_the_change(
    store: DynamoDBRunStore, clients: AwsClients
) -> None:
    record = store.try_insert(new_record(seen_injection_ids=[f"evt_{i}" for i in range(50)]))
    trimmed = record.model_copy(
        update={"seen_injection_ids": [*record.seen_injection_ids[10:], "evt_50"]}
    )
    with Metered(clients) as meter:
        store.save(trimmed, expected_version=1)
    assert dict(meter.calls) == {"PutItem": 1}
    assert meter.items == 1, "the header, with the change inline (a new id, ten removals)"
    loaded = fresh_get(clients)
    assert loaded is not None
    assert loaded.seen_injection_ids == trimmed.seen_injection_ids


def test_rewriting_the_same_entries_compacts_the_pages(
    store: DynamoDBRunStore, clients: AwsClients
) -> None:
    record = store.try_insert(new_record())
    for i in range(40):
        update = record.model_copy(deep=True)
        update.journal.metadata_state["state"] = {"round": i, "pad": "p" * 20_000}
        record = store.save(update, expected_version=record.version)
    pages = page_items(clients, "run-1")
    assert len(pages) < 20, "superseded pages are removed once they outweigh the live ones"
    assert fresh_get(clients) == record


def test_a_save_encodes_only_the_entries_that_changed(
    store: DynamoDBRunStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    inserted = store.try_insert(new_record())
    store.save(with_steps(inserted, range(2_000)), expected_version=1)
    loaded = store.get("run-1")
    assert loaded is not None
    encoded: list[Any] = []
    original = attributes.encode

    def counting(value: Any) -> bytes:
        encoded.append(value)
        return original(value)

    monkeypatch.setattr(attributes, "encode", counting)
    record = store.save(with_step(loaded, 2_000), expected_version=2)
    record = store.save(
        record.model_copy(update={"lease": Lease(owner="me", expires_at=T0)}),
        expected_version=3,
    )
    assert len(encoded) == 1, "the new step only"


def test_a_failed_header_write_leaves_the_run_as_it_was(
    store: DynamoDBRunStore, clients: AwsClients
) -> None:
    record = store.save(
        with_steps(store.try_insert(new_record()), range(5), 300, noisy=True), expected_version=1
    )
    stale = store.get("run-1")
    assert stale is not None
    other = DynamoDBRunStore(TABLE, client_factory=clients.dynamodb)
    other.save(with_paged_step(fresh_get(clients), 99), expected_version=2)  # type: ignore[arg-type]
    with pytest.raises(StaleRunError):
        store.save(with_steps(stale, range(5, 400)), expected_version=2)
    final = fresh_get(clients)
    assert final is not None
    assert list(final.journal.step_results) == [*record.journal.step_results, "step-99"]
    assert len(page_items(clients, "run-1")) == 2


@pytest.mark.parametrize("operation", ["PutItem", "BatchWriteItem"])
def test_a_save_interrupted_before_its_header_is_invisible(
    store: DynamoDBRunStore, clients: AwsClients, operation: str
) -> None:
    record = store.save(
        with_steps(store.try_insert(new_record()), range(5), 300, noisy=True), expected_version=1
    )
    with CrashAt(clients, operation), pytest.raises(Crash):
        store.save(with_steps(record, range(5, 300)), expected_version=2)
    left = {item["sk"]["S"] for item in page_items(clients, "run-1")}
    survivor = DynamoDBRunStore(TABLE, client_factory=clients.dynamodb)
    loaded = survivor.get("run-1")
    assert loaded == record
    assert loaded is not None
    saved = survivor.save(with_paged_step(loaded, 7), expected_version=2)
    assert fresh_get(clients) == saved
    # Once the run moved past the dead write's version, the next process to read the run
    # removes what it left with its first save.
    later = DynamoDBRunStore(TABLE, client_factory=clients.dynamodb)
    again = later.get("run-1")
    assert again is not None
    later.save(with_paged_step(again, 8), expected_version=3)
    remaining = {item["sk"]["S"] for item in page_items(clients, "run-1")}
    assert len(remaining) == 3
    assert (left - remaining) == (set() if operation == "BatchWriteItem" else left - {min(left)})


def test_a_header_write_applied_by_an_earlier_attempt_counts_as_done(
    clients: AwsClients,
) -> None:
    """A retry of a header write whose first attempt landed finds its own item."""
    real = clients.dynamodb()

    class Twice:
        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        def put_item(self, **params: Any) -> Any:
            real.put_item(**params)
            return real.put_item(**params)

    store = DynamoDBRunStore(TABLE, client_factory=lambda: cast(Any, Twice()))
    record = store.try_insert(new_record())
    saved = store.save(with_steps(record, range(3), 300, noisy=True), expected_version=1)
    assert fresh_get(clients) == saved
    assert len(page_items(clients, "run-1")) == 1


def test_a_reader_racing_a_compaction_reads_again(
    store: DynamoDBRunStore, clients: AwsClients
) -> None:
    record = store.save(with_steps(store.try_insert(new_record()), range(30)), expected_version=1)
    record = store.save(with_steps(record, range(30, 60)), expected_version=2)
    real = clients.dynamodb()
    queries: list[int] = []

    class LosesAPage:
        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        def query(self, **params: Any) -> Any:
            answer = real.query(**params)
            queries.append(len(answer["Items"]))
            if len(queries) == 1:
                answer["Items"] = answer["Items"][:-1]
            return answer

    loaded = DynamoDBRunStore(TABLE, client_factory=lambda: cast(Any, LosesAPage())).get("run-1")
    assert loaded == record
    assert len(queries) == 2


def test_the_cached_record_is_checked_with_one_small_read(
    store: DynamoDBRunStore, clients: AwsClients
) -> None:
    record = grow(store, store.try_insert(new_record()), 200)
    with Metered(clients) as meter:
        again = store.get("run-1")
    assert dict(meter.calls) == {"GetItem": 1}
    assert again == record
    with Metered(clients) as meter:
        cold = fresh_get(clients)
    assert dict(meter.calls) == {"Query": 1}
    assert cold == record


def test_insert_order_and_positions_survive_a_reload(store: DynamoDBRunStore) -> None:
    record = new_record(children=[], compensations=[])
    record = store.try_insert(with_steps(record, range(3)))
    reloaded: RunRecord | None = DynamoDBRunStore(TABLE, client_factory=store._client_factory).get(
        "run-1"
    )
    assert reloaded is not None
    assert list(reloaded.journal.step_results) == ["step-0", "step-1", "step-2"]
