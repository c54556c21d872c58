"""The in-process Lambda client: invoke semantics the AWS adapters rely on."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from botocore.exceptions import ClientError

from relayflow.local.lambda_router import LocalLambdaClient

ARN = "arn:aws:lambda:us-east-1:123456789012:function:echo"


def echo(event: Any, context: Any) -> dict[str, Any]:
    if event.get("boom"):
        raise ValueError("boom requested")
    return {"got": event, "function": context.function_name}


@pytest.mark.parametrize("name", ["echo", ARN, f"{ARN}:live", "echo:live"])
def test_request_response_answers_the_handlers_json(name: str) -> None:
    client = LocalLambdaClient({"echo": echo})
    answer = client.invoke(FunctionName=name, Payload=json.dumps({"a": 1}))
    assert answer["StatusCode"] == 200
    assert "FunctionError" not in answer
    assert json.loads(answer["Payload"].read()) == {"got": {"a": 1}, "function": "echo"}
    client.close()


def test_a_raising_handler_answers_a_function_error() -> None:
    client = LocalLambdaClient({"echo": echo})
    answer = client.invoke(FunctionName="echo", Payload=b'{"boom": true}')
    assert answer["FunctionError"] == "Unhandled"
    error = json.loads(answer["Payload"].read())
    assert (error["errorType"], error["errorMessage"]) == ("ValueError", "boom requested")
    client.close()


def test_an_unknown_function_raises_resource_not_found() -> None:
    client = LocalLambdaClient({})
    with pytest.raises(ClientError) as caught:
        client.invoke(FunctionName="missing", Payload=b"{}")
    assert caught.value.response["Error"]["Code"] == "ResourceNotFoundException"
    client.close()


def test_an_event_invocation_runs_later_and_reports_failures() -> None:
    ran = threading.Event()
    errors: list[BaseException] = []

    def handler(event: Any, context: Any) -> None:
        ran.set()
        raise RuntimeError("async failure")

    client = LocalLambdaClient({"h": handler}, on_error=errors.append)
    answer = client.invoke(FunctionName="h", InvocationType="Event", Payload=b"{}")
    assert answer["StatusCode"] == 202
    client.close()  # waits for queued invocations
    assert ran.is_set()
    assert [str(e) for e in errors] == ["async failure"]
