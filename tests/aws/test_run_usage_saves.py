"""The DynamoDB run store stores each run's counted usage with its saves: the stored usage,
what was counted since, and what the save's own writes cost (priced before they are sent);
a save that loses a race leaves what it did for the next save to carry."""

from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest
from run_store_support import TABLE, FixedClock, new_record

from relayflow.adapters.aws import tables
from relayflow.adapters.aws.attributes import item_size
from relayflow.adapters.aws.billing import table_specs, write_units
from relayflow.adapters.aws.clients import AwsClients
from relayflow.adapters.aws.runstore import DynamoDBRunStore
from relayflow.config import Settings
from relayflow.costs import RunUsage
from relayflow.errors import StaleRunError


@pytest.fixture
def clients(aws: None) -> Iterator[AwsClients]:
    built = AwsClients(region="eu-west-1")
    tables.create_resources(built, Settings(table_name=TABLE))
    built.record_usage(table_specs([(TABLE, tables.RUNS_TABLE)]), TABLE)
    yield built


def _store(clients: AwsClients) -> DynamoDBRunStore:
    return DynamoDBRunStore(
        TABLE,
        client_factory=clients.dynamodb,
        clock=FixedClock(),
        usage=clients.usage,
        pricing=clients.recorder,
    )


def test_each_save_stores_its_own_write(clients: AwsClients) -> None:
    store, meter = _store(clients), clients.usage
    with meter.working_on("run-1"):
        inserted = store.try_insert(new_record("run-1"))
        assert meter.pending("run-1").is_empty
        saved = store.save(inserted.model_copy(update={"tags": ["a"]}), expected_version=1)

    # Each save carries its own header write: nothing waits in this process for the next.
    assert inserted.usage is not None
    assert inserted.usage.dynamodb_requests == 1
    assert inserted.usage.dynamodb_write_units > 1  # the header and its index entries
    assert saved.usage is not None
    assert saved.usage.dynamodb_requests == 2
    assert _dynamodb_work(meter.pending("run-1")) == (0, 0, 0)
    stored = _store(clients).get("run-1")
    assert stored is not None and stored.usage == saved.usage


def test_a_save_prices_the_header_it_replaces_in_a_new_process(clients: AwsClients) -> None:
    """A process that did not write the run prices its save from the version it read: a
    header that shrinks is billed at the larger, old item."""
    with clients.usage.working_on("run-1"):
        inserted = _store(clients).try_insert(new_record("run-1", tags=["x" * 100] * 30))
    assert inserted.usage is not None
    old_header = boto3.client("dynamodb", region_name="eu-west-1").get_item(
        TableName=TABLE, Key={tables.PK: {"S": "run-1"}, tables.SK: {"S": "#run"}}
    )["Item"]
    assert item_size(old_header) > 3 * 1024
    other = AwsClients(region="eu-west-1")  # another process: its own clients and meter
    other.record_usage(table_specs([(TABLE, tables.RUNS_TABLE)]), TABLE)
    with other.usage.working_on("run-1"):
        later = _store(other)
        current = later.get("run-1")
        assert current is not None
        saved = later.save(current.model_copy(update={"tags": []}), expected_version=1)

    assert saved.usage is not None
    own = saved.usage.dynamodb_write_units - inserted.usage.dynamodb_write_units
    assert own >= write_units(item_size(old_header))
    assert saved.usage.dynamodb_requests == 3  # the insert, the read, the save
    assert _dynamodb_work(other.usage.pending("run-1")) == (0, 0, 0)


def test_a_save_that_loses_a_race_gives_its_usage_back(clients: AwsClients) -> None:
    store, meter = _store(clients), clients.usage
    with meter.working_on("run-1"):
        inserted = store.try_insert(new_record("run-1"))
        elsewhere = _store(clients)
        elsewhere.save(inserted.model_copy(update={"tags": ["other"]}), expected_version=1)
        meter.add("run-1", RunUsage(worker_invocations=1))
        with pytest.raises(StaleRunError):
            store.save(inserted.model_copy(update={"tags": ["mine"]}), expected_version=1)
        # The failed conditional write is billed: it waits for the next save, with what the
        # lost save had taken.
        held = meter.pending("run-1")
        assert (held.dynamodb_requests, held.worker_invocations) == (1, 1)
        assert held.dynamodb_write_units >= 1
        current = store.get("run-1")
        assert current is not None
        saved = store.save(current.model_copy(update={"tags": ["mine"]}), expected_version=2)

    assert saved.usage is not None
    assert saved.usage.worker_invocations == 1
    # The insert, the other store's read and save, the lost save, the read, this save.
    assert saved.usage.dynamodb_requests == 6
    assert _dynamodb_work(meter.pending("run-1")) == (0, 0, 0)


def _dynamodb_work(usage: RunUsage) -> tuple[int, float, float]:
    """Requests, write and read units (the time of the work after a save waits for the next)."""
    return usage.dynamodb_requests, usage.dynamodb_write_units, usage.dynamodb_read_units
