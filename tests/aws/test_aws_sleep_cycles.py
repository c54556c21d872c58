"""A step followed by a sleep on the AWS driver (moto): the save that parks the run is the
step's checkpoint, a crash after it re-runs nothing that finished, and a delivery stored while
its run slept is taken when the run next waits."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from relayflow.core.record import InboxItem
from relayflow.sdk.registry import workflow
from relayflow.testing import crash
from tests.aws.moto_driver import moto_driver
from tests.moto_support import moto_backend, use_fake_credentials


@pytest.fixture
def on_moto(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    use_fake_credentials(monkeypatch)
    with moto_backend():
        yield


class Steps:
    """Step bodies that count their calls; the first call of ``crash_in`` kills the host."""

    def __init__(self, crash_in: str | None = None) -> None:
        self.calls: Counter[str] = Counter()
        self.crash_in = crash_in

    def run(self, name: str) -> str:
        self.calls[name] += 1
        if name == self.crash_in and self.calls[name] == 1:
            crash()
        return f"{name} done"


@workflow(id="cycles.step_sleep_step")
def step_sleep_step(data: Any, ctx: Any) -> list[str]:
    steps: Steps = ctx.services.resolve("steps")
    first = ctx.step("first", steps.run, "first")
    ctx.sleep("1m")
    return [first, ctx.step("second", steps.run, "second")]


@workflow(id="cycles.sleep_then_event")
def sleep_then_event(data: Any, ctx: Any) -> Any:
    ctx.sleep("1m")
    return ctx.wait_for_event("go")


def test_the_save_that_parks_the_run_makes_the_step_before_the_sleep_durable(
    on_moto: None,
) -> None:
    steps = Steps(crash_in="second")
    env = moto_driver(workflows=[step_sleep_step], services={"steps": steps})
    run = env.trigger("cycles.step_sleep_step")
    assert run.status == "waiting"
    # The body slept right after the step: the park is its checkpoint, no log entry of its own.
    assert env.checkpoints.read(run.id, 0) == []
    stored = env.runs.get(run.id)
    assert stored is not None and stored.journal.step_results["first"].output == "first done"
    env.run_until_idle()  # the alarm wakes the run; its host dies inside the second step
    assert env.get_run(run.id).status == "running"
    recovered = env.recover(run.id)
    assert (recovered.status, recovered.output) == ("completed", ["first done", "second done"])
    assert steps.calls == Counter({"first": 1, "second": 2})


def test_a_delivery_stored_while_the_run_slept_is_taken_when_it_next_waits(
    on_moto: None,
) -> None:
    env = moto_driver(workflows=[sleep_then_event])
    run = env.trigger("cycles.sleep_then_event")
    assert run.status == "waiting"
    # A delivery whose process died after storing it and before taking it into the run.
    pending = env.engine.pending
    assert pending is not None
    stored = InboxItem(id="evt-1", kind="EVENT", key="go", payload={"n": 1}, received_at=env.now())
    assert pending.post(run.id, stored)
    env.run_until_idle()
    finished = env.get_run(run.id)
    assert (finished.status, finished.output) == ("completed", {"n": 1})
    assert pending.pending(run.id) == []
