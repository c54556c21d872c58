"""The atomic moto shim: two writers stopped between their condition check and their write.

A gate stops the first writer right after moto evaluated its condition, and lets the second
writer go. Without the shim's lock the second writer passes the same condition (the write of
the first is lost); with it, the second writer waits for the first request to finish and its
condition fails. The interleaving is forced with events, so neither outcome is chance.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from typing import Any

import boto3
import pytest

import relayflow.testing.aws as atomic
from relayflow.testing.aws import mock_aws

TABLE = "gate"
WAIT_S = 10


class Gate:
    """Holds the first thread that evaluates a condition until ``release``."""

    def __init__(self) -> None:
        self.first_checked = threading.Event()
        self.second_checked = threading.Event()
        self.release = threading.Event()
        self._first: int | None = None
        self._lock = threading.Lock()

    def passed(self, outcome: bool) -> bool:
        with self._lock:
            first = self._first is None
            if first:
                self._first = threading.get_ident()
        if first:
            self.first_checked.set()
            assert self.release.wait(WAIT_S), "the first writer was never released"
        else:
            self.second_checked.set()
        return outcome


class GatedCondition:
    """A moto condition whose evaluation goes through the gate."""

    def __init__(self, op: Any, gate: Gate) -> None:
        self._op = op
        self._gate = gate

    def expr(self, item: Any) -> bool:
        return self._gate.passed(bool(self._op.expr(item)))


class ObservedLock:
    """The shim's lock, telling when a second request has to wait for it."""

    def __init__(self) -> None:
        self._inner = threading.RLock()
        self.contended = threading.Event()

    def __enter__(self) -> None:
        if not self._inner.acquire(blocking=False):
            self.contended.set()
            self._inner.acquire()

    def __exit__(self, *exc: object) -> None:
        self._inner.release()


def gate_puts(monkeypatch: pytest.MonkeyPatch, gate: Gate) -> None:
    import moto.dynamodb.models.table as table

    original = table.get_filter_expression

    def gated(*args: Any, **kwargs: Any) -> GatedCondition:
        return GatedCondition(original(*args, **kwargs), gate)

    monkeypatch.setattr(table, "get_filter_expression", gated)


def gate_updates(monkeypatch: pytest.MonkeyPatch, gate: Gate) -> None:
    import moto.dynamodb.models as models

    original = models.create_condition_expression_parser

    class GatedParser:
        def __init__(self, *args: Any) -> None:
            self._parser = original(*args)

        def parse(self) -> GatedCondition:
            return GatedCondition(self._parser.parse(), gate)

    monkeypatch.setattr(models, "create_condition_expression_parser", GatedParser)


def insert(client: Any, value: str) -> None:
    """Create the item unless it exists."""
    client.put_item(
        TableName=TABLE,
        Item={"pk": {"S": "k"}, "value": {"S": value}, "version": {"N": "2"}},
        ConditionExpression="attribute_not_exists(pk)",
    )


def bump(client: Any, value: str) -> None:
    """Move the item from version 1 to 2, if it is still at version 1."""
    client.update_item(
        TableName=TABLE,
        Key={"pk": {"S": "k"}},
        UpdateExpression="SET #v = :next, #value = :value",
        ConditionExpression="#v = :current",
        ExpressionAttributeNames={"#v": "version", "#value": "value"},
        ExpressionAttributeValues={
            ":next": {"N": "2"},
            ":current": {"N": "1"},
            ":value": {"S": value},
        },
    )


WRITES: dict[str, tuple[Callable[[pytest.MonkeyPatch, Gate], None], Callable[[Any, str], None]]] = {
    "attribute_not_exists put": (gate_puts, insert),
    "version-conditioned update": (gate_updates, bump),
}


@pytest.fixture
def client() -> Iterator[Any]:
    with mock_aws(region="eu-west-1"):
        client = boto3.client("dynamodb")
        client.create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        client.put_item(TableName=TABLE, Item={"pk": {"S": "seed"}})
        yield client


def start_writer(
    client: Any, write: Callable[[Any, str], None], value: str
) -> tuple[threading.Thread, list[str]]:
    outcome: list[str] = []

    def run() -> None:
        try:
            write(client, value)
            outcome.append("written")
        except client.exceptions.ConditionalCheckFailedException:
            outcome.append("condition failed")

    thread = threading.Thread(target=run, name=f"writer-{value}")
    thread.start()
    return thread, outcome


