"""Per-step durability of HTTP step hosts through the orchestrator's checkpoint route (the
opt-in), next to the invocation-level durability they keep without it."""

from __future__ import annotations

from typing import Any

import requests

from relayflow.sdk.registry import workflow
from relayflow.testing import WorkflowTestEnv
from tests.unit.durability.http_host_support import API_URL, HttpHostedEnv
from tests.unit.durability.test_durability_crash import Steps, batched, per_step


def _hosted(steps: Steps, *, checkpoints: bool, **options: Any) -> HttpHostedEnv:
    env = WorkflowTestEnv(workflows=[per_step, batched], services={"steps": steps})
    return HttpHostedEnv(env, checkpoints=checkpoints, services={"steps": steps}, **options)


def test_a_crash_inside_step_26_reruns_only_step_26_over_http() -> None:
    steps = Steps(crash_at=26)
    hosted = _hosted(steps, checkpoints=True)
    run = hosted.env.trigger("dur.thirty")
    assert run.status == "running"  # the host died: the engine retries after its backoff
    hosted.env.run_until_idle()
    finished = hosted.env.get_run(run.id)
    assert finished.status == "completed"
    assert finished.output == sum(n * n for n in range(1, 31))
    assert all(steps.calls[n] == 1 for n in range(1, 26))
    assert steps.calls[26] == 2
    assert all(steps.calls[n] == 1 for n in range(27, 31))
    # Two step requests (the dispatcher did not resend the one the host died in), one
    # checkpoint call per completed step and one claim per invocation, and the fence the
    # second holder wrote.
    assert len(hosted.host_adapter.requests) == 2
    assert hosted.api_adapter.stored == 32
    kinds = [e.kind for e in hosted.env.checkpoints.read(run.id, 0)]
    assert kinds == ["claim"] + ["step"] * 25 + ["fence", "claim"] + ["step"] * 5


def test_each_step_is_durable_while_the_invocation_goes_on() -> None:
    steps = Steps(crash_at=None)
    hosted = _hosted(steps, checkpoints=True)
    run = hosted.env.trigger("dur.thirty")
    record = hosted.env.runs.get(run.id)
    assert record is not None
    # The invocation's claim, then one entry per step.
    assert (record.status, record.invocation_count, record.checkpoint_seq) == ("completed", 1, 31)
    [request] = hosted.host_adapter.requests
    channel = request["checkpoint"]
    assert channel["seq"] == 1
    assert channel["url"] == f"{API_URL}/api/runs/{run.id}/checkpoints"
    assert channel["capability"].startswith("ckpt1.")


def test_without_the_opt_in_an_http_host_is_durable_per_invocation() -> None:
    steps = Steps(crash_at=26)
    hosted = _hosted(steps, checkpoints=False)
    run = hosted.env.trigger("dur.thirty")
    hosted.env.run_until_idle()
    recovered = hosted.env.get_run(run.id)
    assert recovered.status == "completed"
    assert all(steps.calls[n] == 2 for n in range(1, 27))
    assert hosted.api_adapter.calls == 0
    assert all(set(r["checkpoint"]) == {"seq"} for r in hosted.host_adapter.requests)


def test_batched_workflows_make_no_checkpoint_call() -> None:
    steps = Steps(crash_at=None)
    hosted = _hosted(steps, checkpoints=True)
    run = hosted.env.trigger("dur.thirty.batched")
    assert hosted.env.get_run(run.id).status == "completed"
    assert hosted.api_adapter.calls == 0


def test_an_unreachable_route_ends_the_invocation_and_loses_no_step() -> None:
    steps = Steps(crash_at=None)
    down = {"left": 9}

    def fault(request: requests.PreparedRequest) -> BaseException | None:
        # Slot 11 (step 10, after the claim) cannot be written for three attempts: the host
        # gives up on it.
        if b'"seq":11,' in (request.body or b"") and down["left"] > 6:  # type: ignore[operator]
            down["left"] -= 1
            return requests.ConnectionError("connection refused")
        return None

    hosted = _hosted(steps, checkpoints=True, fault=fault)
    run = hosted.env.trigger("dur.thirty")
    hosted.env.run_until_idle()
    record = hosted.env.runs.get(run.id)
    assert record is not None
    assert record.status == "completed"
    assert all(steps.calls[n] == 1 for n in range(1, 31))
    # The first invocation answered after step 10 with it in its journal; the second went
    # on from slot 12 (slot 11 stays free: the first answer claimed it).
    assert record.invocation_count == 2
    assert hosted.host_adapter.requests[1]["checkpoint"]["seq"] == 12
    assert "s10" in hosted.host_adapter.requests[1]["journal"]["stepResults"]


class Once:
    def __init__(self) -> None:
        self.calls = 0

    def charge(self) -> str:
        self.calls += 1
        return "charged"


@workflow(id="dur.http.once")
def charge_once(data: Any, ctx: Any) -> str:
    once: Once = ctx.services.resolve("once")
    result: str = ctx.step("charge", once.charge, semantics="at_most_once")
    return result


def test_an_at_most_once_mark_that_could_not_be_posted_runs_its_attempt_next_time() -> None:
    once = Once()
    failures = {"left": 3}

    def fault(request: requests.PreparedRequest) -> int | None:
        # The "started" mark (slot 1) meets a route answering 503 until the host gives up.
        if failures["left"] > 0:
            failures["left"] -= 1
            return 503
        return None

    env = WorkflowTestEnv(workflows=[charge_once], services={"once": once})
    hosted = HttpHostedEnv(env, checkpoints=True, services={"once": once}, fault=fault)
    run = env.trigger("dur.http.once")
    env.run_until_idle()
    finished = env.get_run(run.id)
    assert (finished.status, finished.output, once.calls) == ("completed", "charged", 1)
    assert [r["checkpoint"]["seq"] for r in hosted.host_adapter.requests] == [1, 2]
