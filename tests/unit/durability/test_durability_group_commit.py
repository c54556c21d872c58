"""Group commit: entries that become ready while a checkpoint write is in flight share the
next write; a branch's last step and its completion share one; grouping can be turned off."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from relayflow.adapters.memory.checkpoints import InMemoryCheckpointLog
from relayflow.core.checkpoints import expand
from relayflow.protocol import CheckpointEntry
from relayflow.sdk.registry import workflow
from relayflow.testing import WorkflowTestEnv

ITEMS = 12


class SlowLog(InMemoryCheckpointLog):
    """A log whose writes take a few milliseconds, as a database's do."""

    def __init__(self) -> None:
        super().__init__()
        self.appends = 0
        self._count = threading.Lock()

    def append(self, run_id: str, entry: CheckpointEntry) -> None:
        with self._count:
            self.appends += 1
        time.sleep(0.005)
        super().append(run_id, entry)


def item(ctx: Any, n: int, _index: int) -> Any:
    return ctx.step("double", lambda: n * 2)


@workflow(id="group.def_map")
def def_map(data: Any, ctx: Any) -> Any:
    return ctx.map(list(range(3)), item).results


async def slow_double(n: int) -> int:
    await asyncio.sleep(0.001 * (n % 4))
    return n * 2


async def async_item(ctx: Any, n: int, _index: int) -> Any:
    return await ctx.step("double", slow_double, n)


@workflow(id="group.async_map")
async def async_map(data: Any, ctx: Any) -> Any:
    done = await ctx.map(list(range(ITEMS)), async_item, max_concurrency=ITEMS)
    return done.results


@workflow(id="group.gather")
async def gathered(data: Any, ctx: Any) -> Any:
    steps = [ctx.step(f"s{n}", slow_double, n) for n in range(ITEMS)]
    return await asyncio.gather(*steps)


def _keys(entries: list[CheckpointEntry]) -> list[str | None]:
    return [e.key for e in entries]


def test_a_branch_step_and_its_completion_share_one_write(clean_registry: None) -> None:
    env = WorkflowTestEnv(workflows=[def_map])
    run = env.trigger("group.def_map", {}, run_id="r-def")
    assert run.status == "completed" and run.output == [0, 2, 4]

    log = env.checkpoints.read("r-def", 0)
    # One write per item (its step and its completion), then the map's own entry.
    assert [e.kind for e in log] == ["group", "group", "group", "step"]
    for n, group in enumerate(log[:3]):
        assert _keys(group.entries or []) == [f"m0.{n}/double", f"branch:m0.{n}"]
    assert log[3].key == "batch:m0"


@pytest.mark.parametrize("workflow_id", ["group.async_map", "group.gather"])
def test_concurrent_entries_share_writes_and_every_one_is_durable(
    clean_registry: None, workflow_id: str
) -> None:
    log = SlowLog()
    env = WorkflowTestEnv(workflows=[async_map, gathered], checkpoints=log)
    run = env.trigger(workflow_id, {}, run_id="r-async")
    assert run.status == "completed"
    assert run.output == [n * 2 for n in range(ITEMS)]

    entries = list(expand(log.read("r-async", 0)))
    steps = {e.key for e in entries if e.key and e.step and e.step.kind == "step"}
    assert len(steps) == ITEMS
    assert log.appends < len(entries)
    assert any(e.kind == "group" for e in log.read("r-async", 0))


def test_without_grouping_each_entry_takes_its_own_write(
    clean_registry: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RELAYFLOW_GROUP_CHECKPOINTS", "false")
    env = WorkflowTestEnv(workflows=[def_map])
    run = env.trigger("group.def_map", {}, run_id="r-off")
    assert run.status == "completed"

    log = env.checkpoints.read("r-off", 0)
    assert [e.kind for e in log] == ["step"] * 7
    assert _keys(log)[:2] == ["m0.0/double", "branch:m0.0"]