def prepare(client: Any, write: Callable[[Any, str], None]) -> None:
    if write is bump:
        client.put_item(TableName=TABLE, Item={"pk": {"S": "k"}, "version": {"N": "1"}})


@pytest.mark.parametrize("kind", sorted(WRITES))
def test_without_the_lock_both_writers_pass_the_same_condition(
    kind: str, client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate_with, write = WRITES[kind]
    prepare(client, write)
    monkeypatch.setitem(atomic._LOCKS, "dynamodb", nullcontext())
    gate = Gate()
    gate_with(monkeypatch, gate)

    first, first_outcome = start_writer(client, write, "first")
    assert gate.first_checked.wait(WAIT_S)
    second, second_outcome = start_writer(client, write, "second")
    assert gate.second_checked.wait(WAIT_S)
    # Nothing holds the second writer: it finishes before the first one goes on (released at
    # once, the first could write before the second and the order would be chance).
    second.join(WAIT_S)
    gate.release.set()
    first.join(WAIT_S)

    # Both were acknowledged, and the second writer's write is gone.
    assert first_outcome == ["written"]
    assert second_outcome == ["written"]
    stored = client.get_item(TableName=TABLE, Key={"pk": {"S": "k"}})["Item"]
    assert stored["value"] == {"S": "first"}


@pytest.mark.parametrize("kind", sorted(WRITES))
def test_with_the_lock_the_second_condition_fails(
    kind: str, client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate_with, write = WRITES[kind]
    prepare(client, write)
    lock = ObservedLock()
    monkeypatch.setitem(atomic._LOCKS, "dynamodb", lock)
    gate = Gate()
    gate_with(monkeypatch, gate)

    first, first_outcome = start_writer(client, write, "first")
    assert gate.first_checked.wait(WAIT_S)
    second, second_outcome = start_writer(client, write, "second")
    # The second request waits for the first one's lock before moto reads the item.
    assert lock.contended.wait(WAIT_S)
    assert not gate.second_checked.is_set()
    gate.release.set()
    first.join(WAIT_S)
    second.join(WAIT_S)

    assert first_outcome == ["written"]
    assert second_outcome == ["condition failed"]
    stored = client.get_item(TableName=TABLE, Key={"pk": {"S": "k"}})["Item"]
    assert stored["value"] == {"S": "first"}


def test_the_dev_stack_moto_server_applies_requests_atomically(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from relayflow.local.moto_server import start_moto

    lock = ObservedLock()
    monkeypatch.setitem(atomic._LOCKS, "dynamodb", lock)
    gate = Gate()
    gate_puts(monkeypatch, gate)
    local = start_moto(port=0)
    try:
        client = boto3.client("dynamodb", endpoint_url=local.endpoint_url, region_name="us-east-1")
        client.create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        first, first_outcome = start_writer(client, insert, "first")
        assert gate.first_checked.wait(WAIT_S)
        second, second_outcome = start_writer(client, insert, "second")
        assert lock.contended.wait(WAIT_S)
        gate.release.set()
        first.join(WAIT_S)
        second.join(WAIT_S)
    finally:
        local.stop()

    assert (first_outcome, second_outcome) == (["written"], ["condition failed"])


def test_the_locks_are_removed_when_the_last_mock_stops() -> None:
    from moto.dynamodb.responses import DynamoHandler

    plain = DynamoHandler.call_action
    with mock_aws():
        with mock_aws():
            assert DynamoHandler.call_action is not plain
        assert DynamoHandler.call_action is not plain
    assert DynamoHandler.call_action is plain


def test_the_public_surface_is_pinned() -> None:
    import inspect

    assert atomic.__all__ == ["AtomicMockAWS", "atomic_requests", "mock_aws"]
    parameters = inspect.signature(atomic.mock_aws).parameters
    assert list(parameters) == ["func", "config", "region", "gsi_lag", "unprocessed_items"]


def test_fake_credentials_and_the_region_are_set_only_while_mocking(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import os

    monkeypatch.setenv("AWS_PROFILE", "production")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "ap-south-1")

    @mock_aws(region="eu-west-1")
    def inside() -> tuple[str | None, str | None, str | None]:
        return (
            os.environ.get("AWS_PROFILE"),
            os.environ.get("AWS_DEFAULT_REGION"),
            os.environ.get("AWS_SESSION_TOKEN"),
        )

    assert inside() == (None, "eu-west-1", "testing")
    assert os.environ["AWS_PROFILE"] == "production"
    assert os.environ["AWS_DEFAULT_REGION"] == "ap-south-1"
