"""Forced interleavings of the DynamoDB concurrency slots on atomic moto: another process's
write lands between a decision and the conditional write that carries it. The condition
fails, the operation reads again, and no run is left queued behind a free slot."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, cast

import pytest

from relayflow.adapters.aws import tables
from relayflow.adapters.aws.clients import AwsClients
from relayflow.adapters.aws.concurrency_slots import DynamoDBConcurrencySlots
from relayflow.config import Settings
from relayflow.flow.ports import SlotScope
from tests.moto_support import moto_backend, use_fake_credentials

T0 = 1_700_000_000_000
SCOPE = SlotScope("crm.sync", "acme")


class Interleaving:
    """The DynamoDB client, except that ``before`` runs just ahead of the first call of
    ``operation`` after ``arm``: the other process's write lands in between."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._armed: tuple[str, Callable[[], None]] | None = None

    def arm(self, operation: str, before: Callable[[], None]) -> None:
        self._armed = (operation, before)

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._client, name)
        if self._armed is None or self._armed[0] != name:
            return method

        def call(**kwargs: Any) -> Any:
            assert self._armed is not None
            _, before = self._armed
            self._armed = None
            before()
            return method(**kwargs)

        return call


@pytest.fixture
def stores(
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[DynamoDBConcurrencySlots, DynamoDBConcurrencySlots, Interleaving]]:
    use_fake_credentials(monkeypatch)
    with moto_backend():
        clients = AwsClients(region="eu-west-1")
        tables.create_resources(clients, Settings(table_name="runs"))
        interleaving = Interleaving(clients.dynamodb())
        ours = DynamoDBConcurrencySlots("runs", client_factory=lambda: cast(Any, interleaving))
        theirs = DynamoDBConcurrencySlots("runs", client_factory=clients.dynamodb)
        yield ours, theirs, interleaving


def _acquire(slots: DynamoDBConcurrencySlots, run_id: str) -> Any:
    return slots.acquire(SCOPE, run_id, limit=1, priority=0, now_ms=T0)


def test_a_run_queued_while_the_holder_releases_is_started_by_that_release(
    stores: tuple[DynamoDBConcurrencySlots, DynamoDBConcurrencySlots, Interleaving],
) -> None:
    """The release read an empty queue; the newcomer queues before the release writes."""
    ours, theirs, interleaving = stores
    assert _acquire(ours, "holder").held
    queued: list[Any] = []
    interleaving.arm("update_item", lambda: queued.append(_acquire(theirs, "newcomer")))
    started = ours.release(SCOPE, "holder", limit=1, now_ms=T0)
    assert not queued[0].held, "it queued behind the holder"
    assert started == ["newcomer"]
    assert [h.run_id for h in ours.holders(SCOPE)] == ["newcomer"]
    assert ours.queue(SCOPE) == []


def test_a_run_about_to_queue_takes_the_slot_freed_meanwhile(
    stores: tuple[DynamoDBConcurrencySlots, DynamoDBConcurrencySlots, Interleaving],
) -> None:
    """The newcomer found the slot taken; the holder releases before the newcomer queues."""
    ours, theirs, interleaving = stores
    assert _acquire(theirs, "holder").held
    released: list[list[str]] = []
    interleaving.arm(
        "transact_write_items",
        lambda: released.append(theirs.release(SCOPE, "holder", limit=1, now_ms=T0)),
    )
    grant = _acquire(ours, "newcomer")
    assert released == [[]]
    assert grant.held, "not queued behind a free slot"
    assert ours.queue(SCOPE) == []


def test_two_releases_racing_hand_a_slot_to_each_queued_run_once(
    stores: tuple[DynamoDBConcurrencySlots, DynamoDBConcurrencySlots, Interleaving],
) -> None:
    ours, theirs, interleaving = stores
    for run_id in ("h1", "h2", "q1", "q2"):
        ours.acquire(SCOPE, run_id, limit=2, priority=0, now_ms=T0)
    theirs_started: list[list[str]] = []
    interleaving.arm(
        "transact_write_items",
        lambda: theirs_started.append(theirs.release(SCOPE, "h2", limit=2, now_ms=T0)),
    )
    ours_started = ours.release(SCOPE, "h1", limit=2, now_ms=T0)
    assert sorted(ours_started + theirs_started[0]) == ["q1", "q2"]
    assert sorted(h.run_id for h in ours.holders(SCOPE)) == ["q1", "q2"]


WORKFLOW = SlotScope("crm.sync")


def _queue_under(slots: DynamoDBConcurrencySlots, run_id: str, key: str) -> Any:
    return slots.acquire(WORKFLOW, run_id, limit=2, priority=0, now_ms=T0, rotation_key=key)


def test_two_releases_racing_in_rotation_give_each_key_its_turn_once(
    stores: tuple[DynamoDBConcurrencySlots, DynamoDBConcurrencySlots, Interleaving],
) -> None:
    """Theirs hands globex its turn between our read and our write: ours reads again and
    serves acme, the next key, rather than globex a second time."""
    ours, theirs, interleaving = stores
    for run_id, key in [("h1", "acme"), ("h2", "acme"), ("a1", "acme"), ("a2", "acme")]:
        _queue_under(ours, run_id, key)
    _queue_under(ours, "g1", "globex")
    theirs_started: list[list[str]] = []
    interleaving.arm(
        "transact_write_items",
        lambda: theirs_started.append(theirs.release(WORKFLOW, "h2", limit=2, now_ms=T0)),
    )
    ours_started = ours.release(WORKFLOW, "h1", limit=2, now_ms=T0)
    assert (theirs_started, ours_started) == ([["g1"]], ["a1"])
    assert sorted(h.run_id for h in ours.holders(WORKFLOW)) == ["a1", "g1"]
    assert [q.run_id for q in ours.queue(WORKFLOW)] == ["a2"]


def test_a_key_queueing_while_a_release_decides_takes_its_turn(
    stores: tuple[DynamoDBConcurrencySlots, DynamoDBConcurrencySlots, Interleaving],
) -> None:
    """The release read acme's queue only; initech queues before it writes. The write is
    refused (the queue changed), and the release decides again with initech in the turn."""
    ours, theirs, interleaving = stores
    for run_id, key in [("h1", "acme"), ("h2", "acme"), ("a1", "acme"), ("a2", "acme")]:
        _queue_under(ours, run_id, key)
    assert ours.release(WORKFLOW, "h1", limit=2, now_ms=T0) == ["a1"]
    interleaving.arm("transact_write_items", lambda: _queue_under(theirs, "i1", "initech"))
    assert ours.release(WORKFLOW, "h2", limit=2, now_ms=T0) == ["i1"]
    assert [q.run_id for q in ours.queue(WORKFLOW)] == ["a2"]
