"""The DeliveryLog port contract: one conditional claim per (scope, key), first answer kept,
holds that expire, release. One factory per log; adding a backend is one entry."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from relayflow.adapters.aws import tables
from relayflow.adapters.aws.clients import AwsClients
from relayflow.adapters.aws.deliveries import DynamoDBDeliveryLog
from relayflow.adapters.memory.deliveries import InMemoryDeliveryLog
from relayflow.config import Settings
from relayflow.ports import DeliveryLog
from tests.moto_support import moto_backend, use_fake_credentials

T0 = 1_700_000_000_000


def dynamodb_delivery_log() -> DeliveryLog:
    clients = AwsClients(region="eu-west-1")
    tables.create_resources(clients, Settings(table_name="runs"))
    return DynamoDBDeliveryLog("runs", client_factory=clients.dynamodb)


LOG_FACTORIES: dict[str, Callable[[], DeliveryLog]] = {
    "memory": InMemoryDeliveryLog,
    "dynamodb-moto": dynamodb_delivery_log,
}
ON_MOTO = {"dynamodb-moto"}


@pytest.fixture(params=sorted(LOG_FACTORIES))
def log(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[DeliveryLog]:
    if request.param not in ON_MOTO:
        yield LOG_FACTORIES[request.param]()
        return
    use_fake_credentials(monkeypatch)
    with moto_backend():
        yield LOG_FACTORIES[request.param]()


def claim(log: DeliveryLog, key: str = "k", fp: str = "f", now: int = T0, hold: int = 1_000):
    return log.claim("run:r", key, fp, now_ms=now, hold_ms=hold, expires_at=now + 86_400_000)


def test_the_first_claim_wins_and_a_second_sees_it_under_way(log: DeliveryLog) -> None:
    assert claim(log).won
    second = claim(log)
    assert not second.won and second.existing is not None
    assert second.existing.fingerprint == "f" and second.existing.answer is None


def test_the_first_answer_is_kept_and_replayed(log: DeliveryLog) -> None:
    assert claim(log).won
    log.record("run:r", "k", "f", {"status": 201, "body": "first"})
    log.record("run:r", "k", "f", {"status": 201, "body": "second"})
    again = claim(log, now=T0 + 10_000_000)
    assert not again.won and again.existing is not None
    assert again.existing.answer == {"status": 201, "body": "first"}


def test_another_fingerprint_sees_the_first_one(log: DeliveryLog) -> None:
    assert claim(log).won
    other = claim(log, fp="g", now=T0 + 5_000)
    assert not other.won and other.existing is not None and other.existing.fingerprint == "f"
    log.record("run:r", "k", "g", {"status": 200})
    found = claim(log, fp="g", now=T0 + 6_000)
    assert not found.won and found.existing is not None and found.existing.answer is None


def test_an_unanswered_claim_can_be_taken_once_its_hold_passed(log: DeliveryLog) -> None:
    assert claim(log, hold=1_000).won
    assert not claim(log, now=T0 + 999).won
    assert claim(log, now=T0 + 1_001).won


def test_a_released_claim_can_be_taken_again(log: DeliveryLog) -> None:
    assert claim(log, hold=60_000).won
    log.release("run:r", "k", "other-fingerprint")
    assert not claim(log, now=T0 + 1).won
    log.release("run:r", "k", "f")
    assert claim(log, now=T0 + 2).won


def test_keys_and_scopes_are_apart(log: DeliveryLog) -> None:
    assert claim(log, key="a").won
    assert claim(log, key="b").won
    assert log.claim("run:s", "a", "f", now_ms=T0, hold_ms=1, expires_at=None).won


def test_a_claim_costs_the_same_after_a_thousand_others() -> None:
    """Constant cost per delivery: no claim reads or rewrites what came before it."""
    log = InMemoryDeliveryLog()
    for n in range(1_000):
        assert claim(log, key=f"e{n}").won
    assert len(log) == 1_000
    assert not claim(log, key="e0").won


def lifelong_claim(log: DeliveryLog, fp: str = "f", now: int = T0, hold: int = 1_000):
    return log.claim("run:r", "k", fp, now_ms=now, hold_ms=hold, expires_at=None)


def test_a_lifelong_claim_keeps_its_first_answer(log: DeliveryLog) -> None:
    assert lifelong_claim(log).won
    log.record("run:r", "k", "f", {"status": "buffered"}, lifelong=True)
    log.record("run:r", "k", "f", {"status": "resolved"}, lifelong=True)
    again = lifelong_claim(log, now=T0 + 10_000_000)
    assert not again.won and again.existing is not None
    assert again.existing.answer == {"status": "buffered"}


def test_a_lifelong_answer_of_another_fingerprint_or_a_released_claim_changes_nothing(
    log: DeliveryLog,
) -> None:
    assert lifelong_claim(log, hold=60_000).won
    log.record("run:r", "k", "g", {"status": "buffered"}, lifelong=True)
    found = lifelong_claim(log, now=T0 + 1)
    assert not found.won and found.existing is not None and found.existing.answer is None

    log.release("run:r", "k", "f")
    log.record("run:r", "k", "f", {"status": "buffered"}, lifelong=True)
    assert lifelong_claim(log, now=T0 + 2).won  # no entry was made up from the answer


def test_a_lifelong_claim_stamped_with_an_expiry_keeps_it_when_answered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    use_fake_credentials(monkeypatch)
    with moto_backend():
        log = dynamodb_delivery_log()
        assert isinstance(log, DynamoDBDeliveryLog)
        assert lifelong_claim(log).won
        key = DynamoDBDeliveryLog._key("run:r", "k")
        db = log._db()
        # The run ended between the claim and its answer: its upkeep stamped the expiry.
        db.update_item(
            TableName="runs",
            Key=key,
            UpdateExpression="SET #ttl = :ttl",
            ExpressionAttributeNames={"#ttl": tables.TTL_ATTRIBUTE},
            ExpressionAttributeValues={":ttl": {"N": "1800000000"}},
        )
        log.record("run:r", "k", "f", {"status": "buffered"}, lifelong=True)
        item = db.get_item(TableName="runs", Key=key, ConsistentRead=True)["Item"]
        assert item[tables.TTL_ATTRIBUTE] == {"N": "1800000000"}
        assert item["answer"] == {"S": '{"status":"buffered"}'}
        assert item["heldUntil"] == {"N": "0"}
