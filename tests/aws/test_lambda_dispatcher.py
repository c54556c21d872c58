"""The Lambda dispatcher invokes synchronously, retries transient failures and maps answers."""

from __future__ import annotations

import io
import json
from typing import Any

import boto3
import pytest
from botocore.response import StreamingBody
from botocore.stub import ANY, Stubber

from relayflow.dispatch.http_dispatcher import TransportRetry
from relayflow.dispatch.lambda_dispatcher import LambdaDispatcher, PinnedFunctionHandOff
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


# ---- code versions ---------------------------------------------------------------------------

WORKER_ARN = "arn:aws:lambda:eu-west-1:123456789012:function:stack-worker"


def _pinned(function: str | None) -> dict[str, Any]:
    pin = {"build": "build-1", "function": function} if function else None
    return {**REQUEST, "codeVersion": pin}


def _executed(body: dict[str, Any], version: str) -> dict[str, Any]:
    return {**_ok_payload(body), "ExecutedVersion": version}


@pytest.mark.parametrize(
    ("configured", "pin", "expected"),
    [
        # A pin of this function reaches that version, whatever qualifier is configured.
        (f"{WORKER_ARN}:live", "stack-worker:7", {"FunctionName": WORKER_ARN, "Qualifier": "7"}),
        ("stack-worker:live", "stack-worker:7", {"FunctionName": "stack-worker", "Qualifier": "7"}),
        ("stack-worker", "stack-worker:7", {"FunctionName": "stack-worker", "Qualifier": "7"}),
        # Anything else is invoked as configured.
        ("stack-worker:live", None, {"FunctionName": "stack-worker:live"}),
        ("stack-worker:live", "stack-drive:7", {"FunctionName": "stack-worker:live"}),
        ("stack-worker:live", "stack-worker-2:7", {"FunctionName": "stack-worker:live"}),
        ("stack-worker:live", "stack-worker:$LATEST", {"FunctionName": "stack-worker:live"}),
    ],
)
def test_a_run_pinned_to_a_version_of_the_function_is_invoked_on_it(
    configured: str, pin: str | None, expected: dict[str, str]
) -> None:
    client, stubber = _stubbed()
    stubber.add_response(
        "invoke",
        _executed({"status": "completed"}, expected.get("Qualifier", "9")),
        {**expected, "InvocationType": "RequestResponse", "Payload": ANY},
    )
    d = LambdaDispatcher(configured, client_factory=lambda: client)
    with stubber:
        d.dispatch(_pinned(pin))
    stubber.assert_no_pending_responses()


def test_the_answer_names_the_version_lambda_ran_and_keeps_the_hosts_build() -> None:
    client, stubber = _stubbed()
    host_version = {"build": "build-3", "function": "stack-worker:live"}
    stubber.add_response(
        "invoke", _executed({"status": "completed", "codeVersion": host_version}, "3")
    )
    stubber.add_response("invoke", _executed({"status": "completed"}, "3"))
    stubber.add_response("invoke", _executed({"status": "completed"}, "$LATEST"))
    d = LambdaDispatcher(f"{WORKER_ARN}:live", client_factory=lambda: client)
    with stubber:
        named = d.dispatch(REQUEST)[1]["codeVersion"]
        unnamed = d.dispatch(REQUEST)[1]["codeVersion"]
        latest = d.dispatch(REQUEST)[1]["codeVersion"]
    assert named == {"build": "build-3", "function": "stack-worker:3"}
    # A host that names no build: the published version is the build (its code is fixed).
    assert unnamed == {"build": "stack-worker:3", "function": "stack-worker:3"}
    assert latest["function"] == "stack-worker:$LATEST"


def test_a_refusal_is_passed_on_without_a_code_version() -> None:
    client, stubber = _stubbed()
    raw = json.dumps(
        {"statusCode": 409, "body": {"error": "version_unavailable", "message": "other build"}}
    ).encode()
    stubber.add_response(
        "invoke",
        {
            "StatusCode": 200,
            "Payload": StreamingBody(io.BytesIO(raw), len(raw)),
            "ExecutedVersion": "4",
        },
    )
    d = LambdaDispatcher("stack-worker:live", client_factory=lambda: client)
    with stubber:
        assert d.dispatch(REQUEST) == (
            409,
            {"error": "version_unavailable", "message": "other build"},
        )


def test_a_pinned_version_that_no_longer_exists_makes_the_run_wait_not_fail() -> None:
    client, stubber = _stubbed()
    stubber.add_client_error(
        "invoke", service_error_code="ResourceNotFoundException", http_status_code=404
    )
    sleeps = Sleeps()
    d = LambdaDispatcher(
        "stack-worker:live",
        client_factory=lambda: client,
        retry=TransportRetry(retries=2, sleep=sleeps),
    )
    with stubber:
        status, body = d.dispatch(_pinned("stack-worker:7"))
    assert (status, body["error"]) == (409, "version_unavailable")
    assert "version 7 of step host function stack-worker no longer exists" in body["message"]
    assert sleeps == [], "a missing version is not retried as a transport failure"


@pytest.mark.parametrize(
    ("running", "pin"),
    [
        (None, "stack-drive:1"),  # not in Lambda: nothing to hand the request to
        ("2", None),
        ("2", "stack-drive:$LATEST"),
        ("1", "stack-drive:1"),  # this very version refused it: another try would too
    ],
)
def test_a_hand_off_reaches_only_another_published_version(
    running: str | None, pin: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_LAMBDA_FUNCTION_NAME", raising=False)
    if running is not None:
        monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "stack-drive")
        monkeypatch.setenv("AWS_LAMBDA_FUNCTION_VERSION", running)
    fake = FakeLambda([])
    hand_off = PinnedFunctionHandOff(client_factory=lambda: fake)  # type: ignore[arg-type,return-value]
    assert hand_off.reach(_pinned(pin)) is None
    assert fake.calls == []


def test_a_hand_off_invokes_the_pinned_version_of_the_named_function(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "stack-drive")
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_VERSION", "2")
    fake = FakeLambda([{"statusCode": 200, "body": {"status": "completed"}}])
    hand_off = PinnedFunctionHandOff(client_factory=lambda: fake)  # type: ignore[arg-type,return-value]
    assert hand_off.reach(_pinned("stack-api:5")) == (200, {"status": "completed"})
    assert [(c["FunctionName"], c["Qualifier"]) for c in fake.calls] == [("stack-api", "5")]
