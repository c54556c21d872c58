"""A run's cost over HTTP, as deployed: the AWS driver on moto behind the API, steps on the
worker function. The run detail carries the usage the orchestrator recorded and its cost at
the deployment's price table; ``relayflow runs get`` prints both."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from aws_http import ENV, TOKEN, another_api, serve_api

from relayflow.cli import main
from relayflow.config import Settings
from relayflow.costs import PriceTable, RunUsage, cost_of


def _payment(i: int) -> dict[str, Any]:
    return {"i": i, "ok": True}


@pytest.fixture(scope="module")
def three_steps() -> None:
    from relayflow.sdk.registry import workflow

    @workflow(id="api.costs.three")
    async def three(data: Any, ctx: Any) -> Any:
        for i in range(3):
            await ctx.step(f"pay{i}", _payment, i)
        return "paid"


def test_the_run_detail_shows_its_usage_and_cost_and_the_cli_prints_them(
    three_steps: None,
) -> None:
    with serve_api() as api:
        started = api.post("/api/runs", {"workflowId": "api.costs.three"})
        assert started.status_code == 201, started.text
        run_id = started.json()["id"]
        run = api.get(f"/api/runs/{run_id}").json()
        out, err = io.StringIO(), io.StringIO()
        status = main(
            ["--url", api.url, "--token", TOKEN, "runs", "get", run_id], stdout=out, stderr=err
        )

    assert run["status"] == "completed"
    usage = RunUsage.model_validate(run["usage"])
    assert usage.dynamodb_requests > 0 and usage.dynamodb_write_units > 0
    assert usage.drive_invocations == 1  # the API request that started and drove it
    assert usage.worker_invocations >= 1  # the steps ran on the worker function
    assert run["cost"] == json.loads(cost_of(usage).model_dump_json(by_alias=True))
    assert set(run["cost"]["parts"]) == {"dynamodb", "lambda", "scheduler", "sqs", "s3"}
    assert status == 0, err.getvalue()
    printed = out.getvalue()
    cost_line = next(line for line in printed.splitlines() if line.startswith("cost "))
    assert f"${run['cost']['total']:.6f}" in cost_line
    assert "dynamodb $" in cost_line and "lambda $" in cost_line
    assert f"{usage.dynamodb_requests} DynamoDB requests" in printed


def test_the_deployments_price_table_prices_the_run(three_steps: None) -> None:
    prices = {"dynamodbWriteUnit": 1.0, "dynamodbReadUnit": 0.5}
    with serve_api() as api:
        started = api.post("/api/runs", {"workflowId": "api.costs.three"}).json()
        settings = Settings.from_env({**ENV, "RELAYFLOW_PRICE_TABLE": json.dumps(prices)})
        with another_api(settings) as priced:
            run = priced.get(f"/api/runs/{started['id']}").json()

    usage = RunUsage.model_validate(run["usage"])
    expected = usage.dynamodb_write_units * 1.0 + usage.dynamodb_read_units * 0.5
    assert run["cost"]["parts"]["dynamodb"] == pytest.approx(expected)
    assert run["cost"]["total"] == pytest.approx(cost_of(usage, PriceTable(**prices)).total)
