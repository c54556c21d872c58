"""``round-robin`` concurrency enforced on runs by every driver (``WorkflowTestEnv``, and on
atomic moto with the DynamoDB slots), on the virtual clock: one limit over the workflow, and
free slots handed to the keys in turn, so a key with a long queue cannot starve the others."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from relayflow import workflow
from relayflow.flow import Concurrency
from relayflow.sdk.registry import reset_registry
from relayflow.testing import DriverHarness

MINUTE = 60_000


@pytest.fixture(autouse=True)
def _fresh_registry() -> Iterator[None]:
    reset_registry()
    yield
    reset_registry()


def test_queued_runs_start_one_key_at_a_time_in_rotation(
    make_env: Callable[..., DriverHarness],
) -> None:
    begun: dict[str, int] = {}
    holder: list[DriverHarness] = []

    def note(name: str) -> str:
        begun[name] = holder[0].now()
        return name

    fair = Concurrency(limit=2, key="customer", strategy="round-robin")

    @workflow(id="crm.sync", concurrency=fair)
    async def sync(data: Any, ctx: Any) -> Any:
        await ctx.step("begin", note, data["name"])
        await ctx.sleep("1m")
        return data["name"]

    env = make_env(workflows=[sync])
    holder.append(env)
    start = env.now()
    triggers = [("globex", f"globex-{n}") for n in range(8)]
    triggers += [(key, f"{key}-{n}") for key in ("acme", "initech") for n in range(2)]
    runs = [env.trigger("crm.sync", {"customer": key, "name": name}) for key, name in triggers]
    assert [run.status for run in runs].count("queued") == 10, "2 slots for the whole workflow"
    env.run_until_idle()
    assert {env.get_run(run.id).status for run in runs} == {"completed"}
    by_minute: dict[int, set[str]] = {}
    for name, at in begun.items():
        by_minute.setdefault((at - start) // MINUTE, set()).add(name)
    # globex held both slots first; then each freed slot goes to the next key in turn.
    assert by_minute[0] == {"globex-0", "globex-1"}
    assert by_minute[1] == {"initech-0", "acme-0"}
    assert by_minute[2] == {"globex-2", "initech-1"}
    assert by_minute[3] == {"acme-1", "globex-3"}
    assert [by_minute[m] for m in (4, 5)] == [{"globex-4", "globex-5"}, {"globex-6", "globex-7"}]
