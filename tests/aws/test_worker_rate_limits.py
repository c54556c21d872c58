"""The worker function configured from its environment (as the CDK app deploys it, and as
the local stack runs it) reserves its steps' rate limits in the runs table."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from moto_driver import SETTINGS

from relayflow import config
from relayflow.adapters.aws import tables
from relayflow.adapters.aws.clients import AwsClients
from relayflow.flow import RateLimit
from relayflow.protocol import StepRequest
from relayflow.sdk.registry import workflow
from relayflow.worker import hosts

MINUTE = 60_000


@workflow(id="aws.worker.rated")
def rated(data: Any, ctx: Any) -> Any:
    limit = RateLimit(key="worker-partner", limit=1, window="1m")
    return ctx.step("call", lambda: data, rate_limit=limit)


@pytest.fixture
def worker_env(aws: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    tables.create_resources(AwsClients(region="eu-west-1"), SETTINGS)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    monkeypatch.setenv(config.ENV_CHECKPOINT_TABLE, SETTINGS.require("table_name"))
    monkeypatch.delenv("RELAYFLOW_WORKFLOW_MODULES", raising=False)
    config.current_settings.cache_clear()
    hosts._settings_host.cache_clear()
    yield
    config.current_settings.cache_clear()
    hosts._settings_host.cache_clear()


def _invoke(run_id: str) -> dict[str, Any]:
    request = StepRequest(
        run_id=run_id, workflow_id="aws.worker.rated", invocation_count=1, input=run_id
    ).to_wire()
    answer = hosts.lambda_handler(request, None)
    assert answer["statusCode"] == 200, answer
    body: dict[str, Any] = answer["body"]
    return body


def test_the_worker_function_shares_one_limit_across_runs(worker_env: None) -> None:
    first = _invoke("run-a")
    assert (first["status"], first["output"]) == ("completed", "run-a")
    second = _invoke("run-b")
    assert second["status"] == "waiting", "the minute's one call is taken"
    (wait,) = second["waitpoints"]
    assert (wait["clientWaitpointId"], wait["kind"]) == ("rate:call:1", "DATETIME")
    assert wait["meta"]["rateLimit"] == "worker-partner"
    # The slot is the window after the first call (less the moments between the calls).
    assert MINUTE - 5_000 < wait["timeoutMs"] <= MINUTE
