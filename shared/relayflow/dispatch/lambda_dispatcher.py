"""Delivers step requests to a step host Lambda with a synchronous (RequestResponse) invoke.

The host answers ``{"statusCode": s, "body": {...}}`` (the body may also be a JSON string).
A function error, throttling, 5xx or a transport failure is retried with a short backoff and
then raised as a transient :class:`~relayflow.errors.DispatchError`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from relayflow.clock import wall_s
from relayflow.dispatch.http_dispatcher import (
    TransportRetry,
    describe_answer,
    encode_request,
    interpret_answer,
    is_transient_status,
)
from relayflow.dispatch.signing import RequestSigner, SigningMode
from relayflow.errors import DispatchError

if TYPE_CHECKING:
    from mypy_boto3_lambda import LambdaClient


class LambdaDispatcher:
    """A :class:`~relayflow.ports.Dispatcher` that invokes one Lambda function per request.

    Without a secret the invoke payload is the step request itself. With one, it is a signed
    envelope ``{"headers": {<signature>}, "body": "<request JSON>"}`` that
    :func:`relayflow.entrypoints.worker.lambda_handler` verifies before running the request.

    Args:
        function_name_or_arn: The step host function (name, ARN, or ``name:alias``).
        client_factory: Returns the Lambda client (called on first dispatch, then cached).
        secret: Shared signing secret; unsigned payloads when None.
        mode: Signing scheme (``relayflow`` or ``voyant``).
        retry: Retry behaviour for transient failures.
        clock: Unix time in seconds for signature timestamps.
    """

    def __init__(
        self,
        function_name_or_arn: str,
        *,
        client_factory: Callable[[], LambdaClient],
        secret: str | None = None,
        mode: SigningMode = "relayflow",
        retry: TransportRetry | None = None,
        clock: Callable[[], float] = wall_s,
    ) -> None:
        self.function_name = function_name_or_arn
        self._client_factory = client_factory
        self._client: LambdaClient | None = None
        self._signer = RequestSigner(secret, mode=mode, clock=clock) if secret else None
        self._retry = retry or TransportRetry()

    def _lambda(self) -> LambdaClient:
        if self._client is None:
            self._client = self._client_factory()
        return self._client

    def _payload(self, request: dict[str, Any]) -> bytes:
        body = encode_request(request)
        if self._signer is None:
            return body
        envelope = {"headers": self._signer.headers(body), "body": body.decode("utf-8")}
        return encode_request(envelope)

    def dispatch(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """Invoke the function with ``request`` and return its (status, body).

        Raises:
            DispatchError: ``transient=True`` after the retries for function errors,
                throttling, 5xx and transport failures; ``transient=False`` for failures a
                retry cannot fix (no such function, access denied, payload too large).
        """
        # Imported here so this module never imports botocore itself (adapters/aws does).
        from relayflow.adapters.aws.errors import error_code, is_aws_error, is_transient

        attempts = self._retry.retries + 1
        last = DispatchError(f"no attempt reached {self.function_name}", transient=True)
        for attempt in range(attempts):
            try:
                answer = self._lambda().invoke(
                    FunctionName=self.function_name,
                    InvocationType="RequestResponse",
                    Payload=self._payload(request),
                )
            except Exception as exc:
                if not is_aws_error(exc):
                    raise
                code = error_code(exc) or type(exc).__name__
                if not is_transient(exc):
                    raise DispatchError(
                        f"cannot invoke step host {self.function_name}: {code}: {exc}",
                        transient=False,
                        code="tenant_unreachable",
                    ) from exc
                last = DispatchError(
                    f"step host {self.function_name} could not be invoked: {code}",
                    transient=True,
                    code="tenant_unreachable",
                )
            else:
                raw = answer["Payload"].read()
                if answer.get("FunctionError"):
                    last = DispatchError(
                        f"step host {self.function_name} raised "
                        f"({answer['FunctionError']}): {_error_summary(raw)}",
                        transient=True,
                        status=500,
                        code="tenant_error",
                    )
                else:
                    status, body = _unwrap(raw)
                    if status is None:
                        return _invalid(body)
                    if not is_transient_status(status):
                        return interpret_answer(status, body)
                    last = DispatchError(
                        f"step host {self.function_name} answered {describe_answer(status, body)}",
                        transient=True,
                        status=status,
                        code="tenant_error",
                    )
            if attempt + 1 < attempts:
                self._retry.sleep(self._retry.delay(attempt))
        last.message = f"{last.message} (after {attempts} attempts)"
        last.args = (last.message,)
        raise last


def _unwrap(raw: bytes) -> tuple[int | None, Any]:
    """Split a host payload into (statusCode, body); (None, reason) when it is not one."""
    try:
        parsed = json.loads(raw) if raw else None
    except (ValueError, UnicodeDecodeError):
        return None, "the function returned a payload that is not JSON"
    if not isinstance(parsed, dict) or not isinstance(parsed.get("statusCode"), int):
        return None, 'the function returned no {"statusCode", "body"} object'
    body = parsed.get("body")
    if isinstance(body, dict | str):
        return parsed["statusCode"], body
    return parsed["statusCode"], json.dumps(body)


def _invalid(reason: Any) -> tuple[int, dict[str, Any]]:
    return 502, {"error": "tenant_invalid_response", "message": str(reason)}


def _error_summary(raw: bytes) -> str:
    try:
        parsed = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return raw[:200].decode("utf-8", "replace")
    if isinstance(parsed, dict):
        kind = parsed.get("errorType", "error")
        return f"{kind}: {parsed.get('errorMessage', '')}"
    return str(parsed)[:200]
