"""A Lambda client that runs functions in this process: moto's Lambda never runs code.

The local stack hands it to the AWS driver wherever a boto3 Lambda client is used (step
dispatch to the worker function, the asynchronous hand-off to the drive function), so those
production code paths run unchanged and land on the same handlers the Lambdas run.
"""

from __future__ import annotations

import io
import json
import logging
import secrets
import threading
import traceback
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from botocore.exceptions import ClientError
from botocore.response import StreamingBody

from relayflow.local.http_adapter import LocalLambdaContext

_log = logging.getLogger("relayflow.local")

LambdaFunction = Callable[[Any, Any], Any]


def _function_name(name_or_arn: str) -> str:
    # "arn:aws:lambda:<region>:<account>:function:<name>[:<qualifier>]" or a bare name.
    if name_or_arn.startswith("arn:"):
        parts = name_or_arn.split(":")
        return parts[6] if len(parts) > 6 else name_or_arn
    return name_or_arn.split(":", 1)[0]


def _body(data: bytes) -> StreamingBody:
    return StreamingBody(io.BytesIO(data), len(data))


class LocalLambdaClient:
    """The ``invoke`` part of a boto3 Lambda client, over in-process handlers.

    ``RequestResponse`` runs the handler now and answers its JSON result (or
    ``FunctionError: Unhandled`` with the error, as Lambda does); ``Event`` queues it on a
    worker thread and answers 202 at once. An unknown function raises the same
    ``ResourceNotFoundException`` Lambda does.

    Args:
        functions: Function name -> ``handler(event, context)``.
        workers: Threads for asynchronous (``Event``) invocations.
        on_error: Told about exceptions of asynchronous invocations (Lambda would retry them).
    """

    def __init__(
        self,
        functions: Mapping[str, LambdaFunction],
        *,
        workers: int = 4,
        on_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        self._functions = dict(functions)
        self._on_error = on_error
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="relayflow-lambda")
        self._closed = threading.Event()

    def invoke(
        self,
        *,
        FunctionName: str,
        InvocationType: str = "RequestResponse",
        Payload: bytes | str = b"{}",
        **_: Any,
    ) -> dict[str, Any]:
        """Invoke a function the way ``boto3.client("lambda").invoke`` does."""
        name = _function_name(FunctionName)
        handler = self._functions.get(name)
        if handler is None:
            response: Any = {
                "Error": {
                    "Code": "ResourceNotFoundException",
                    "Message": f"Function not found: {FunctionName}",
                },
                "ResponseMetadata": {"HTTPStatusCode": 404},
            }
            raise ClientError(response, "Invoke")
        raw = Payload.encode("utf-8") if isinstance(Payload, str) else bytes(Payload)
        event = json.loads(raw) if raw else {}
        if InvocationType == "Event":
            if not self._closed.is_set():
                self._pool.submit(self._run_async, name, handler, event)
            return {"StatusCode": 202, "Payload": _body(b"")}
        if InvocationType == "DryRun":
            return {"StatusCode": 204, "Payload": _body(b"")}
        try:
            result = handler(event, self._context(name))
        except Exception as exc:
            error = {
                "errorMessage": str(exc),
                "errorType": type(exc).__name__,
                "stackTrace": traceback.format_exception(exc)[-5:],
            }
            return {
                "StatusCode": 200,
                "FunctionError": "Unhandled",
                "Payload": _body(json.dumps(error).encode()),
            }
        return {"StatusCode": 200, "Payload": _body(json.dumps(result).encode())}

    def close(self) -> None:
        """Refuse new asynchronous invocations and wait for the running ones."""
        self._closed.set()
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _run_async(self, name: str, handler: LambdaFunction, event: Any) -> None:
        try:
            handler(event, self._context(name))
        except Exception as exc:
            if self._on_error is not None:
                self._on_error(exc)
            else:
                _log.exception("asynchronous invocation of %s failed", name)

    @staticmethod
    def _context(name: str) -> LocalLambdaContext:
        return LocalLambdaContext(
            function_name=name, aws_request_id=secrets.token_hex(16), timeout_ms=900_000
        )
