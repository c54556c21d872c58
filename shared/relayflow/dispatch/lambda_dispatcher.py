"""Delivers step requests to a step host Lambda with a synchronous (RequestResponse) invoke.

The host answers ``{"statusCode": s, "body": {...}}`` (the body may also be a JSON string).
A function error, throttling, 5xx or a transport failure is retried with a short backoff and
then raised as a transient :class:`~relayflow.errors.DispatchError`.

A run pinned to a version of the function (``codeVersion.function``, ``name:7``) is invoked
on that version, whatever alias the dispatcher was configured with; an answer names the
version Lambda ran (``ExecutedVersion``), which is what a run records and is pinned to.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from relayflow.clock import wall_s
from relayflow.costs.meter import UsageMeter
from relayflow.costs.usage import RunUsage
from relayflow.dispatch.http_dispatcher import (
    TransportRetry,
    describe_answer,
    encode_request,
    interpret_answer,
    is_transient_status,
)
from relayflow.dispatch.signing import RequestSigner, SigningMode
from relayflow.errors import DispatchError
from relayflow.protocol import VERSION_UNAVAILABLE

if TYPE_CHECKING:
    from mypy_boto3_lambda import LambdaClient


class LambdaDispatcher:
    """A :class:`~relayflow.ports.Dispatcher` that invokes one Lambda function per request.

    Without a secret the invoke payload is the step request itself. With one, it is a signed
    envelope ``{"headers": {<signature>}, "body": "<request JSON>"}`` that
    :func:`relayflow.entrypoints.worker.lambda_handler` verifies before running the request.

    A request pinned to a version of this function (its ``codeVersion.function`` names the
    same function, whatever the qualifier configured here) is invoked on that version; any
    other request on the function as configured. A pinned version that no longer exists is
    answered 409 ``version_unavailable``: the run waits for it, it does not fail.

    Args:
        function_name_or_arn: The step host function (name, ARN, or ``name:alias``).
        client_factory: Returns the Lambda client (called on first dispatch, then cached).
        secret: Shared signing secret; unsigned payloads when None.
        mode: Signing scheme (``relayflow`` or ``voyant``).
        retry: Retry behaviour for transient failures.
        clock: Unix time in seconds for signature timestamps.
        usage: Counts each invocation for the run being worked on (see ``relayflow.costs``).
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
        usage: UsageMeter | None = None,
    ) -> None:
        self.function_name = function_name_or_arn
        self._usage = usage
        self._unqualified, self._bare_name, _ = split_function(function_name_or_arn)
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

        version = self.pinned_version(request)
        target: dict[str, str] = (
            {"FunctionName": self.function_name}
            if version is None
            else {"FunctionName": self._unqualified, "Qualifier": version}
        )
        attempts = self._retry.retries + 1
        last = DispatchError(f"no attempt reached {self.function_name}", transient=True)
        for attempt in range(attempts):
            try:
                answer = self._lambda().invoke(
                    InvocationType="RequestResponse",
                    Payload=self._payload(request),
                    **target,  # type: ignore[arg-type]
                )
                if self._usage is not None:
                    self._usage.add_current(RunUsage(worker_invocations=1))
            except Exception as exc:
                if not is_aws_error(exc):
                    raise
                code = error_code(exc) or type(exc).__name__
                if version is not None and code == "ResourceNotFoundException":
                    return self._version_gone(version, exc)
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
                        return self._naming_executed(
                            interpret_answer(status, body), answer.get("ExecutedVersion")
                        )
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

    def pinned_version(self, request: dict[str, Any]) -> str | None:
        """The version of this function ``request`` is pinned to (None: invoke as configured).

        ``$LATEST`` is no version: it names whatever code was deployed last.
        """
        pin = request.get("codeVersion")
        function = pin.get("function") if isinstance(pin, dict) else None
        if not isinstance(function, str):
            return None
        _, name, qualifier = split_function(function)
        if name != self._bare_name or qualifier in (None, LATEST):
            return None
        return qualifier

    def _version_gone(self, version: str, exc: Exception) -> tuple[int, dict[str, Any]]:
        return 409, {
            "error": VERSION_UNAVAILABLE,
            "message": f"version {version} of step host function {self._bare_name} no longer "
            f"exists ({exc}); the run waits for it or for an operator to move it to the "
            "current version",
        }

    def _naming_executed(
        self, answer: tuple[int, dict[str, Any]], executed: str | None
    ) -> tuple[int, dict[str, Any]]:
        """``answer`` with its ``codeVersion.function`` naming the version Lambda ran.

        A host that named its build keeps it; for one that did not, the function version is
        the build (a published version's code never changes).
        """
        status, body = answer
        if status != 200 or not executed:
            return answer
        function = f"{self._bare_name}:{executed}"
        own = body.get("codeVersion")
        named = {**own} if isinstance(own, dict) and own.get("build") else {"build": function}
        return status, {**body, "codeVersion": {**named, "function": function}}


