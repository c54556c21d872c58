"""Operating concurrency keys on every driver (in memory, and on atomic moto with the DynamoDB
slots): a queued run's view says why it waits, an operator lists a key's holders and queue,
and releasing the slot of a run that ended without giving it back starts the next queued run
at once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from relayflow import workflow
from relayflow.concurrency_admin import NotConcurrencyLimitedError, RunStillActiveError
from relayflow.errors import RetryableError, ValidationError
from relayflow.flow import Concurrency
from relayflow.testing import DriverHarness

pytestmark = pytest.mark.usefixtures("clean_registry")


MakeEnv = Callable[..., DriverHarness]


def _env(make_env: MakeEnv, limit: int = 1) -> DriverHarness:
    @workflow(id="crm.sync", concurrency=Concurrency(limit=limit, key="customer"))
    async def sync(data: Any, ctx: Any) -> Any:
        await ctx.sleep("1m")
        return data["name"]

    @workflow(id="free")
    async def free(data: Any, ctx: Any) -> Any:
        return data

    return make_env(workflows=[sync, free])


def _acme(name: str) -> dict[str, str]:
    return {"customer": "acme", "name": name}


def test_a_queued_run_says_why_it_waits_in_its_detail_and_timeline(make_env: MakeEnv) -> None:
    env = _env(make_env, limit=2)
    first, second = (env.trigger("crm.sync", _acme(n)) for n in ("first", "second"))
    third = env.trigger("crm.sync", _acme("third"))

    line = "queued (concurrency key acme: 2 of 2 in use)"
    assert env.get_run(third.id).status_detail == line
    assert env.admin.timeline(third.id).status_detail == line
    assert env.get_run(first.id).status_detail is None, "a holder is not held back"
    env.run_until_idle()
    assert env.get_run(third.id).status == "completed"
    assert env.get_run(third.id).status_detail is None
    assert env.get_run(second.id).status == "completed"


def test_an_operator_lists_a_keys_holders_and_queue_in_order(make_env: MakeEnv) -> None:
    env = _env(make_env, limit=1)
    runs = [env.trigger("crm.sync", _acme(f"r{n}")) for n in range(3)]

    state = env.admin.concurrency.key_state("crm.sync", "acme")

    assert (state.key, state.concurrency.limit, state.in_use) == ("acme", 1, 1)
    assert [holder.run_id for holder in state.holders] == [runs[0].id]
    assert [queued.run_id for queued in state.queue] == [runs[1].id, runs[2].id]
    assert env.admin.concurrency.key_state("crm.sync", "globex").holders == []


def test_releasing_a_stuck_slot_starts_the_next_queued_run(
    make_env: MakeEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = _env(make_env, limit=1)
    stuck = env.trigger("crm.sync", _acme("stuck"))
    waiting = env.trigger("crm.sync", _acme("waiting"))
    slots = env.engine.slots  # type: ignore[attr-defined]
    real_release = slots.release

    def lost(*args: Any, **kwargs: Any) -> list[str]:
        raise ConnectionError("the release never reached the table")

    monkeypatch.setattr(slots, "release", lost)
    env.run_until_idle()
    monkeypatch.setattr(slots, "release", real_release)
    assert env.get_run(stuck.id).status == "completed"
    assert env.get_run(waiting.id).status == "queued", "the slot is stuck with an ended run"
    env.advance("1h")
    env.run_until_idle()
    assert env.get_run(waiting.id).status == "queued", "nothing frees it by itself"

    released = env.admin.concurrency.release("crm.sync", stuck.id)

    assert (released.key, released.released, released.started) == ("acme", True, [waiting.id])
    # It holds the slot and is handed off: its drive stores it running with its first save.
    state = env.admin.concurrency.key_state("crm.sync", "acme")
    assert [holder.run_id for holder in state.holders] == [waiting.id] and state.queue == []
    assert (
        env.get_run(waiting.id).status_detail
        == "queued (concurrency key acme: got a slot, starting)"
    )
    env.run_until_idle()
    assert env.get_run(waiting.id).status == "completed"
    again = env.admin.concurrency.release("crm.sync", stuck.id, key="acme")
    assert (again.released, again.started) == (False, [])


def test_a_release_is_refused_for_a_run_that_has_not_ended(make_env: MakeEnv) -> None:
    env = _env(make_env, limit=1)
    holder = env.trigger("crm.sync", _acme("holder"))
    queued = env.trigger("crm.sync", _acme("queued"))

    for active in (holder, queued):
        with pytest.raises(RunStillActiveError, match="cancel it instead"):
            env.admin.concurrency.release("crm.sync", active.id)
    state = env.admin.concurrency.key_state("crm.sync", "acme")
    assert ([h.run_id for h in state.holders], [q.run_id for q in state.queue]) == (
        [holder.id],
        [queued.id],
    )


def test_bad_release_and_listing_requests_get_clear_errors(make_env: MakeEnv) -> None:
    env = _env(make_env, limit=1)
    other = env.trigger("free", {})
    with pytest.raises(NotConcurrencyLimitedError, match="declares no concurrency limit"):
        env.admin.concurrency.key_state("free")
    with pytest.raises(ValidationError, match="say which key"):
        env.admin.concurrency.key_state("crm.sync")
    with pytest.raises(ValidationError, match="is a run of 'free'"):
        env.admin.concurrency.release("crm.sync", other.id)
    with pytest.raises(ValidationError, match="say which key"):
        env.admin.concurrency.release("crm.sync", "run_unknown")


def test_a_run_whose_hand_off_failed_is_left_for_the_sweeper(
    make_env: MakeEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A release hands the run it gives the slot to off still stored queued; when the
    hand-off fails, the start is saved instead, so that the run is due now for the sweeper
    rather than for its queue check, a minute or more away."""
    env = _env(make_env, limit=1)
    holder = env.trigger("crm.sync", _acme("holder"))
    waiting = env.trigger("crm.sync", _acme("waiting"))

    def unreachable(run_id: str, at: int) -> None:
        raise RetryableError("the drive queue is unreachable")

    monkeypatch.setattr(env.engine, "_handoff", unreachable)
    env.cancel(holder.id)
    monkeypatch.undo()

    assert env.get_run(waiting.id).status == "running"
    assert waiting.id in env.engine.sweep()
    assert env.get_run(waiting.id).status == "waiting", "driven to its sleep"
