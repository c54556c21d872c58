"""The Lambda dispatcher invokes synchronously, retries transient failures and maps answers."""

from __future__ import annotations

import io
import json
from typing import Any

import boto3
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber

from relayflow.dispatch.http_dispatcher import TransportRetry
from relayflow.dispatch.lambda_dispatcher import LambdaDispatcher
from relayflow.dispatch.signing import RequestSigner
from relayflow.errors import DispatchError

FUNCTION = "arn:aws:lambda:eu-west-1:123456789012:function:step-host"
REQUEST: dict[str, Any] = {"protocolVersion": 1, "runId": "r1", "input": [1, 2]}


class FakeLambda:
    """A Lambda client whose invoke answers from a script (moto never runs code)."""

    def __init__(self, script: list[Any]) -> None:
        self.script = list(script)
        self.calls: list[dict[str, Any]] = []

    def invoke(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        step = self.script.pop(0)
        if isinstance(step, BaseException):
            raise step
        payload, function_error = step if isinstance(step, tuple) else (step, None)
        raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        answer: dict[str, Any] = {"StatusCode": 200, "Payload": io.BytesIO(raw)}
        if function_error:
            answer["FunctionError"] = function_error
        return answer


class Sleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def make(script: list[Any], **kwargs: Any) -> tuple[LambdaDispatcher, FakeLambda, Sleeps]:
    fake = FakeLambda(script)
    sleeps = Sleeps()
    built = LambdaDispatcher(
        FUNCTION,
        client_factory=lambda: fake,  # type: ignore[arg-type,return-value]
        retry=TransportRetry(retries=2, sleep=sleeps),
        **kwargs,
    )
    return built, fake, sleeps


def test_the_payload_is_the_step_request_and_the_body_comes_back() -> None:
    answer = {"status": "completed", "output": 1}
    d, fake, sleeps = make([{"statusCode": 200, "body": answer}])
    assert d.dispatch(REQUEST) == (200, answer)
    call = fake.calls[0]
    assert call["FunctionName"] == FUNCTION
    assert call["InvocationType"] == "RequestResponse"
    assert json.loads(call["Payload"]) == REQUEST
    assert sleeps == []


def test_a_json_string_body_is_decoded() -> None:
    d, _, _ = make([{"statusCode": 200, "body": json.dumps({"status": "completed"})}])
    assert d.dispatch(REQUEST) == (200, {"status": "completed"})


def test_a_signed_envelope_carries_the_exact_request_bytes() -> None:
    d, fake, _ = make([{"statusCode": 200, "body": {}}], secret="k", clock=lambda: 1_700_000_000)
    d.dispatch(REQUEST)
    envelope = json.loads(fake.calls[0]["Payload"])
    assert json.loads(envelope["body"]) == REQUEST
    RequestSigner("k", clock=lambda: 1_700_000_000).verify(envelope["headers"], envelope["body"])


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        ({"statusCode": 404, "body": {"error": "workflow_not_found", "message": "x"}}, 404),
        ({"statusCode": 401, "body": {"error": "unauthorized", "message": "x"}}, 401),
        ({"statusCode": 400, "body": "not json"}, 502),
        (b"not json at all", 502),
        ({"unexpected": "shape"}, 502),
        ({"statusCode": 200, "body": [1]}, 502),
    ],
)
def test_non_transient_answers_are_returned(payload: Any, expected: int) -> None:
    d, fake, sleeps = make([payload])
    status, body = d.dispatch(REQUEST)
    assert status == expected
    assert isinstance(body["error"], str) and isinstance(body["message"], str)
    assert len(fake.calls) == 1
    assert sleeps == []


@pytest.mark.parametrize(
    "failure",
    [
        ({"errorType": "Runtime.ExitError", "errorMessage": "died"}, "Unhandled"),
        ({"statusCode": 500, "body": {"error": "executor_error", "message": "boom"}}),
        ({"statusCode": 429, "body": {"error": "busy", "message": "later"}}),
    ],
)
def test_function_errors_and_5xx_are_retried(failure: Any) -> None:
    d, fake, sleeps = make([failure, failure, {"statusCode": 200, "body": {"ok": 1}}])
    assert d.dispatch(REQUEST) == (200, {"ok": 1})
    assert len(fake.calls) == 3
    assert sleeps == [0.2, 0.4]


def test_function_errors_raise_a_transient_error_after_the_retries() -> None:
    failure = ({"errorType": "Runtime.ExitError", "errorMessage": "died"}, "Unhandled")
    d, fake, _ = make([failure] * 3)
    with pytest.raises(DispatchError, match=r"Runtime\.ExitError: died") as caught:
        d.dispatch(REQUEST)
    assert caught.value.transient is True
    assert "after 3 attempts" in caught.value.message
    assert len(fake.calls) == 3


def _stubbed() -> tuple[Any, Stubber]:
    client = boto3.client("lambda", region_name="eu-west-1")
    return client, Stubber(client)


def _ok_payload(body: dict[str, Any]) -> dict[str, Any]:
    raw = json.dumps({"statusCode": 200, "body": body}).encode()
    return {"StatusCode": 200, "Payload": StreamingBody(io.BytesIO(raw), len(raw))}


def test_throttling_is_retried_with_backoff() -> None:
    client, stubber = _stubbed()
    stubber.add_client_error(
        "invoke", service_error_code="TooManyRequestsException", http_status_code=429
    )
    stubber.add_client_error("invoke", service_error_code="ServiceException", http_status_code=500)
    stubber.add_response("invoke", _ok_payload({"status": "completed"}))
    sleeps = Sleeps()
    d = LambdaDispatcher(
        FUNCTION, client_factory=lambda: client, retry=TransportRetry(retries=2, sleep=sleeps)
    )
    with stubber:
        assert d.dispatch(REQUEST) == (200, {"status": "completed"})
    stubber.assert_no_pending_responses()
    assert sleeps == [0.2, 0.4]


def test_persistent_throttling_raises_transient() -> None:
    client, stubber = _stubbed()
    for _ in range(2):
        stubber.add_client_error(
            "invoke", service_error_code="TooManyRequestsException", http_status_code=429
        )
    d = LambdaDispatcher(
        FUNCTION, client_factory=lambda: client, retry=TransportRetry(retries=1, sleep=Sleeps())
    )
    with stubber, pytest.raises(DispatchError, match="TooManyRequestsException") as caught:
        d.dispatch(REQUEST)
    assert caught.value.transient is True


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("ResourceNotFoundException", 404),
        ("AccessDeniedException", 403),
        ("RequestTooLargeException", 413),
    ],
)
def test_permanent_invoke_errors_are_not_retried(code: str, status: int) -> None:
    client, stubber = _stubbed()
    stubber.add_client_error("invoke", service_error_code=code, http_status_code=status)
    sleeps = Sleeps()
    d = LambdaDispatcher(
        FUNCTION, client_factory=lambda: client, retry=TransportRetry(retries=2, sleep=sleeps)
    )
    with stubber, pytest.raises(DispatchError, match=code) as caught:
        d.dispatch(REQUEST)
    assert caught.value.transient is False
    assert sleeps == []


def test_the_client_is_created_once_on_first_dispatch() -> None:
    created: list[FakeLambda] = []

    def factory() -> FakeLambda:
        created.append(FakeLambda([{"statusCode": 200, "body": {}}] * 2))
        return created[-1]

    d = LambdaDispatcher(FUNCTION, client_factory=factory)  # type: ignore[arg-type]
    assert created == []
    d.dispatch(REQUEST)
    d.dispatch(REQUEST)
    assert len(created) == 1
