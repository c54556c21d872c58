"""The PendingDeliveries port contract: one write-once item per (run, injection id), read back
in full, removed once taken. One factory per store; adding a backend is one entry."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from relayflow.adapters.aws import tables
from relayflow.adapters.aws.clients import AwsClients
from relayflow.adapters.aws.pending import DynamoDBPendingDeliveries
from relayflow.adapters.memory.pending import InMemoryPendingDeliveries
from relayflow.config import Settings
from relayflow.core.record import InboxItem
from relayflow.deliveries import DAY_MS
from relayflow.ports import PendingDeliveries
from tests.moto_support import moto_backend, use_fake_credentials

T0 = 1_700_000_000_000


def dynamodb_pending() -> PendingDeliveries:
    clients = AwsClients(region="eu-west-1")
    tables.create_resources(clients, Settings(table_name="runs"))
    return DynamoDBPendingDeliveries("runs", client_factory=clients.dynamodb, keep_ms=DAY_MS)


FACTORIES: dict[str, Callable[[], PendingDeliveries]] = {
    "memory": InMemoryPendingDeliveries,
    "dynamodb-moto": dynamodb_pending,
}
ON_MOTO = {"dynamodb-moto"}


@pytest.fixture(params=sorted(FACTORIES))
def store(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[PendingDeliveries]:
    if request.param not in ON_MOTO:
        yield FACTORIES[request.param]()
        return
    use_fake_credentials(monkeypatch)
    with moto_backend():
        yield FACTORIES[request.param]()


def item(item_id: str, payload: object = None, at: int = T0) -> InboxItem:
    return InboxItem(
        id=item_id,
        kind="EVENT",
        key="item",
        payload=payload,
        metadata={"source": "test"},
        received_at=at,
    )


def test_an_item_is_stored_once_and_read_back_whole(store: PendingDeliveries) -> None:
    first = item("e1", {"n": 1, "nested": [1, "two"]})
    assert store.post("r1", first)
    assert not store.post("r1", item("e1", "other content"))
    assert store.pending("r1") == [first]


def test_runs_do_not_see_each_others_items(store: PendingDeliveries) -> None:
    assert store.post("r1", item("e1"))
    assert store.post("r2", item("e1"))
    assert [i.id for i in store.pending("r1")] == ["e1"]
    assert store.pending("r3") == []


def test_removed_items_are_gone_and_unknown_ids_are_ignored(store: PendingDeliveries) -> None:
    for n in range(30):
        assert store.post("r1", item(f"e{n:02d}", n))
    store.remove("r1", [f"e{n:02d}" for n in range(27)] + ["never-stored"])
    assert sorted(i.id for i in store.pending("r1")) == ["e27", "e28", "e29"]
    store.remove("r1", ["e27", "e28", "e29"])
    assert store.pending("r1") == []
    assert store.post("r1", item("e00")), "a removed id can be stored again"
