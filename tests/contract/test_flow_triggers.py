"""Trigger options and concurrency strategies, enforced on runs by every driver (in memory,
and on atomic moto with the DynamoDB stores), on the virtual clock: priority and
``concurrency_key``, ``cancel-newest`` and ``cancel-in-progress``, ``delay``, ``ttl``,
debounce (trailing and leading), child runs, and the queue check that repairs a slot whose
release answer was lost."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from relayflow import workflow
from relayflow.adapters.aws.errors import AwsServiceError
from relayflow.core.record import RunRecord
from relayflow.events import build_manifest, trigger_on
from relayflow.flow import Concurrency, Debounce, TriggerOptions
from relayflow.flow.admission import stored_scope
from relayflow.flow.ports import SlotScope
from relayflow.testing import DriverHarness

pytestmark = pytest.mark.usefixtures("clean_registry")


MakeEnv = Callable[..., DriverHarness]
Log = list[tuple[str, int]]


def _limited(
    make_env: MakeEnv, *, limit: int = 1, strategy: str = "queue"
) -> tuple[DriverHarness, Log]:
    """``jobs.run`` limited per ``team``: each run notes its name when it starts, then sleeps
    a minute holding its slot."""
    log: Log = []
    holder: list[DriverHarness] = []

    def note(name: str) -> str:
        log.append((name, holder[0].now()))
        return name

    @workflow(id="jobs.run", concurrency=Concurrency(limit=limit, key="team", strategy=strategy))
    async def job(data: Any, ctx: Any) -> Any:
        await ctx.step("begin", note, data["name"])
        await ctx.sleep("1m")
        return data["name"]

    env = make_env(workflows=[job])
    holder.append(env)
    return env, log


def _job(env: DriverHarness, name: str, team: str = "acme", **options: Any) -> Any:
    flow = TriggerOptions(**options) if options else None
    return env.trigger("jobs.run", {"team": team, "name": name}, options=flow)


# ---- priority and concurrency key ------------------------------------------------------------


def test_queued_runs_start_by_priority_then_arrival(make_env: MakeEnv) -> None:
    env, log = _limited(make_env)
    _job(env, "holder")
    for name, priority in [("low", -5), ("mid-1", 0), ("high", 10), ("mid-2", 0)]:
        assert _job(env, name, priority=priority).status == "queued"
    env.run_until_idle()
    assert [name for name, _ in log] == ["holder", "high", "mid-1", "mid-2", "low"]


def test_a_trigger_concurrency_key_replaces_the_computed_one(make_env: MakeEnv) -> None:
    env, _ = _limited(make_env)
    assert _job(env, "a", team="acme").status == "waiting"
    assert _job(env, "b", team="globex", concurrency_key="acme").status == "queued"
    assert _job(env, "c", team="acme", concurrency_key="solo").status == "waiting"


# ---- strategies --------------------------------------------------------------------------------


def test_cancel_newest_refuses_the_new_run_with_a_code(make_env: MakeEnv) -> None:
    env, log = _limited(make_env, strategy="cancel-newest")
    first = _job(env, "first")
    refused = _job(env, "refused")
    assert refused.status == "cancelled"
    assert refused.error is not None and refused.error.code == "CONCURRENCY_LIMITED"
    assert "1 of 1 in use" in refused.error.message
    env.run_until_idle()
    assert env.get_run(first.id).status == "completed"
    assert [name for name, _ in log] == ["first"]
    assert _job(env, "later").status == "waiting", "the slot is free again"


def test_cancel_in_progress_replaces_the_oldest_holder(make_env: MakeEnv) -> None:
    env, log = _limited(make_env, strategy="cancel-in-progress")
    old = _job(env, "old")
    new = _job(env, "new")
    replaced = env.get_run(old.id)
    assert replaced.status == "cancelled"
    assert replaced.error is not None and replaced.error.code == "CONCURRENCY_REPLACED"
    assert new.id in replaced.error.message
    env.run_until_idle()
    assert env.get_run(new.id).status == "completed"
    assert [name for name, _ in log] == ["old", "new"]


# ---- delay and ttl -------------------------------------------------------------------------------


def test_a_delayed_run_starts_at_its_time(make_env: MakeEnv) -> None:
    env, log = _limited(make_env, limit=5)
    start = env.now()
    run = _job(env, "later", delay="10m")
    assert run.status == "delayed"
    env.advance("9m")
    assert env.get_run(run.id).status == "delayed"
    env.run_until_idle()
    assert env.get_run(run.id).status == "completed"
    assert log == [("later", start + 600_000)]


def test_a_delayed_run_can_be_cancelled(make_env: MakeEnv) -> None:
    env, log = _limited(make_env, limit=5)
    run = _job(env, "never", delay="10m")
    assert env.cancel(run.id).status == "cancelled"
    env.run_until_idle()
    assert log == []


def test_a_delayed_run_of_a_full_key_queues_when_its_time_comes(make_env: MakeEnv) -> None:
    env, log = _limited(make_env)
    _job(env, "holder")
    run = _job(env, "delayed", delay="30s")
    env.advance("30s")
    assert env.get_run(run.id).status == "queued"
    env.run_until_idle()
    assert [name for name, _ in log] == ["holder", "delayed"]


def test_a_queued_run_past_its_ttl_expires_and_leaves_the_queue(make_env: MakeEnv) -> None:
    env, log = _limited(make_env)
    _job(env, "holder")
    expiring = _job(env, "expiring", ttl="30s")
    waiting = _job(env, "waiting")
    env.run_until_idle()
    ended = env.get_run(expiring.id)
    assert ended.status == "cancelled"
    assert ended.error is not None and ended.error.code == "TTL_EXPIRED"
    assert env.get_run(waiting.id).status == "completed"
    assert [name for name, _ in log] == ["holder", "waiting"]


def test_a_delayed_run_whose_ttl_is_shorter_never_starts(make_env: MakeEnv) -> None:
    env, log = _limited(make_env, limit=5)
    run = _job(env, "late", delay="10m", ttl="5m")
    env.run_until_idle()
    ended = env.get_run(run.id)
    assert ended.error is not None and ended.error.code == "TTL_EXPIRED"
    assert log == []


def test_a_run_that_starts_within_its_ttl_is_not_expired_later(make_env: MakeEnv) -> None:
    env, _ = _limited(make_env, limit=5)
    run = _job(env, "quick", ttl="30s")
    env.run_until_idle()
    assert env.get_run(run.id).status == "completed", "the ttl only bounds the start"


# ---- debounce ----------------------------------------------------------------------------------


def _digest(make_env: MakeEnv, mode: str = "trailing", max_wait: str | None = None) -> Any:
    sent: list[tuple[Any, int]] = []
    holder: list[DriverHarness] = []

    def send(data: Any) -> Any:
        sent.append((data, holder[0].now()))
        return data

    @workflow(id="digest.send")
    async def digest(data: Any, ctx: Any) -> Any:
        return await ctx.step("send", send, data)

    env = make_env(workflows=[digest])
    holder.append(env)
    debounce = Debounce(key="user", delay="30s", mode=mode, max_wait=max_wait)

    def trigger(n: int, **extra: Any) -> Any:
        options = TriggerOptions(debounce=debounce)
        return env.trigger("digest.send", {"user": "u1", "n": n}, options=options, **extra)

    return env, sent, trigger


def test_a_trailing_burst_starts_one_run_with_the_last_input(make_env: MakeEnv) -> None:
    env, sent, trigger = _digest(make_env)
    start = env.now()
    runs = []
    for n in range(50):
        runs.append(trigger(n))
        env.advance("10s")
    assert {run.id for run in runs} == {runs[0].id}, "every trigger answers the burst's run"
    assert runs[0].status == "delayed"
    env.run_until_idle()
    assert sent == [({"user": "u1", "n": 49}, start + 49 * 10_000 + 30_000)]
    assert env.get_run(runs[0].id).status == "completed"


def test_a_burst_closed_whose_run_did_not_start_still_starts_with_the_last_input(
    make_env: MakeEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The burst's end was written but its answer was lost (storage unavailable past its
    retries, or the process died): the run, still delayed, starts on a later drive with the
    burst's last input, not the first."""
    env, sent, trigger = _digest(make_env)
    runs = [trigger(n) for n in range(3)]
    debouncer = env.driver.engine.debouncer
    assert debouncer is not None
    close = debouncer.close
    lost: list[str] = []

    def close_answer_lost(scope: SlotScope, run_id: str, **kwargs: Any) -> int | None:
        later = close(scope, run_id, **kwargs)
        if not lost:
            lost.append(run_id)
            raise AwsServiceError("answer lost", aws_code="InternalServerError", transient=True)
        return later

    monkeypatch.setattr(debouncer, "close", close_answer_lost)
    with pytest.raises(AwsServiceError):
        env.run_until_idle()  # the invocation failed; the run is due again
    assert lost == [runs[0].id]
    assert env.get_run(runs[0].id).status == "delayed"
    env.advance("1m")
    env.driver.engine.sweep()
    env.run_until_idle()
    assert env.get_run(runs[0].id).status == "completed"
    assert [data["n"] for data, _ in sent] == [2]


