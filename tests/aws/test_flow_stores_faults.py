"""The DynamoDB flow-control stores under transient failures: a throttled request surfaces as
a transient error, and repeating the operation (as every caller does) leaves the same state
whether the failed request was applied or not (its answer lost)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, cast

import pytest
from botocore.exceptions import ClientError

from relayflow.adapters.aws import tables
from relayflow.adapters.aws.clients import AwsClients
from relayflow.adapters.aws.concurrency_slots import DynamoDBConcurrencySlots
from relayflow.adapters.aws.debounces import DynamoDBDebouncer
from relayflow.adapters.aws.errors import AwsServiceError
from relayflow.adapters.aws.rate_limits import DynamoDBRateLimiter
from relayflow.config import Settings
from relayflow.flow.ports import SlotScope
from tests.moto_support import moto_backend, use_fake_credentials

T0 = 1_700_000_000_000
SCOPE = SlotScope("crm.sync", "acme")


class FlakyClient:
    """The DynamoDB client, except that the ``nth`` call of ``operation`` fails with a
    throttling error, before reaching the table or after it applied (answer lost)."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.plan: tuple[str, int, bool] | None = None
        self._seen = 0

    def fail(self, operation: str, *, nth: int = 1, applied: bool) -> None:
        self.plan, self._seen = (operation, nth, applied), 0

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._client, name)
        if self.plan is None or self.plan[0] != name:
            return method

        def call(**kwargs: Any) -> Any:
            assert self.plan is not None
            self._seen += 1
            if self._seen != self.plan[1]:
                return method(**kwargs)
            self.plan, applied = None, self.plan[2]
            if applied:
                method(**kwargs)
            raise ClientError(
                {"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, name
            )

        return call


@pytest.fixture
def flaky(monkeypatch: pytest.MonkeyPatch) -> Iterator[FlakyClient]:
    use_fake_credentials(monkeypatch)
    with moto_backend():
        clients = AwsClients(region="eu-west-1")
        tables.create_resources(clients, Settings(table_name="runs"))
        yield FlakyClient(clients.dynamodb())


def _factory(client: FlakyClient) -> Callable[[], Any]:
    return lambda: cast(Any, client)


def _transient(action: Callable[[], Any]) -> None:
    with pytest.raises(AwsServiceError) as raised:
        action()
    assert raised.value.transient


@pytest.mark.parametrize("applied", [False, True], ids=["not-applied", "answer-lost"])
def test_a_failed_acquire_repeated_holds_one_slot(flaky: FlakyClient, applied: bool) -> None:
    slots = DynamoDBConcurrencySlots("runs", client_factory=_factory(flaky))
    slots.acquire(SCOPE, "first", limit=2, priority=0, now_ms=T0)
    flaky.fail("update_item", applied=applied)
    _transient(lambda: slots.acquire(SCOPE, "r1", limit=2, priority=0, now_ms=T0))
    assert slots.acquire(SCOPE, "r1", limit=2, priority=0, now_ms=T0).held
    assert [h.run_id for h in slots.holders(SCOPE)] == ["first", "r1"]


@pytest.mark.parametrize("applied", [False, True], ids=["not-applied", "answer-lost"])
def test_a_failed_enqueue_repeated_queues_the_run_once(flaky: FlakyClient, applied: bool) -> None:
    slots = DynamoDBConcurrencySlots("runs", client_factory=_factory(flaky))
    slots.acquire(SCOPE, "holder", limit=1, priority=0, now_ms=T0)
    flaky.fail("transact_write_items", applied=applied)
    _transient(lambda: slots.acquire(SCOPE, "r1", limit=1, priority=0, now_ms=T0))
    again = slots.acquire(SCOPE, "r1", limit=1, priority=0, now_ms=T0)
    assert (again.held, again.position) == (False, 1)
    assert [q.run_id for q in slots.queue(SCOPE)] == ["r1"]
    assert slots.release(SCOPE, "holder", limit=1, now_ms=T0) == ["r1"]


@pytest.mark.parametrize("applied", [False, True], ids=["not-applied", "answer-lost"])
def test_a_failed_release_repeated_leaves_the_next_run_holding_its_slot(
    flaky: FlakyClient, applied: bool
) -> None:
    """When the answer of the release that started a queued run is lost, the repeat has
    nobody new to start: the started run is a holder, which is how a sweep finds a run still
    stored as queued that holds a slot, and starts it."""
    slots = DynamoDBConcurrencySlots("runs", client_factory=_factory(flaky))
    slots.acquire(SCOPE, "holder", limit=1, priority=0, now_ms=T0)
    slots.acquire(SCOPE, "next", limit=1, priority=0, now_ms=T0)
    flaky.fail("transact_write_items", applied=applied)
    _transient(lambda: slots.release(SCOPE, "holder", limit=1, now_ms=T0))
    repeated = slots.release(SCOPE, "holder", limit=1, now_ms=T0)
    assert repeated == ([] if applied else ["next"])
    assert [h.run_id for h in slots.holders(SCOPE)] == ["next"]
    assert slots.queue(SCOPE) == []


@pytest.mark.parametrize("applied", [False, True], ids=["not-applied", "answer-lost"])
def test_a_failed_reservation_repeated_takes_one_slot(flaky: FlakyClient, applied: bool) -> None:
    limiter = DynamoDBRateLimiter("runs", client_factory=_factory(flaky))
    settings: dict[str, Any] = {
        "limit": 1,
        "window_ms": 60_000,
        "units": 1,
        "on_limit": "queue",
        "now_ms": T0,
    }
    limiter.reserve("api", "c0", **settings)
    flaky.fail("put_item", applied=applied)
    _transient(lambda: limiter.reserve("api", "c1", **settings))
    assert limiter.reserve("api", "c1", **settings).at_ms == T0 + 60_000
    assert limiter.reserve("api", "c2", **settings).at_ms == T0 + 120_000


@pytest.mark.parametrize("applied", [False, True], ids=["not-applied", "answer-lost"])
def test_a_failed_debounce_offer_repeated_opens_one_burst(
    flaky: FlakyClient, applied: bool
) -> None:
    debouncer = DynamoDBDebouncer("runs", client_factory=_factory(flaky))
    settings: dict[str, Any] = {
        "delay_ms": 1_000,
        "mode": "trailing",
        "max_wait_ms": None,
        "now_ms": T0,
    }
    flaky.fail("put_item", applied=applied)
    _transient(lambda: debouncer.offer(SCOPE, "cand-0", {"n": 0}, **settings))
    again = debouncer.offer(SCOPE, "cand-0", {"n": 0}, **settings)
    assert (again.opened, again.run_id, again.triggers) == (True, "cand-0", 1)
    joined = debouncer.offer(SCOPE, "cand-1", {"n": 1}, **settings)
    assert (joined.opened, joined.run_id, joined.triggers) == (False, "cand-0", 2)
