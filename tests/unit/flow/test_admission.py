"""Admission under each concurrency strategy, on the in-memory slots (the contract suite
holds the DynamoDB slots to the same behaviour)."""

from __future__ import annotations

import pytest

from relayflow.adapters.memory.flow import InMemoryConcurrencySlots
from relayflow.flow import Concurrency, FlowKeyMissingError, TriggerOptions
from relayflow.flow.admission import Admission, admit, concurrency_scope, release
from relayflow.flow.errors import CONCURRENCY_LIMITED
from relayflow.flow.ports import SlotScope

T0 = 1_700_000_000_000


def _admit(slots: InMemoryConcurrencySlots, run_id: str, concurrency: Concurrency) -> Admission:
    scope = concurrency_scope("crm.sync", concurrency, {"customerId": "acme"})
    return admit(slots, scope, run_id, concurrency, priority=0, now_ms=T0)


def test_the_scope_comes_from_the_trigger_key_the_declared_key_or_the_workflow() -> None:
    keyed = Concurrency(limit=1, key="customerId")
    assert concurrency_scope("wf", keyed, {"customerId": 7}) == SlotScope("wf", "7")
    override = TriggerOptions(concurrency_key="vip")
    assert concurrency_scope("wf", keyed, {"customerId": 7}, override) == SlotScope("wf", "vip")
    assert concurrency_scope("wf", Concurrency(limit=3), {"x": 1}) == SlotScope("wf", "")
    with pytest.raises(FlowKeyMissingError, match="concurrency key 'customerId'"):
        concurrency_scope("wf", keyed, {})


def test_queue_starts_up_to_the_limit_then_queues_and_says_so() -> None:
    slots = InMemoryConcurrencySlots()
    concurrency = Concurrency(limit=2, key="customerId")
    first, second, third = (_admit(slots, r, concurrency) for r in ("r1", "r2", "r3"))
    assert [a.start for a in (first, second, third)] == [True, True, False]
    assert third.describe() == "queued (concurrency key acme: 2 of 2 in use)"
    assert release(slots, SlotScope("crm.sync", "acme"), "r1", concurrency, now_ms=T0) == ["r3"]


def test_cancel_newest_refuses_the_new_run_and_queues_nothing() -> None:
    slots = InMemoryConcurrencySlots()
    concurrency = Concurrency(limit=1, key="customerId", strategy="cancel-newest")
    assert _admit(slots, "r1", concurrency).start
    refused = _admit(slots, "r2", concurrency)
    assert (refused.start, refused.refused) == (False, CONCURRENCY_LIMITED)
    assert refused.describe() == "cancelled (concurrency key acme: 1 of 1 in use)"
    assert slots.queue(SlotScope("crm.sync", "acme")) == []
    assert _admit(slots, "r1", concurrency).start, "repeating a holder's admission"


def test_cancel_in_progress_names_the_oldest_holder_and_takes_its_slot_first() -> None:
    slots = InMemoryConcurrencySlots()
    scope = SlotScope("crm.sync", "acme")
    queueing = Concurrency(limit=1, key="customerId")
    replacing = Concurrency(limit=1, key="customerId", strategy="cancel-in-progress")
    _admit(slots, "old", queueing)
    _admit(slots, "waiting", queueing)
    newest = _admit(slots, "newest", replacing)
    assert (newest.start, newest.replaces, newest.position) == (False, "old", 1)
    assert release(slots, scope, "old", replacing, now_ms=T0) == ["newest"]


def test_round_robin_limits_the_whole_workflow_and_queues_each_run_under_its_key() -> None:
    slots = InMemoryConcurrencySlots()
    fair = Concurrency(limit=2, key="customerId", strategy="round-robin")

    def admit_for(run_id: str, customer: str) -> Admission:
        scope = concurrency_scope("crm.sync", fair, {"customerId": customer})
        return admit(slots, scope, run_id, fair, priority=0, now_ms=T0)

    assert admit_for("a1", "acme").start and admit_for("a2", "acme").start
    waiting = admit_for("g1", "globex")
    assert (waiting.start, waiting.position, waiting.in_use) == (False, 1, 2)
    assert waiting.describe() == "queued (concurrency key globex: 2 of 2 in use)"
    admit_for("a3", "acme")
    assert [(q.run_id, q.key) for q in slots.queue(SlotScope("crm.sync"))] == [
        ("g1", "globex"),
        ("a3", "acme"),
    ]
    acme = SlotScope("crm.sync", "acme")
    assert release(slots, acme, "a1", fair, now_ms=T0) == ["g1"]
    assert release(slots, acme, "a2", fair, now_ms=T0) == ["a3"]


def test_round_robin_without_a_key_is_queue() -> None:
    slots = InMemoryConcurrencySlots()
    fair = Concurrency(limit=1, strategy="round-robin")
    assert _admit(slots, "r1", fair).start
    assert _admit(slots, "r2", fair).position == 1
    assert release(slots, SlotScope("crm.sync"), "r1", fair, now_ms=T0) == ["r2"]