def test_max_wait_bounds_an_endless_burst(make_env: MakeEnv) -> None:
    env, sent, trigger = _digest(make_env, max_wait="1m")
    start = env.now()
    for n in range(12):
        trigger(n)
        env.advance("7s")
    env.run_until_idle()
    assert sent[0][1] == start + 60_000
    assert sent[0][0]["n"] == 8, "the input of the last trigger before the run started"


def test_a_leading_burst_starts_at_once_and_ignores_the_rest(make_env: MakeEnv) -> None:
    env, sent, trigger = _digest(make_env, mode="leading")
    first = trigger(0)
    joined = [trigger(n) for n in range(1, 5)]
    assert {run.id for run in joined} == {first.id}
    env.run_until_idle()
    assert [data["n"] for data, _ in sent] == [0]
    env.advance("31s")
    assert trigger(9).id != first.id, "a quiet delay ends the burst"


def test_an_idempotency_key_wins_over_debounce(make_env: MakeEnv) -> None:
    env, sent, trigger = _digest(make_env)
    keyed = trigger(0, idempotency_key="only-this")
    env.run_until_idle()
    newer = trigger(1)
    assert newer.id != keyed.id, "the first burst ended: a new one opened"
    again = trigger(2, idempotency_key="only-this")
    assert again.id == keyed.id, "the key answers its own run, not the open burst"
    env.run_until_idle()
    assert [data["n"] for data, _ in sent] == [0, 1]


