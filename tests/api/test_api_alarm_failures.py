"""A run started over HTTP whose alarm cannot be armed: the answer says the run exists and how
it goes on (the sweeper drives it when due), and it does go on and complete."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from aws_http import serve_api
from botocore.exceptions import ClientError

from relayflow.adapters.aws.clients import AwsClients
from relayflow.clock import VirtualClock, wall_ms


@pytest.fixture(scope="module")
def sleepers() -> None:
    from relayflow.sdk.registry import workflow

    @workflow(id="alarms.short")
    async def short(data: Any, ctx: Any) -> Any:
        await ctx.sleep("10m")  # a delayed SQS message
        return {"slept": "10m"}

    @workflow(id="alarms.quick")
    async def quick(data: Any, ctx: Any) -> Any:
        return {"quick": True}

    @workflow(id="alarms.long")
    async def long(data: Any, ctx: Any) -> Any:
        await ctx.sleep("2h")  # an EventBridge Scheduler schedule
        return {"slept": "2h"}


class Refusing:
    """Refuses every call of one operation while ``on`` (a 500 outlasting botocore's retries)."""

    def __init__(self, service: str, operation: str) -> None:
        self.service, self.operation = service, operation
        self.on = True
        self.refused = 0

    def install(self, clients: AwsClients) -> None:
        client = clients.client(self.service)
        event = f"before-call.{client.meta.service_model.service_id.hyphenize()}.{self.operation}"
        client.meta.events.register(event, self._refuse)

    def _refuse(self, **_: Any) -> None:
        if self.on:
            self.refused += 1
            raise ClientError(
                {
                    "Error": {"Code": "InternalFailure", "Message": "injected"},
                    "ResponseMetadata": {"HTTPStatusCode": 500},
                },
                self.operation,
            )


@pytest.mark.parametrize(
    ("workflow_id", "service", "operation", "sleep_ms"),
    [
        ("alarms.short", "sqs", "SendMessage", 10 * 60_000),
        ("alarms.long", "scheduler", "CreateSchedule", 2 * 3_600_000),
    ],
)
def test_a_run_whose_alarm_cannot_be_armed_is_answered_as_stored_and_completes(
    sleepers: None, workflow_id: str, service: str, operation: str, sleep_ms: int
) -> None:
    fault = Refusing(service, operation)
    clock = VirtualClock(wall_ms())
    install: Callable[[AwsClients], None] = fault.install
    with serve_api(prepare=install, clock=clock) as api:
        answer = api.post("/api/runs", {"workflowId": workflow_id})
        assert answer.status_code == 201, answer.text
        run = answer.json()
        assert fault.refused > 0
        assert run["status"] == "waiting"
        assert run["notice"]["code"] == "drive_interrupted"
        assert "sweeper" in run["notice"]["message"]
        stored = api.get(f"/api/runs/{run['id']}").json()
        assert (stored["status"], stored["notice"]) == ("waiting", None)

        fault.on = False
        clock.advance(sleep_ms + 1_000)
        assert run["id"] in api.driver.engine.sweep()
        done = api.get(f"/api/runs/{run['id']}").json()
        assert (done["status"], done["output"]) == ("completed", {"slept": run_sleep(sleep_ms)})


def run_sleep(sleep_ms: int) -> str:
    return "10m" if sleep_ms == 10 * 60_000 else "2h"


def test_an_insert_that_fails_is_still_an_error(sleepers: None) -> None:
    fault = Refusing("dynamodb", "TransactWriteItems")
    put = Refusing("dynamodb", "PutItem")

    def install(clients: AwsClients) -> None:
        fault.install(clients)
        put.install(clients)

    with serve_api(prepare=install) as api:
        answer = api.post("/api/runs", {"workflowId": "alarms.short"})
        assert answer.status_code == 503, answer.text
        assert answer.json()["error"] == "unavailable"
        fault.on = put.on = False
        assert api.get("/api/runs").json()["runs"] == []


def test_a_run_that_cannot_be_handed_to_the_drive_function_is_answered_at_once(
    sleepers: None,
) -> None:
    """As deployed, the api hands each new run to the drive function with an alarm due now
    (a message on the alarm queue): when that fails the answer says so at once, instead of
    waiting out the inline budget for a drive that never starts."""
    fault = Refusing("sqs", "SendMessage")
    clock = VirtualClock(wall_ms())
    with serve_api(prepare=fault.install, clock=clock, hand_off=True) as api:
        answer = api.post("/api/runs", {"workflowId": "alarms.quick"})
        assert answer.status_code == 201, answer.text
        run = answer.json()
        assert (run["status"], run["notice"]["code"]) == ("running", "drive_interrupted")
        assert answer.elapsed.total_seconds() < 5  # the inline budget is 10 s

        fault.on = False
        assert run["id"] in api.driver.engine.sweep()
        done = api.get(f"/api/runs/{run['id']}").json()
        assert (done["status"], done["output"]) == ("completed", {"quick": True})
