"""End to end through the Lambda handlers only: api, drive (alarms) and sweeper."""

from __future__ import annotations

import json
from typing import Any

import pytest
from api_harness import ADMIN, RELEASED, TOKENS
from apigw import FakeLambdaContext, decode, http_event

from relayflow.api import handler as handlers
from relayflow.api import metrics as m
from relayflow.api.app import create_app
from relayflow.api.auth import StaticTokenAuth
from relayflow.api.metrics import RecordingMetrics
from relayflow.events.filters import compile_filter
from relayflow.events.manifest import build_manifest
from relayflow.testing import WorkflowTestEnv


class Stack:
    """The three handlers over one in-memory deployment."""

    def __init__(self, env: WorkflowTestEnv) -> None:
        self.env = env
        self.metrics = RecordingMetrics()
        self.api = handlers.make_lambda_handler(
            lambda: create_app(env.driver, env.admin, auth=StaticTokenAuth(TOKENS))
        )
        self.drive = handlers.make_drive_handler(lambda: env.driver, metrics=self.metrics)
        self.sweep = handlers.make_sweeper_handler(lambda: env.driver)
        self.context = FakeLambdaContext()

    def call(self, method: str, path: str, body: Any = None) -> Any:
        event = http_event(method, path, body=body, token=ADMIN)
        return decode(self.api(event, self.context))

    def fire_due_alarm(self, run_id: str) -> dict[str, Any]:
        wake_at = self.env.alarms.armed(run_id)
        assert wake_at is not None, "the run has no alarm"
        self.env.clock.set(wake_at)
        result: dict[str, Any] = self.drive({"runId": run_id, "wakeAt": wake_at}, self.context)
        return result


@pytest.fixture
def stack(env: WorkflowTestEnv) -> Stack:
    RELEASED.clear()
    return Stack(env)


def test_trigger_sleep_alarm_event_completion(stack: Stack) -> None:
    created = stack.call("POST", "/api/runs", {"workflowId": "api.ship", "input": {"id": "o7"}})
    run_id = created.body["id"]
    assert (created.status, created.body["status"]) == (201, "waiting")
    assert created.body["pendingWaitpoints"][0]["kind"] == "DATETIME"
    assert stack.call("GET", f"/api/runs/{run_id}").body["durability"] == "per_step"

    early = stack.drive({"runId": run_id, "wakeAt": 0}, stack.context)
    assert early == {"driven": [{"runId": run_id, "status": "waiting"}]}
    assert stack.call("GET", f"/api/runs/{run_id}").body["pendingWaitpoints"][0]["kind"] == (
        "DATETIME"
    )

    stack.fire_due_alarm(run_id)
    parked = stack.call("GET", f"/api/runs/{run_id}").body
    assert parked["status"] == "waiting"
    assert parked["pendingWaitpoints"][0]["eventType"] == "order.shipped"

    done = stack.call(
        "POST",
        f"/api/runs/{run_id}/events",
        {"eventType": "order.shipped", "payload": {"orderId": "o7", "carrier": "UPS"}},
    )
    assert done.body["status"] == "completed"
    assert done.body["output"]["shipment"]["carrier"] == "UPS"
    assert stack.metrics.counts[m.ALARMS_FIRED] == 2


def test_ingest_starts_a_matched_run(stack: Stack) -> None:
    flt = compile_filter("order.placed", {"target": {"id": "api.echo"}})
    manifest = build_manifest(
        environment="production", workflows=["api.echo"], event_filters=[flt], built_at=1
    )
    registered = stack.call(
        "POST", "/api/manifests", {"environment": "production", "manifest": manifest}
    )
    assert registered.body["ok"] is True

    ingested = stack.call(
        "POST",
        "/api/events",
        {
            "environment": "production",
            "envelope": {
                "name": "order.placed",
                "data": {"n": 1},
                "emittedAt": "2025-01-01T00:00:00Z",
            },
        },
    )

    [match] = ingested.body["matches"]
    run = stack.call("GET", "/api/runs/" + match["runId"]).body
    assert run["status"] == "completed"
    assert run["environment"] == "production"
    assert run["output"] == {"echo": {"n": 1}}


def test_cancel_with_compensation(stack: Stack) -> None:
    run_id = stack.call(
        "POST", "/api/runs", {"workflowId": "api.saga", "input": {"id": "s1"}}
    ).body["id"]

    cancelled = stack.call(
        "POST", f"/api/runs/{run_id}/cancel", {"compensate": True, "reason": "r"}
    )

    assert cancelled.status == 200
    assert cancelled.body["status"] in ("cancelled", "compensated")
    assert RELEASED == ["res-s1"]
    again = stack.call("POST", f"/api/runs/{run_id}/cancel", {})
    assert (again.status, again.body["error"]) == (409, "already_terminal")


def test_the_sweeper_drives_runs_whose_alarm_was_missed(stack: Stack) -> None:
    run_id = stack.call(
        "POST", "/api/runs", {"workflowId": "api.ship", "input": {"id": "o1"}}
    ).body["id"]
    wake_at = stack.env.alarms.armed(run_id)
    assert wake_at is not None
    stack.env.clock.set(wake_at + 1)

    swept = stack.sweep({}, stack.context)

    assert swept == {"swept": [run_id]}
    run = stack.call("GET", f"/api/runs/{run_id}").body
    assert run["pendingWaitpoints"][0]["kind"] == "EVENT"


def test_the_drive_handler_takes_sqs_batches(stack: Stack) -> None:
    run_id = stack.call(
        "POST", "/api/runs", {"workflowId": "api.ship", "input": {"id": "o1"}}
    ).body["id"]
    wake_at = stack.env.alarms.armed(run_id)
    assert wake_at is not None
    stack.env.clock.set(wake_at)
    batch = {
        "Records": [
            {
                "messageId": "m-1",
                "eventSource": "aws:sqs",
                "body": json.dumps({"runId": run_id, "wakeAt": wake_at}),
            },
            {"messageId": "m-2", "eventSource": "aws:sqs", "body": "not json"},
        ]
    }

    result = stack.drive(batch, stack.context)

    assert result == {
        "batchItemFailures": [{"itemIdentifier": "m-2"}],
        "driven": [{"runId": run_id, "status": "waiting"}],
    }
    assert stack.call("GET", f"/api/runs/{run_id}").body["pendingWaitpoints"][0]["kind"] == "EVENT"


def test_an_unconfigured_deployment_answers_500_internal_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RELAYFLOW_API_AUTH", "magic")
    handler = handlers.make_lambda_handler(handlers.build_app_from_env)

    answer = decode(handler(http_event("GET", "/api/healthz"), FakeLambdaContext()))

    assert answer.status == 500
    assert answer.body["error"] == "internal_error"
    assert answer.body["requestId"].startswith("req-")