# ---- child runs ----------------------------------------------------------------------------------


def test_recursion_under_a_singleton_limit_does_not_deadlock(make_env: MakeEnv) -> None:
    @workflow(id="tree.walk", concurrency=Concurrency(limit=1, key="root"))
    async def walk(data: Any, ctx: Any) -> Any:
        if data["depth"] == 0:
            return 0
        below = await ctx.invoke("tree.walk", {**data, "depth": data["depth"] - 1})
        return below + 1

    env = make_env(workflows=[walk])
    run = env.trigger("tree.walk", {"root": "r", "depth": 3})
    env.run_until_idle()
    assert env.get_run(run.id).output == 3


def test_a_child_of_another_limited_workflow_is_limited(make_env: MakeEnv) -> None:
    @workflow(id="leaf.job", concurrency=Concurrency(limit=1))
    async def leaf(data: Any, ctx: Any) -> Any:
        await ctx.sleep("1m")
        return data

    @workflow(id="fan.parent")
    async def parent(data: Any, ctx: Any) -> Any:
        return await ctx.invoke("leaf.job", data)

    env = make_env(workflows=[leaf, parent])
    first = env.trigger("fan.parent", 1)
    second = env.trigger("fan.parent", 2)
    children = env.admin.list_runs(workflow="leaf.job").runs
    assert sorted(child.status for child in children) == ["queued", "waiting"]
    env.run_until_idle()
    assert [env.get_run(r.id).output for r in (first, second)] == [1, 2]


# ---- repair ----------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["queue", "round-robin"])
def test_the_queue_check_starts_a_run_whose_slot_came_without_its_start(
    make_env: MakeEnv, strategy: str
) -> None:
    """A release whose answer was lost: the slot went to the queued run, which was never
    marked running. Its queue check (a minute after it queued) starts it, with the first save
    of the drive that follows (the run is never saved running without its drive's lease)."""
    env, log = _limited(make_env, strategy=strategy)
    holder = _job(env, "holder")
    stuck = _job(env, "stuck")
    runs = env.driver.engine.runs
    save = runs.save
    saved: list[RunRecord] = []

    def recorded(record: RunRecord, *, expected_version: int) -> RunRecord:
        if record.id == stuck.id:
            saved.append(record)
        return save(record, expected_version=expected_version)

    runs.save = recorded  # type: ignore[method-assign]
    slots = env.driver.engine.slots
    assert slots is not None
    declared = Concurrency(limit=1, key="team", strategy=strategy)
    scope = stored_scope(SlotScope("jobs.run", "acme"), declared)
    given = slots.release(scope, holder.id, limit=1, now_ms=env.now())
    assert given == [stuck.id]  # ...and the answer is lost: nobody starts the run
    env.advance("59s")
    env.driver.engine.sweep()
    assert env.get_run(stuck.id).status == "queued"
    env.advance("1s")
    env.driver.engine.sweep()
    env.run_until_idle()
    assert env.get_run(stuck.id).status == "completed"
    assert [name for name, _ in log] == ["holder", "stuck"]
    first_running = next(record for record in saved if record.status == "running")
    assert first_running.lease is not None, "the start is saved by the drive, not apart"


