"""The DynamoDB run store carries each run's counted usage on its next save: the stored
usage plus what was counted since, given back for the next save when a save loses a race."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from run_store_support import TABLE, FixedClock, new_record

from relayflow.adapters.aws import tables
from relayflow.adapters.aws.billing import table_specs
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
        TABLE, client_factory=clients.dynamodb, clock=FixedClock(), usage=clients.usage
    )


def test_each_save_carries_the_work_of_the_one_before(clients: AwsClients) -> None:
    store, meter = _store(clients), clients.usage
    with meter.working_on("run-1"):
        inserted = store.try_insert(new_record("run-1"))
        saved = store.save(inserted.model_copy(update={"tags": ["a"]}), expected_version=1)

    # The insert's own request rides on the save; the save's own waits for the next one.
    assert saved.usage is not None
    assert saved.usage.dynamodb_requests == 1
    assert saved.usage.dynamodb_write_units > 1  # the header and its index entries
    assert meter.pending("run-1").dynamodb_requests == 1
    stored = _store(clients).get("run-1")
    assert stored is not None and stored.usage == saved.usage


def test_a_save_that_loses_a_race_gives_its_usage_back(clients: AwsClients) -> None:
    store, meter = _store(clients), clients.usage
    with meter.working_on("run-1"):
        inserted = store.try_insert(new_record("run-1"))
        elsewhere = _store(clients)
        elsewhere.save(inserted.model_copy(update={"tags": ["other"]}), expected_version=1)
        meter.add("run-1", RunUsage(worker_invocations=1))
        with pytest.raises(StaleRunError):
            store.save(inserted.model_copy(update={"tags": ["mine"]}), expected_version=1)
        current = store.get("run-1")
        assert current is not None
        saved = store.save(current.model_copy(update={"tags": ["mine"]}), expected_version=2)

    assert saved.usage is not None
    assert saved.usage.worker_invocations == 1
    # The insert, the other process's save, the lost save, the read: all before this save.
    assert saved.usage.dynamodb_requests >= 4
