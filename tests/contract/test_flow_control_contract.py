"""The flow-control ports' contract: concurrency slots, rate limiters and debounce windows,
on every store (in memory, and DynamoDB on the atomic moto shim), including races between
threads. One factory per store; adding a backend is one entry."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest

from relayflow.adapters.aws import tables
from relayflow.adapters.aws.clients import AwsClients
from relayflow.adapters.aws.concurrency_slots import DynamoDBConcurrencySlots
from relayflow.adapters.aws.debounces import DynamoDBDebouncer
from relayflow.adapters.aws.rate_limits import DynamoDBRateLimiter
from relayflow.adapters.memory.flow import (
    InMemoryConcurrencySlots,
    InMemoryDebouncer,
    InMemoryRateLimiter,
)
from relayflow.config import Settings
from relayflow.flow.ports import ConcurrencySlots, Debouncer, RateLimiter, SlotScope
from tests.moto_support import moto_backend, use_fake_credentials

T0 = 1_700_000_000_000
SCOPE = SlotScope("crm.sync", "acme")


@dataclass
class FlowStores:
    slots: ConcurrencySlots
    limiter: RateLimiter
    debouncer: Debouncer


def memory_stores() -> FlowStores:
    return FlowStores(InMemoryConcurrencySlots(), InMemoryRateLimiter(), InMemoryDebouncer())


def dynamodb_stores() -> FlowStores:
    clients = AwsClients(region="eu-west-1")
    tables.create_resources(clients, Settings(table_name="runs"))
    factory = clients.dynamodb
    return FlowStores(
        DynamoDBConcurrencySlots("runs", client_factory=factory),
        DynamoDBRateLimiter("runs", client_factory=factory),
        DynamoDBDebouncer("runs", client_factory=factory),
    )


FACTORIES: dict[str, Callable[[], FlowStores]] = {
    "memory": memory_stores,
    "dynamodb-moto": dynamodb_stores,
}
ON_MOTO = {"dynamodb-moto"}


@pytest.fixture(params=sorted(FACTORIES))
def stores(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[FlowStores]:
    if request.param not in ON_MOTO:
        yield FACTORIES[request.param]()
        return
    use_fake_credentials(monkeypatch)
    with moto_backend():
        yield FACTORIES[request.param]()


# ---- concurrency slots -------------------------------------------------------------------------


def _acquire(slots: ConcurrencySlots, run_id: str, limit: int = 2, priority: int = 0) -> Any:
    return slots.acquire(SCOPE, run_id, limit=limit, priority=priority, now_ms=T0)


def run_all_from_threads(
    slots: ConcurrencySlots, scope: SlotScope, runs: dict[str, str | None], *, limit: int
) -> None:
    """Each run (id to rotation key) acquires from its own thread, runs if it holds a slot
    (else waits until a release starts it), then releases, starting whoever the store says.
    The in-flight count and the store's holders never pass ``limit``, every run finishes,
    none is started twice, and the store ends empty."""
    lock = threading.Lock()
    started = {run_id: threading.Event() for run_id in runs}
    running = 0
    most = 0
    finished: list[str] = []
    promoted: list[str] = []

    def run(run_id: str) -> None:
        nonlocal running, most
        grant = slots.acquire(
            scope, run_id, limit=limit, priority=0, now_ms=T0, rotation_key=runs[run_id]
        )
        if not grant.held:
            assert started[run_id].wait(60), f"{run_id} was never started"
        with lock:
            running += 1
            most = max(most, running)
        assert len(slots.holders(scope)) <= limit
        with lock:
            running -= 1
            finished.append(run_id)
        for next_run in slots.release(scope, run_id, limit=limit, now_ms=T0):
            with lock:
                promoted.append(next_run)
            started[next_run].set()

    with ThreadPoolExecutor(max_workers=len(runs)) as pool:
        list(pool.map(run, runs))
    assert most <= limit
    assert sorted(finished) == sorted(runs)
    assert len(promoted) == len(set(promoted)), "no run was started twice"
    assert slots.holders(scope) == [] and slots.queue(scope) == []


def test_runs_hold_slots_up_to_the_limit_then_queue_with_their_position(
    stores: FlowStores,
) -> None:
    slots = stores.slots
    assert [_acquire(slots, r).held for r in ("r1", "r2")] == [True, True]
    third, fourth = _acquire(slots, "r3"), _acquire(slots, "r4")
    assert (third.held, third.position, third.in_use) == (False, 1, 2)
    assert (fourth.held, fourth.position) == (False, 2)
    assert [h.run_id for h in slots.holders(SCOPE)] == ["r1", "r2"]
    assert [q.run_id for q in slots.queue(SCOPE)] == ["r3", "r4"]


def test_acquiring_again_answers_the_slot_or_place_the_run_has(stores: FlowStores) -> None:
    slots = stores.slots
    _acquire(slots, "r1", limit=1)
    _acquire(slots, "r2", limit=1)
    assert _acquire(slots, "r1", limit=1).held
    again = _acquire(slots, "r2", limit=1)
    assert (again.held, again.position) == (False, 1)
    assert [q.run_id for q in slots.queue(SCOPE)] == ["r2"], "queued once"


def test_keys_and_workflows_have_their_own_slots(stores: FlowStores) -> None:
    slots = stores.slots
    assert _acquire(slots, "r1", limit=1).held
    for scope in (SlotScope("crm.sync", "globex"), SlotScope("crm.other", "acme")):
        assert slots.acquire(scope, "r2", limit=1, priority=0, now_ms=T0).held
    # '#' in ids cannot make two scopes share a partition.
    assert slots.acquire(SlotScope("a#b", "c"), "r3", limit=1, priority=0, now_ms=T0).held
    assert slots.acquire(SlotScope("a", "b#c"), "r4", limit=1, priority=0, now_ms=T0).held


def test_a_release_starts_the_queue_by_priority_then_arrival(stores: FlowStores) -> None:
    slots = stores.slots
    assert _acquire(slots, "holder", limit=1).held
    for run_id, priority in [("low", -5), ("first", 0), ("urgent", 10), ("second", 0)]:
        assert not _acquire(slots, run_id, limit=1, priority=priority).held
    assert [q.run_id for q in slots.queue(SCOPE)] == ["urgent", "first", "second", "low"]
    order = []
    leaving = "holder"
    for _ in range(4):
        (started,) = slots.release(SCOPE, leaving, limit=1, now_ms=T0 + 1)
        order.append(started)
        leaving = started
    assert order == ["urgent", "first", "second", "low"]
    assert slots.release(SCOPE, "low", limit=1, now_ms=T0 + 2) == []
    assert slots.holders(SCOPE) == [] and slots.queue(SCOPE) == []


def test_releasing_twice_or_a_stranger_changes_nothing(stores: FlowStores) -> None:
    slots = stores.slots
    _acquire(slots, "r1", limit=1)
    _acquire(slots, "r2", limit=1)
    assert slots.release(SCOPE, "r1", limit=1, now_ms=T0) == ["r2"]
    assert slots.release(SCOPE, "r1", limit=1, now_ms=T0) == []
    assert slots.release(SCOPE, "nobody", limit=1, now_ms=T0) == []
    assert [h.run_id for h in slots.holders(SCOPE)] == ["r2"]


def test_a_queued_run_leaves_the_queue_when_released(stores: FlowStores) -> None:
    slots = stores.slots
    for run_id in ("r1", "r2", "r3"):
        _acquire(slots, run_id, limit=1)
    assert slots.release(SCOPE, "r2", limit=1, now_ms=T0) == []
    assert [q.run_id for q in slots.queue(SCOPE)] == ["r3"]
    assert slots.release(SCOPE, "r1", limit=1, now_ms=T0) == ["r3"]


def test_a_raised_limit_takes_effect_at_the_next_release(stores: FlowStores) -> None:
    slots = stores.slots
    for run_id in ("r1", "r2", "r3", "r4"):
        _acquire(slots, run_id, limit=1)
    # The limit is now 3: a new run still queues behind the others...
    assert not _acquire(slots, "r5", limit=3).held
    # ...and the next release fills every free slot, in queue order.
    assert slots.release(SCOPE, "r1", limit=3, now_ms=T0) == ["r2", "r3", "r4"]
    assert [q.run_id for q in slots.queue(SCOPE)] == ["r5"]


def test_a_lowered_limit_starts_nobody_until_holders_drop_below_it(stores: FlowStores) -> None:
    slots = stores.slots
    for run_id in ("r1", "r2", "r3", "r4"):
        _acquire(slots, run_id, limit=3)
    assert slots.release(SCOPE, "r1", limit=1, now_ms=T0) == []
    assert slots.release(SCOPE, "r2", limit=1, now_ms=T0) == []
    assert slots.release(SCOPE, "r3", limit=1, now_ms=T0) == ["r4"]


def test_holders_are_listed_with_when_they_took_their_slot(stores: FlowStores) -> None:
    slots = stores.slots
    slots.acquire(SCOPE, "late", limit=2, priority=0, now_ms=T0 + 5)
    slots.acquire(SCOPE, "early", limit=2, priority=0, now_ms=T0)
    assert [(h.run_id, h.since_ms) for h in slots.holders(SCOPE)] == [
        ("early", T0),
        ("late", T0 + 5),
    ]


def test_100_concurrent_runs_with_limit_5_never_run_6_at_once_and_all_finish(
    stores: FlowStores,
) -> None:
    """Each run acquires, runs if it holds a slot (else waits until a release starts it),
    then releases, starting whoever the store says; the in-flight count never passes 5."""
    run_all_from_threads(
        stores.slots,
        SCOPE,
        {f"run-{n:03d}": None for n in range(100)},
        limit=5,
    )


def test_100_concurrent_acquires_with_limit_5_give_5_slots_and_a_queue_served_in_order(
    stores: FlowStores,
) -> None:
    slots = stores.slots
    runs = [f"run-{n:03d}" for n in range(100)]
    priority = {run_id: (n % 3) * 10 for n, run_id in enumerate(runs)}
    with ThreadPoolExecutor(max_workers=100) as pool:
        grants = list(
            pool.map(
                lambda r: slots.acquire(SCOPE, r, limit=5, priority=priority[r], now_ms=T0), runs
            )
        )
    assert sum(g.held for g in grants) == 5
    queue = slots.queue(SCOPE)
    assert len(queue) == 95
    assert all(g.position is not None and 1 <= g.position <= 95 for g in grants if not g.held)
    expected = [q.run_id for q in sorted(queue, key=lambda q: (-q.priority, q.arrival))]
    arrivals = [q.arrival for q in queue]
    assert len(set(arrivals)) == 95, "each queued run has its own arrival number"
    order: list[str] = []
    holders = [h.run_id for h in slots.holders(SCOPE)]
    while holders:
        leaving = holders.pop(0)
        started = slots.release(SCOPE, leaving, limit=5, now_ms=T0)
        assert len(slots.holders(SCOPE)) <= 5
        order.extend(started)
        holders.extend(started)
    assert order == expected


# ---- rate limits -------------------------------------------------------------------------------


def _reserve(limiter: RateLimiter, rid: str, *, now: int = T0, **options: Any) -> Any:
    settings = {"limit": 10, "window_ms": 60_000, "units": 1, "on_limit": "queue", **options}
    return limiter.reserve("partner-api", rid, now_ms=now, **settings)


def test_a_limit_of_10_a_minute_admits_10_at_once_then_one_every_6_s(stores: FlowStores) -> None:
    answers = [_reserve(stores.limiter, f"c{n}") for n in range(60)]
    assert all(a.admitted for a in answers)
    assert [a.at_ms - T0 for a in answers] == [0] * 10 + [6_000 * k for k in range(1, 51)]


def test_60_concurrent_reservations_get_distinct_slots_none_early(stores: FlowStores) -> None:
    """A burst of 10, then each caller its own slot 6 s after the previous one: nobody
    shares a slot (no herd) and nobody is early."""
    with ThreadPoolExecutor(max_workers=60) as pool:
        answers = list(pool.map(lambda n: _reserve(stores.limiter, f"c{n}"), range(60)))
    slots = sorted(a.at_ms - T0 for a in answers)
    assert slots == [0] * 10 + [6_000 * k for k in range(1, 51)]


def test_fail_reserves_nothing_and_says_when_to_retry(stores: FlowStores) -> None:
    for n in range(10):
        assert _reserve(stores.limiter, f"c{n}", on_limit="fail").admitted
    refused = _reserve(stores.limiter, "c10", on_limit="fail", now=T0 + 1_000)
    assert (refused.admitted, refused.retry_after_ms) == (False, 5_000)
    # Nothing was taken: at the time it named, the call is admitted.
    later = _reserve(stores.limiter, "c10", on_limit="fail", now=T0 + 6_000)
    assert (later.admitted, later.at_ms) == (True, T0 + 6_000)


def test_a_repeated_reservation_answers_the_same_slot(stores: FlowStores) -> None:
    for n in range(12):
        _reserve(stores.limiter, f"c{n}")
    again = _reserve(stores.limiter, "c11", now=T0 + 100)
    assert again.at_ms == T0 + 12_000
    assert _reserve(stores.limiter, "c12").at_ms == T0 + 18_000, "the repeat took nothing"


def test_units_take_their_share_of_the_window(stores: FlowStores) -> None:
    first = _reserve(stores.limiter, "big", units=10)
    second = _reserve(stores.limiter, "small", units=5)
    assert (first.at_ms, second.at_ms) == (T0, T0 + 30_000)


def test_limits_are_per_key(stores: FlowStores) -> None:
    for n in range(10):
        _reserve(stores.limiter, f"c{n}")
    other = stores.limiter.reserve(
        "other-api", "c0", limit=10, window_ms=60_000, units=1, on_limit="fail", now_ms=T0
    )
    assert (other.admitted, other.at_ms) == (True, T0)


def test_an_idle_key_refills(stores: FlowStores) -> None:
    for n in range(10):
        _reserve(stores.limiter, f"c{n}")
    later = [_reserve(stores.limiter, f"d{n}", now=T0 + 60_000) for n in range(11)]
    assert [a.at_ms - T0 for a in later] == [60_000] * 10 + [66_000]


# ---- debounce ----------------------------------------------------------------------------------


def _offer(debouncer: Debouncer, run_id: str, now: int, value: Any = None, **options: Any) -> Any:
    settings = {"delay_ms": 1_000, "mode": "trailing", "max_wait_ms": None, **options}
    return debouncer.offer(SCOPE, run_id, value, now_ms=now, **settings)


def test_a_concurrent_burst_of_50_triggers_opens_one_run(stores: FlowStores) -> None:
    with ThreadPoolExecutor(max_workers=50) as pool:
        decisions = list(
            pool.map(lambda n: _offer(stores.debouncer, f"cand-{n}", T0, {"n": n}), range(50))
        )
    opened = [d for d in decisions if d.opened]
    assert len(opened) == 1
    assert {d.run_id for d in decisions} == {opened[0].run_id}
    burst = stores.debouncer.current(SCOPE)
    assert burst is not None and burst.triggers == 50
    assert burst.start_at_ms == T0 + 1_000


def test_trailing_starts_after_the_last_trigger_with_its_input(stores: FlowStores) -> None:
    debouncer = stores.debouncer
    for n in range(50):
        decision = _offer(debouncer, f"cand-{n}", T0 + n * 900, {"n": n})
    assert (decision.run_id, decision.opened) == ("cand-0", False)
    assert decision.start_at_ms == T0 + 49 * 900 + 1_000
    assert decision.input == {"n": 49} and decision.triggers == 50


def test_max_wait_bounds_an_endless_burst(stores: FlowStores) -> None:
    debouncer = stores.debouncer
    for n in range(20):
        decision = _offer(debouncer, f"cand-{n}", T0 + n * 500, n, max_wait_ms=5_000)
    # Triggers up to T0+4500 joined; the cap holds the start at T0+5000, and the trigger at
    # T0+5000 opened a new burst.
    assert decision.run_id == "cand-10"
    assert debouncer.close(SCOPE, "cand-0", now_ms=T0 + 5_000) is None


def test_leading_starts_at_once_and_keeps_the_first_input(stores: FlowStores) -> None:
    debouncer = stores.debouncer
    first = _offer(debouncer, "cand-0", T0, "first", mode="leading")
    joined = _offer(debouncer, "cand-1", T0 + 500, "second", mode="leading")
    assert (first.opened, first.start_at_ms) == (True, T0)
    assert (joined.opened, joined.run_id, joined.input) == (False, "cand-0", "first")
    after = _offer(debouncer, "cand-2", T0 + 1_500, "third", mode="leading")
    assert (after.opened, after.run_id) == (True, "cand-2")


def test_a_trigger_after_the_quiet_time_opens_a_new_burst(stores: FlowStores) -> None:
    debouncer = stores.debouncer
    _offer(debouncer, "cand-0", T0)
    assert _offer(debouncer, "cand-1", T0 + 1_000).run_id == "cand-1"


def test_closing_waits_for_a_moved_start_then_ends_the_burst(stores: FlowStores) -> None:
    debouncer = stores.debouncer
    _offer(debouncer, "cand-0", T0)
    _offer(debouncer, "cand-1", T0 + 800)
    assert debouncer.close(SCOPE, "cand-0", now_ms=T0 + 1_000) == T0 + 1_800
    assert debouncer.close(SCOPE, "cand-0", now_ms=T0 + 1_800) is None
    assert debouncer.current(SCOPE) is None
    assert _offer(debouncer, "cand-2", T0 + 1_900).opened


def test_offering_the_bursts_own_run_again_moves_nothing(stores: FlowStores) -> None:
    debouncer = stores.debouncer
    _offer(debouncer, "cand-0", T0, "a")
    again = _offer(debouncer, "cand-0", T0 + 500, "a")
    assert (again.opened, again.start_at_ms, again.triggers) == (True, T0 + 1_000, 1)


def test_an_acquire_that_does_not_wait_takes_a_free_slot_or_nothing(stores: FlowStores) -> None:
    slots = stores.slots
    first = slots.acquire(SCOPE, "r1", limit=1, priority=0, now_ms=T0, wait=False)
    second = slots.acquire(SCOPE, "r2", limit=1, priority=0, now_ms=T0, wait=False)
    assert first.held
    assert (second.held, second.position, second.in_use) == (False, None, 1)
    assert slots.queue(SCOPE) == []
    _acquire(slots, "r3", limit=1)
    assert slots.acquire(SCOPE, "r3", limit=1, priority=0, now_ms=T0, wait=False).position == 1