#: The qualifier of an unpublished function's code; a run on it pins no version.
LATEST = "$LATEST"


def split_function(name_or_arn: str) -> tuple[str, str, str | None]:
    """``(function without qualifier, bare name, qualifier)`` of a function name or ARN.

    ``stack-worker:live`` → ``("stack-worker", "stack-worker", "live")``;
    ``arn:aws:lambda:eu-west-1:1:function:stack-worker:7`` → the ARN without ``:7``, the
    name and ``"7"``.
    """
    parts = name_or_arn.split(":")
    # A full ARN (arn:aws:lambda:<region>:<account>:function:<name>), a partial one
    # (<account>:function:<name>) or a name; any of them may end in :<qualifier>.
    at = 6 if parts[0] == "arn" else 2 if len(parts) > 2 and parts[1] == "function" else 0
    if at >= len(parts):
        return name_or_arn, name_or_arn, None
    qualifier = parts[at + 1] if len(parts) > at + 1 else None
    return ":".join(parts[: at + 1]), parts[at], qualifier or None


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


class PinnedFunctionHandOff:
    """Hands a step request to the Lambda function version its run is pinned to.

    The api, drive and sweeper functions run workflow bodies in process and are invoked
    through their alias, on the newest version. When their step host refuses a request
    pinned to another build (``version_unavailable``) and the pin names a version of a
    function (``stack-drive:7``), :meth:`reach` invokes that version synchronously with the
    same request, which it answers as a step host does: one more invocation per request,
    only while the versions differ. Outside Lambda, or for a pin naming no version (none, or
    ``$LATEST``), it reaches nothing.

    Args:
        client_factory: Returns the Lambda client.
        secret: Shared signing secret; unsigned payloads when None.
        mode: Signing scheme.
        retry: Retry behaviour for transient failures.
        clock: Unix time in seconds for signature timestamps.
    """

    def __init__(
        self,
        *,
        client_factory: Callable[[], LambdaClient],
        secret: str | None = None,
        mode: SigningMode = "relayflow",
        retry: TransportRetry | None = None,
        clock: Callable[[], float] = wall_s,
    ) -> None:
        self._client_factory = client_factory
        self._secret = secret
        self._mode: SigningMode = mode
        self._retry = retry
        self._clock = clock
        self._dispatchers: dict[str, LambdaDispatcher] = {}

    def reach(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
        """The pinned version's answer to ``request``; None when no version can be reached.

        Raises:
            DispatchError: As :meth:`LambdaDispatcher.dispatch`.
        """
        # Imported here: the step host is a layer above the dispatchers.
        from relayflow.worker.builds import host_code_version

        pin = request.get("codeVersion")
        function = pin.get("function") if isinstance(pin, dict) else None
        here = host_code_version().function
        if not isinstance(function, str) or here is None or function == here:
            return None
        _, name, qualifier = split_function(function)
        if qualifier in (None, LATEST):
            return None
        dispatcher = self._dispatchers.get(name)
        if dispatcher is None:
            dispatcher = LambdaDispatcher(
                name,
                client_factory=self._client_factory,
                secret=self._secret,
                mode=self._mode,
                retry=self._retry,
                clock=self._clock,
            )
            self._dispatchers[name] = dispatcher
        return dispatcher.dispatch(request)