def test_a_hundred_concurrent_triggers_start_by_priority_then_arrival(make_env: MakeEnv) -> None:
    """100 triggers of one key from 100 threads at once, with ``limit=5`` and priorities
    from 0 to 3: 5 start, 95 queue; the queued ones start in the order of (highest
    priority, lowest arrival number), never more than 5 between their first step and end."""
    env, log = _limited(make_env, limit=5)
    names = [f"r{n:03d}" for n in range(100)]
    priority = {name: n % 4 for n, name in enumerate(names)}
    with ThreadPoolExecutor(max_workers=100) as pool:
        runs = list(pool.map(lambda name: _job(env, name, priority=priority[name]), names))
    assert sorted(run.status for run in runs).count("queued") == 95
    slots = env.driver.engine.slots
    assert slots is not None
    queue = slots.queue(SlotScope("jobs.run", "acme"))
    by_id = {run.id: run for run in runs}
    expected = [
        by_id[q.run_id].input["name"] for q in sorted(queue, key=lambda q: (-q.priority, q.arrival))
    ]
    env.run_until_idle()
    assert {env.get_run(run.id).status for run in runs} == {"completed"}
    begun = {name: t for name, t in log}
    # Runs given slots at the same instant may begin in either order: compare by instant.
    position = 0
    for moment in sorted({begun[name] for name in expected}):
        at_once = {name for name in expected if begun[name] == moment}
        assert at_once == set(expected[position : position + len(at_once)])
        position += len(at_once)
    ends = {by_id[run.id].input["name"]: env.get_run(run.id).completed_at for run in runs}
    moments = sorted(set(begun.values()))
    assert max(sum(1 for n in names if begun[n] <= t < ends[n]) for t in moments) == 5


def test_a_key_path_into_the_event_limits_event_triggered_runs(make_env: MakeEnv) -> None:
    """``event.data.account`` reads the triggering event, not the run's input (the filter's
    mapper gives the run only the order id)."""

    @workflow(id="ev.sync", concurrency=Concurrency(limit=1, key="event.data.account"))
    async def sync(data: Any, ctx: Any) -> Any:
        await ctx.sleep("1m")
        return data

    env = make_env(workflows=[sync])
    flt = trigger_on(
        "order.placed", target="ev.sync", input={"object": {"order": {"path": "data.order"}}}
    )
    env.driver.register_manifest(
        "production",
        build_manifest(environment="production", workflows=[sync], event_filters=[flt], built_at=0),
    )

    def send(order: str, account: str) -> str:
        data = {"order": order, "account": account}
        event = {"name": "order.placed", "data": data, "emittedAt": "2026-01-01T00:00:00Z"}
        result = env.driver.ingest_event("production", event)
        return str(result["matches"][0]["runId"])

    first, second, other = send("o1", "acme"), send("o2", "acme"), send("o3", "globex")
    statuses = [env.get_run(run_id).status for run_id in (first, second, other)]
    assert statuses == ["waiting", "queued", "waiting"]
    assert env.get_run(second).input == {"order": "o2"}
    env.run_until_idle()
    assert env.get_run(second).status == "completed"


def test_the_queue_check_queues_a_run_that_never_took_its_place(make_env: MakeEnv) -> None:
    """A crash between a queued run's insert and its admission: the run is stored queued
    but the key's queue does not know it. Its queue check puts it in line."""
    env, log = _limited(make_env)
    _job(env, "holder")
    lost = _job(env, "lost")
    slots = env.driver.engine.slots
    assert slots is not None
    scope = SlotScope("jobs.run", "acme")
    assert slots.release(scope, lost.id, limit=1, now_ms=env.now()) == []  # out of the queue
    assert slots.queue(scope) == []
    env.advance("1m")  # the holder ends; nobody is in line
    env.driver.engine.sweep()
    env.run_until_idle()
    assert env.get_run(lost.id).status == "completed"
    assert [name for name, _ in log] == ["holder", "lost"]


def test_the_queue_check_frees_a_slot_still_held_by_a_run_that_ended(
    make_env: MakeEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The holder ended but its release failed (storage unavailable past its retries, or the
    process died between the two writes): the queued run's check sees the holder ended,
    frees its slot and starts."""
    env, log = _limited(make_env)
    holder = _job(env, "holder")
    stuck = _job(env, "stuck")
    slots = env.driver.engine.slots
    assert slots is not None
    release = slots.release
    lost: list[str] = []

    def release_lost_once(scope: SlotScope, run_id: str, **kwargs: Any) -> list[str]:
        if not lost:
            lost.append(run_id)
            raise RuntimeError("storage unavailable")
        return release(scope, run_id, **kwargs)

    monkeypatch.setattr(slots, "release", release_lost_once)
    env.run_until_idle()
    assert lost == [holder.id]
    assert env.get_run(holder.id).status == "completed"
    assert env.get_run(stuck.id).status == "queued"
    env.advance("1m")
    env.driver.engine.sweep()
    env.run_until_idle()
    assert env.get_run(stuck.id).status == "completed"
    assert [name for name, _ in log] == ["holder", "stuck"]
    scope = SlotScope("jobs.run", "acme")
    assert slots.holders(scope) == [] and slots.queue(scope) == []
