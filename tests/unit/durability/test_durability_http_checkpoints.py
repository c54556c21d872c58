"""Per-step durability of HTTP step hosts through the orchestrator's checkpoint route (the
opt-in), next to the invocation-level durability they keep without it."""

from __future__ import annotations

from typing import Any

import pytest
import requests

from relayflow.core.settings import CoreSettings
from relayflow.dispatch.inline import InlineDispatcher
from relayflow.dispatch.signing import RequestSigner
from relayflow.ports import DispatcherResolver
from relayflow.sdk.registry import workflow
from relayflow.testing import WorkflowTestEnv
from relayflow.worker.hosts import StepHost, make_wsgi_app
from tests.unit.durability.http_host_support import (
    API_URL,
    HOST_URL,
    SECRET,
    HttpHostedEnv,
    WsgiAdapter,
)
from tests.unit.durability.test_durability_crash import Steps, batched, per_step


def _hosted(
    steps: Steps, *, checkpoints: bool, settings: CoreSettings | None = None, **options: Any
) -> HttpHostedEnv:
    env = WorkflowTestEnv(
        workflows=[per_step, batched], services={"steps": steps}, settings=settings
    )
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
    # checkpoint call per completed step but the last (it ends the body: the answer's save
    # holds it) and one claim per invocation, and the fence the second holder wrote.
    assert len(hosted.host_adapter.requests) == 2
    assert hosted.api_adapter.stored == 31
    kinds = [e.kind for e in hosted.env.checkpoints.read(run.id, 0)]
    assert kinds == ["claim"] + ["step"] * 25 + ["fence", "claim"] + ["step"] * 4


def test_each_step_is_durable_while_the_invocation_goes_on() -> None:
    steps = Steps(crash_at=None)
    hosted = _hosted(steps, checkpoints=True)
    run = hosted.env.trigger("dur.thirty")
    record = hosted.env.runs.get(run.id)
    assert record is not None
    # The invocation's claim, then one entry per step but the last (the answer's save holds it).
    assert (record.status, record.invocation_count, record.checkpoint_seq) == ("completed", 1, 30)
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


def test_a_captured_request_replayed_to_another_process_of_the_host_runs_nothing() -> None:
    steps = Steps(crash_at=None)
    hosted = _hosted(steps, checkpoints=True)
    run = hosted.env.trigger("dur.thirty")
    [(headers, body)] = hosted.host_adapter.sent
    # Another process of the same host: it never saw the signature, but the run's log did.
    other = StepHost(handler=hosted.handle, signer=RequestSigner(SECRET, clock=hosted.clock_s))
    replay = requests.Request("POST", HOST_URL, headers=headers, data=body).prepare()
    for _ in range(4):
        answer = WsgiAdapter(make_wsgi_app(other)).send(replay)
        assert (answer.status_code, answer.json()["error"]) == (409, "request_replayed")
    assert all(steps.calls[n] == 1 for n in range(1, 31))
    assert hosted.env.get_run(run.id).status == "completed"


def test_the_run_records_and_logs_the_durability_its_host_gave(
    caplog: pytest.LogCaptureFixture,
) -> None:
    by_route = _hosted(Steps(crash_at=None), checkpoints=True)
    durable = by_route.env.get_run(by_route.env.trigger("dur.thirty").id)
    assert (durable.status, durable.durability) == ("completed", "per_step")
    caplog.set_level("INFO", logger="relayflow.engine")
    plain = _hosted(Steps(crash_at=None), checkpoints=False)
    run = plain.env.trigger("dur.thirty")
    assert plain.env.get_run(run.id).durability == "per_invocation"
    [line] = [r.getMessage() for r in caplog.records if "durable per invocation" in r.getMessage()]
    assert run.id in line and "a crash re-runs the steps" in line


def test_requiring_per_step_durability_refuses_a_host_without_the_route_before_it_runs() -> None:
    steps = Steps(crash_at=None)
    hosted = _hosted(steps, checkpoints=False, settings=CoreSettings(require_per_step=True))
    run = hosted.env.get_run(hosted.env.trigger("dur.thirty").id)
    assert run.status == "failed"
    assert run.error is not None and run.error.code == "durability_unavailable"
    assert "no checkpoint log" in run.error.message
    assert sum(steps.calls.values()) == 0
    assert hosted.host_adapter.requests[0]["checkpoint"] == {"seq": 1, "required": True}


def test_requiring_per_step_durability_lets_a_host_with_the_route_run() -> None:
    steps = Steps(crash_at=None)
    hosted = _hosted(steps, checkpoints=True, settings=CoreSettings(require_per_step=True))
    run = hosted.env.get_run(hosted.env.trigger("dur.thirty").id)
    assert (run.status, run.durability) == ("completed", "per_step")


def test_requiring_per_step_durability_fails_a_run_whose_host_ignores_the_requirement() -> None:
    """A reference host ignores the channel and answers without ``durability``."""
    from relayflow.worker import handle_step_request

    def reference_host(raw: dict[str, Any], **options: Any) -> tuple[int, dict[str, Any]]:
        stripped = {key: value for key, value in raw.items() if key != "checkpoint"}
        status, body = handle_step_request(stripped, **options)
        return status, {k: v for k, v in body.items() if k not in ("durability", "capabilities")}

    steps = Steps(crash_at=None)
    env = WorkflowTestEnv(
        workflows=[per_step],
        services={"steps": steps},
        settings=CoreSettings(require_per_step=True),
    )
    host = InlineDispatcher(services={"steps": steps}, clock=env.clock, handler=reference_host)
    env.engine.dispatchers = DispatcherResolver(default=host)
    run = env.get_run(env.trigger("dur.thirty").id)
    assert (run.status, run.durability) == ("failed", "per_invocation")
    assert run.error is not None and run.error.code == "durability_unavailable"


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
