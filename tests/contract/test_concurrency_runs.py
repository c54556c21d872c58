"""Concurrency per key, enforced on runs by every driver (in memory, and on atomic moto with
the DynamoDB slots), on the virtual clock: a run that finds its key's slots taken is stored
``queued`` and starts when a run of that key ends, in arrival order; other keys are not held
up."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from relayflow import workflow
from relayflow.errors import RunNotFoundError
from relayflow.flow import Concurrency, FlowKeyMissingError
from relayflow.testing import DriverHarness

pytestmark = pytest.mark.usefixtures("clean_registry")


MakeEnv = Callable[..., DriverHarness]


def _sync_env(make_env: MakeEnv, limit: int) -> tuple[DriverHarness, list[tuple[str, str, int]]]:
    """A workflow that holds its slot across a 1-minute sleep, logging when it works."""
    log: list[tuple[str, str, int]] = []
    holder: list[DriverHarness] = []

    def note(kind: str, name: str) -> str:
        log.append((kind, name, holder[0].now()))
        return name

    @workflow(id="crm.sync", concurrency=Concurrency(limit=limit, key="customer"))
    async def sync(data: Any, ctx: Any) -> Any:
        await ctx.step("begin", note, "begin", data["name"])
        await ctx.sleep("1m")
        return await ctx.step("end", note, "end", data["name"])

    env = make_env(workflows=[sync])
    holder.append(env)
    return env, log


def _most_at_once(log: list[tuple[str, str, int]], names: set[str]) -> int:
    """The most runs among ``names`` between their first step and their last, at any time."""
    spans = {
        name: (
            min(t for k, n, t in log if n == name and k == "begin"),
            max(t for k, n, t in log if n == name and k == "end"),
        )
        for name in names
    }
    moments = sorted({t for span in spans.values() for t in span})
    return max(sum(1 for a, b in spans.values() if a <= t < b) for t in moments)


def test_runs_beyond_the_limit_are_queued_and_start_in_arrival_order(make_env: MakeEnv) -> None:
    env, log = _sync_env(make_env, limit=2)
    acme = [env.trigger("crm.sync", {"customer": "acme", "name": f"a{n}"}) for n in range(5)]
    other = env.trigger("crm.sync", {"customer": "globex", "name": "g0"})
    assert [run.status for run in acme] == ["waiting", "waiting", "queued", "queued", "queued"]
    assert other.status == "waiting", "another key is not held up"
    env.run_until_idle()
    assert {env.get_run(r.id).status for r in [*acme, other]} == {"completed"}
    assert _most_at_once(log, {f"a{n}" for n in range(5)}) == 2
    # Slots go in arrival order: no run starts later than one that arrived after it (runs
    # given slots at the same instant start in either order).
    begun = {name: t for kind, name, t in log if kind == "begin"}
    times = [begun[f"a{n}"] for n in range(5)]
    assert times == sorted(times)
    assert times[2] > times[1], "the third run waited for a slot"


def test_a_queued_run_starts_as_soon_as_a_holder_ends(make_env: MakeEnv) -> None:
    env, log = _sync_env(make_env, limit=1)
    first = env.trigger("crm.sync", {"customer": "acme", "name": "first"})
    second = env.trigger("crm.sync", {"customer": "acme", "name": "second"})
    assert env.get_run(second.id).status == "queued"
    env.run_until_idle()
    ended = env.get_run(first.id).completed_at
    begun = [t for kind, name, t in log if kind == "begin" and name == "second"]
    assert begun == [ended], "no wait for a sweep"


def test_cancelling_a_queued_run_takes_it_out_of_the_queue(make_env: MakeEnv) -> None:
    env, log = _sync_env(make_env, limit=1)
    env.trigger("crm.sync", {"customer": "acme", "name": "first"})
    dropped = env.trigger("crm.sync", {"customer": "acme", "name": "dropped"})
    last = env.trigger("crm.sync", {"customer": "acme", "name": "last"})
    assert env.cancel(dropped.id).status == "cancelled"
    env.run_until_idle()
    assert env.get_run(last.id).status == "completed"
    assert "dropped" not in {name for _, name, _ in log}


def test_a_run_whose_key_is_missing_is_refused_before_it_is_stored(make_env: MakeEnv) -> None:
    env, _ = _sync_env(make_env, limit=1)
    with pytest.raises(FlowKeyMissingError, match="concurrency key 'customer'"):
        env.trigger("crm.sync", {"name": "nobody"}, run_id="run_nobody")
    with pytest.raises(RunNotFoundError):
        env.get_run("run_nobody")


def test_a_workflow_without_concurrency_is_not_limited(make_env: MakeEnv) -> None:
    @workflow(id="free")
    async def free(data: Any, ctx: Any) -> Any:
        await ctx.sleep("1m")
        return data

    env = make_env(workflows=[free])
    runs = [env.trigger("free", n) for n in range(3)]
    assert [run.status for run in runs] == ["waiting"] * 3


def test_concurrent_triggers_of_one_key_never_run_more_than_the_limit(make_env: MakeEnv) -> None:
    """30 triggers from 30 threads at once with ``limit=5``: 5 start, 25 queue, and as the
    runs end the others start, never more than 5 between their first and last step."""
    env, log = _sync_env(make_env, limit=5)
    names = [f"c{n:02d}" for n in range(30)]
    with ThreadPoolExecutor(max_workers=30) as pool:
        runs = list(
            pool.map(
                lambda name: env.trigger("crm.sync", {"customer": "acme", "name": name}), names
            )
        )
    assert sorted(run.status for run in runs).count("queued") == 25
    env.run_until_idle()
    assert {env.get_run(run.id).status for run in runs} == {"completed"}
    assert _most_at_once(log, set(names)) == 5
