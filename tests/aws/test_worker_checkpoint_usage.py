"""A Lambda worker writes a run's per-step checkpoints itself, out of the orchestrator's
sight: its answer reports what those writes cost, and the run's usage includes them."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from relayflow import workflow
from relayflow.adapters.aws import attributes, tables
from relayflow.adapters.aws.checkpoints import LOG_PREFIX
from relayflow.adapters.aws.wiring import build_aws_driver
from relayflow.config import DispatchTarget
from relayflow.costs import RunUsage
from relayflow.local.lambda_router import LocalLambdaClient
from relayflow.local.stack import LocalAwsClients
from relayflow.worker.hosts import make_lambda_handler, step_host_from_settings
from tests.aws.moto_driver import SETTINGS

pytestmark = pytest.mark.usefixtures("aws", "clean_registry")
STEPS = 5


def _pay(i: int) -> dict[str, Any]:
    return {"i": i, "receipt": f"r-{i:04d}"}


def _run_on_a_worker() -> tuple[RunUsage, list[RunUsage], list[dict[str, Any]]]:
    """Run a 5-step workflow with its steps on a Lambda worker that checkpoints each step;
    returns the run's recorded usage, what the worker's answers reported and the run's
    checkpoint log items."""

    @workflow(id="costs.worker")
    def paying(data: Any, ctx: Any) -> Any:
        return [ctx.step(f"pay{i}", _pay, i) for i in range(STEPS)]

    settings = dataclasses.replace(SETTINGS, dispatcher=DispatchTarget("lambda", "worker"))
    host = step_host_from_settings(settings, checkpoint_table=settings.require("table_name"))
    handler = make_lambda_handler(host)
    reported: list[RunUsage] = []

    def worker(event: Any, context: Any) -> Any:
        answer = handler(event, context)
        body = answer["body"] if isinstance(answer["body"], dict) else json.loads(answer["body"])
        reported.append(RunUsage.model_validate(body.get("checkpointUsage") or {}))
        return answer

    local = LocalLambdaClient({"worker": worker})
    clients = LocalAwsClients(local, region="eu-west-1")
    tables.create_resources(clients, settings)
    driver = build_aws_driver(settings, clients=clients, on_due=lambda run_id, wake: None)
    try:
        run = driver.trigger("costs.worker", {}, environment="production")
        stored = driver.engine.runs.get(run.id)
    finally:
        local.close()
    assert stored is not None and stored.status == "completed" and stored.usage is not None
    items = clients.dynamodb().query(
        TableName=settings.require("table_name"),
        KeyConditionExpression="#pk = :pk AND begins_with(#sk, :log)",
        ExpressionAttributeNames={"#pk": tables.PK, "#sk": tables.SK},
        ExpressionAttributeValues={":pk": {"S": run.id}, ":log": {"S": LOG_PREFIX}},
    )["Items"]
    return stored.usage, reported, items


def test_the_workers_checkpoint_writes_are_in_the_runs_usage() -> None:
    usage, reported, items = _run_on_a_worker()

    assert len(items) == STEPS  # one PutItem per step entry
    (answer,) = reported
    assert answer.dynamodb_requests == len(items)
    assert answer.dynamodb_write_units == sum(
        attributes.write_units(item, transactional=False) for item in items
    )
    assert usage.worker_invocations == 1
    # The orchestrator's own requests come on top of the worker's checkpoints.
    assert usage.dynamodb_requests > answer.dynamodb_requests
    assert usage.dynamodb_write_units > answer.dynamodb_write_units
