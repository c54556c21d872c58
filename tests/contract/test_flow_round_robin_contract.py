"""The ``round-robin`` rotation of the concurrency slots' contract, on every store: one
limit over the workflow, a queue per key, and free slots handed to the keys in turn."""

from __future__ import annotations

from relayflow.flow.ports import ConcurrencySlots, SlotGrant, SlotScope
from tests.contract.test_flow_control_contract import (
    T0,
    FlowStores,
    run_all_from_threads,
    stores,
)

__all__ = ["stores"]

WORKFLOW = SlotScope("crm.sync")


def _acquire(
    slots: ConcurrencySlots, run_id: str, key: str, limit: int = 2, priority: int = 0
) -> SlotGrant:
    return slots.acquire(
        WORKFLOW, run_id, limit=limit, priority=priority, now_ms=T0, rotation_key=key
    )


def _serve(slots: ConcurrencySlots, holders: list[str], limit: int, releases: int) -> list[str]:
    """Release the oldest holder ``releases`` times; the runs started, in order."""
    started: list[str] = []
    for _ in range(releases):
        now = slots.release(WORKFLOW, holders.pop(0), limit=limit, now_ms=T0 + 1)
        started.extend(now)
        holders.extend(now)
    return started


def test_one_busy_key_cannot_starve_the_others(stores: FlowStores) -> None:
    """3 keys, limit 2: 30 runs of one key queued before 3 of each other key; the small
    keys' runs all start within the first 9 releases, one per turn of the rotation."""
    slots = stores.slots
    holders = ["busy-h0", "busy-h1"]
    for run_id in holders:
        assert _acquire(slots, run_id, "globex").held
    for n in range(30):
        assert not _acquire(slots, f"busy-{n:02d}", "globex").held
    for key in ("acme", "initech"):
        for n in range(3):
            assert not _acquire(slots, f"{key}-{n}", key).held
    first_nine = _serve(slots, holders, limit=2, releases=9)
    assert first_nine == [
        "initech-0", "acme-0", "busy-00",
        "initech-1", "acme-1", "busy-01",
        "initech-2", "acme-2", "busy-02",
    ]  # fmt: skip
    assert [q.run_id for q in slots.queue(WORKFLOW)] == [f"busy-{n:02d}" for n in range(3, 30)]
    assert len(slots.holders(WORKFLOW)) == 2


def test_the_limit_covers_every_key_and_a_key_with_nobody_queued_starts_at_once(
    stores: FlowStores,
) -> None:
    slots = stores.slots
    assert _acquire(slots, "a1", "acme").held
    assert _acquire(slots, "g1", "globex").held, "a free slot is taken at once"
    third = _acquire(slots, "i1", "initech")
    assert (third.held, third.position, third.in_use) == (False, 1, 2)
    assert [h.run_id for h in slots.holders(WORKFLOW)] == ["a1", "g1"]


def test_within_a_key_the_highest_priority_then_the_earliest_arrival_goes_first(
    stores: FlowStores,
) -> None:
    slots = stores.slots
    assert _acquire(slots, "holder", "acme", limit=1).held
    for run_id, key, priority in [
        ("a-low", "acme", -5),
        ("a-first", "acme", 0),
        ("g-first", "globex", 0),
        ("a-urgent", "acme", 10),
        ("g-urgent", "globex", 10),
    ]:
        assert not _acquire(slots, run_id, key, limit=1, priority=priority).held
    # The holder took acme's turn, so globex is next.
    expected = ["g-urgent", "a-urgent", "g-first", "a-first", "a-low"]
    assert [q.run_id for q in slots.queue(WORKFLOW)] == expected
    assert [q.key for q in slots.queue(WORKFLOW)] == ["globex", "acme", "globex", "acme", "acme"]
    positions = {
        run_id: _acquire(slots, run_id, key, limit=1).position
        for run_id, key in [("a-urgent", "acme"), ("g-first", "globex"), ("a-low", "acme")]
    }
    assert positions == {"a-urgent": 2, "g-first": 3, "a-low": 5}
    assert _serve(slots, ["holder"], limit=1, releases=5) == expected


def test_the_rotation_resumes_after_the_key_served_last(stores: FlowStores) -> None:
    """A key that queues after its turn passed waits for the others' turns."""
    slots = stores.slots
    assert _acquire(slots, "holder", "initech", limit=1).held
    for run_id, key in [("a1", "acme"), ("g1", "globex"), ("i1", "initech")]:
        _acquire(slots, run_id, key, limit=1)
    assert slots.release(WORKFLOW, "holder", limit=1, now_ms=T0) == ["a1"]
    assert slots.release(WORKFLOW, "a1", limit=1, now_ms=T0) == ["g1"]
    _acquire(slots, "a2", "acme", limit=1)
    _acquire(slots, "g2", "globex", limit=1)
    assert [q.run_id for q in slots.queue(WORKFLOW)] == ["i1", "a2", "g2"]
    assert _serve(slots, ["g1"], limit=1, releases=3) == ["i1", "a2", "g2"]


def test_a_lost_release_answer_repeated_changes_nothing_more(stores: FlowStores) -> None:
    slots = stores.slots
    for run_id, key in [("h1", "acme"), ("h2", "acme"), ("a1", "acme"), ("g1", "globex")]:
        _acquire(slots, run_id, key)
    assert slots.release(WORKFLOW, "h1", limit=2, now_ms=T0) == ["g1"]
    assert slots.release(WORKFLOW, "h1", limit=2, now_ms=T0) == [], "the repeat starts nobody"
    assert sorted(h.run_id for h in slots.holders(WORKFLOW)) == ["g1", "h2"]
    assert [q.run_id for q in slots.queue(WORKFLOW)] == ["a1"]
    _acquire(slots, "g2", "globex")
    # The rotation did not move again: acme is still next, ahead of globex's newer run.
    assert slots.release(WORKFLOW, "h2", limit=2, now_ms=T0) == ["a1"]
    assert slots.release(WORKFLOW, "g1", limit=2, now_ms=T0) == ["g2"]


def test_a_raised_limit_fills_every_free_slot_in_rotation(stores: FlowStores) -> None:
    slots = stores.slots
    assert _acquire(slots, "holder", "acme", limit=1).held
    for run_id, key in [("a1", "acme"), ("a2", "acme"), ("g1", "globex"), ("g2", "globex")]:
        _acquire(slots, run_id, key, limit=1)
    assert slots.release(WORKFLOW, "holder", limit=3, now_ms=T0) == ["g1", "a1", "g2"]
    assert [q.run_id for q in slots.queue(WORKFLOW)] == ["a2"]


def test_threads_on_three_keys_never_hold_more_than_the_limit_and_all_finish(
    stores: FlowStores,
) -> None:
    """60 runs over 3 keys acquire and release from threads; in flight never passes 3."""
    keys = ("acme", "globex", "initech")
    runs: dict[str, str | None] = {f"run-{n:02d}": keys[n % 3] for n in range(60)}
    run_all_from_threads(stores.slots, WORKFLOW, runs, limit=3)
